"""Running a pack's chosen runs within its time budget: one ordinary campaign per (profile, design).

Each campaign runs its chosen runs in the plan's order (``Engine(only=…)``) on one network, or on N
(``--jobs N``; ``auto``: calibrated once, on the first campaign, as ``fecbench run --jobs auto`` does,
and at most ``MESSAGES_MAX_JOBS`` networks for real-time messages, whose endpoints suffer first:
designs/README.md, "What lateness does not see").

Time. The campaigns run one after the other; each may start runs until its share of the time left
ends (its estimate, a quarter more, and what earlier campaigns saved), and none after the runs'
deadline: runs not started stay pending (the next ``fecbench run`` or ``fecbench reproduce`` does
them). At the deadline itself a run still in flight is stopped, as Ctrl-C would (recorded
``interrupted``, redone next time), so the whole command ends within its budget.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fecbench.reproduce.plan import Campaign
from fecbench.reproduce.profiles import Target
from fecbench.runners.executors.engine import Engine
from fecbench.runners.experiment.runs import Run

MESSAGES_MAX_JOBS = 4
#: What a campaign costs besides its runs: Python, planning, building the network(s).
CAMPAIGN_START_S = 8.0
#: A campaign's time share may overrun its estimate by this factor before it stops starting runs.
SHARE_MARGIN = 1.25


class BudgetSpent(KeyboardInterrupt):
    """The budget's deadline came with runs in flight: the engine records them interrupted."""


@contextlib.contextmanager
def deadline_alarm(deadline: float | None) -> Iterator[None]:
    """Raise BudgetSpent in this (main) thread at ``deadline`` (time.monotonic())."""
    if deadline is None:
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise BudgetSpent("the time budget is spent")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, deadline - time.monotonic()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Ran:
    """What one campaign did."""
    target: Target
    selected: int
    counts: dict[str, int]
    seconds: float
    estimated: float
    out_of_time: int = 0
    stopped: bool = False            # the deadline interrupted it
    jobs: int = 1


def jobs_for(campaign: Campaign, jobs: int) -> int:
    return min(jobs, MESSAGES_MAX_JOBS) if campaign.prepared.design.workload.kind == "messages" else jobs


def executor_for(campaign: Campaign, target: Target, jobs: int, link_backend: str | None) -> Any:
    if jobs > 1:
        from fecbench.runners.executors.jobs import JobsExecutor

        return JobsExecutor(campaign.prepared, target.db, jobs, link_backend=link_backend)
    from fecbench.runners.executors.serial import SerialExecutor

    return SerialExecutor(campaign.prepared, target.db, link_backend=link_backend)


def calibrate_jobs(campaign: Campaign, link_backend: str | None, console: Any, pilot_runs: int = 8) -> int:
    """``--jobs auto``: the number of networks ``runners.executors.calibrate`` chooses on this campaign's design."""
    from fecbench.runners.executors.calibrate import calibrate

    with console.status(f"--jobs auto: calibrating on {campaign.prepared.design.name}"):
        chosen = int(calibrate(campaign.prepared, link_backend, pilot_runs=pilot_runs)["chosen"])
    console.print(f"--jobs auto: {chosen} network(s)")
    return chosen


def run_all(items: list[tuple[Target, Campaign, list[Run]]], *, jobs: int | None, link_backend: str | None,
            deadline: float | None, console: Any) -> list[Ran]:
    """Run each campaign's chosen runs in turn (see the module for the time rules)."""
    done: list[Ran] = []
    saved = 0.0
    for index, (target, campaign, runs) in enumerate(items):
        if not runs:
            continue
        if jobs is None:
            jobs = calibrate_jobs(campaign, link_backend, console)
        n = jobs_for(campaign, jobs)
        estimated = sum(campaign.seconds(r) for r in runs) / (n * (0.8 if n > 1 else 1.0)) + CAMPAIGN_START_S
        started = time.monotonic()
        stop_at = None
        if deadline is not None:
            later = sum(1 for _, _, r in items[index + 1:] if r)
            typical = sorted(campaign.seconds(r) for r in runs)[len(runs) // 2]
            stop_at = min(deadline - typical - later * CAMPAIGN_START_S,
                          started + estimated * SHARE_MARGIN + max(0.0, saved))
            if stop_at <= started:
                done.append(Ran(target, len(runs), {}, 0.0, estimated, out_of_time=len(runs), jobs=n))
                continue
        console.print(f"[bold]{target.profile} / {campaign.prepared.design.name}[/]: {len(runs)} run(s), "
                      f"estimated {estimated / 60:.1f} min → {target.db}")
        engine = Engine(campaign.prepared, target.db, executor_for(campaign, target, n, link_backend), console,
                        only=runs, stop_at=stop_at)
        try:
            with deadline_alarm(deadline):
                summary = engine.run(set())
        except BudgetSpent:
            done.append(Ran(target, len(runs), {}, time.monotonic() - started, estimated, stopped=True, jobs=n))
            console.print("[yellow]time budget spent: the runs in flight are recorded interrupted (redone next "
                          "time)[/]")
            break
        took = time.monotonic() - started
        saved += estimated - took
        done.append(Ran(target, summary.selected, dict(summary.counts), took, estimated,
                        out_of_time=summary.out_of_time, jobs=n))
    return done


def merge(ran: list[Ran]) -> list[Ran]:
    """One ``Ran`` per campaign over the batches (counts and times added)."""
    out: dict[tuple[str, str], Ran] = {}
    for r in ran:
        key = (r.target.profile, r.target.alias)
        if key not in out:
            out[key] = Ran(r.target, r.selected, dict(r.counts), r.seconds, r.estimated, r.out_of_time, r.stopped,
                           r.jobs)
            continue
        m = out[key]
        m.selected += r.selected
        for status, n in r.counts.items():
            m.counts[status] = m.counts.get(status, 0) + n
        m.seconds += r.seconds
        m.estimated += r.estimated
        m.out_of_time = r.out_of_time
        m.stopped = m.stopped or r.stopped
    return list(out.values())
