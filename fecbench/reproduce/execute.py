"""Running a pack's chosen runs within its time budget: one ordinary campaign per (profile, design).

Each campaign runs its chosen runs in the plan's order (``Engine(only=…)``) on one network, or on N
(``--jobs N``; ``auto``: calibrated once, on the first campaign, as ``fecbench run --jobs auto`` does,
its serial pilot drawn from the runs the budget chose and kept as results; and at most
``MESSAGES_MAX_JOBS`` networks for real-time messages, whose endpoints suffer first: designs/README.md,
"What lateness does not see"), or on a Dask cluster (``--dask``, as ``fecbench run --dask``: one
cluster session per campaign and batch; a tls:// cluster's worker count, learnt from the first
campaign, sizes the next batches).

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
from typing import TYPE_CHECKING, Any

from fecbench.reproduce.campaign import RUN_AGAIN, Campaign
from fecbench.reproduce.profiles import Target
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.selection import runs_to_do
from fecbench.runners.experiment.runs import Run

if TYPE_CHECKING:
    from fecbench.runners.executors.dask_security import CampaignSecurity
    from fecbench.runners.executors.engine import Executor

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
    reruns: int = 0                  # re-runs of runs it flagged (fecbench.runners.executors.engine: rounds at the end)


def jobs_for(campaign: Campaign, jobs: int) -> int:
    return min(jobs, MESSAGES_MAX_JOBS) if campaign.prepared.design.workload.kind == "messages" else jobs


@dataclass
class Machines:
    """Where a pack's runs run: ``jobs`` networks on this machine (None: ``--jobs auto``, calibrated on the
    first campaign that runs) or a Dask cluster (``dask``: local:N or tls://HOST:PORT, with the campaign's
    credentials, as ``fecbench run --dask``)."""
    jobs: int | None = 1
    link_backend: str | None = None
    dask: str | None = None
    security: CampaignSecurity | None = None
    dashboard: bool = False
    recalibrate: bool = False
    dask_workers: int | None = None   # tls://: the most workers a campaign of this command had ready
    calibration: dict[str, Any] | None = None   # --jobs auto: recorded with every campaign run on its choice

    def networks(self, campaign: Campaign | None = None) -> int:
        """Runs at once (planning the budget; what runs at once is the executor's business)."""
        if self.dask is not None:
            from fecbench.runners.executors.distributed import parse_target

            kind, value = parse_target(self.dask)
            return int(value) if kind == "local" else self.dask_workers or 1
        jobs = self.jobs or 1
        return jobs_for(campaign, jobs) if campaign is not None else jobs

    def parallel(self, campaign: Campaign | None = None) -> float:
        """Runs' worth of machine time per second of wall time: a fifth is lost to sharing the machine."""
        n = self.networks(campaign)
        return n * 0.8 if n > 1 else 1.0

    def settle(self, campaign: Campaign, target: Target, runs: list[Run], console: Any) -> None:
        """``--jobs auto`` is calibrated once, on the first campaign that runs."""
        if self.jobs is None:
            self.calibration = calibrate_jobs(campaign, target, runs, self.link_backend, console,
                                              recalibrate=self.recalibrate)
            self.jobs = int(self.calibration["chosen"])

    def executor(self, campaign: Campaign, target: Target, console: Any) -> Executor:
        """The executor `fecbench run` would make for this machine (runners.commands.pipeline.make_executor)."""
        from fecbench.runners.commands.pipeline import Machine, make_executor

        machine = Machine(jobs=self.jobs, dask=self.dask, link_backend=self.link_backend, security=self.security,
                          dashboard=self.dashboard)
        return make_executor(campaign.prepared, target.db, machine, self.networks(campaign), self.calibration, console)

    def ran_on(self, executor: Executor) -> None:
        """What a Dask campaign found: the most workers it had ready (the next batch plans with them)."""
        workers = getattr(executor, "most_workers", 0)
        if workers:
            self.dask_workers = max(self.dask_workers or 0, workers)


def calibrate_jobs(campaign: Campaign, target: Target, runs: list[Run], link_backend: str | None, console: Any,
                   pilot_runs: int = 8, recalibrate: bool = False) -> dict[str, Any]:
    """``--jobs auto``: the calibration ``runners.executors.calibrations`` makes (or reuses) on this campaign's
    design, its serial pilot drawn from ``runs`` (those the budget chose) and recorded as results."""
    from fecbench.runners.executors.calibrations import for_campaign

    todo = runs_to_do(campaign.prepared, target.db, set(), only=runs)
    return for_campaign(campaign.prepared, target.db, link_backend, console, runs=todo, pilot_runs=pilot_runs,
                        recalibrate=recalibrate)


def run_all(items: list[tuple[Target, Campaign, list[Run]]], *, machines: Machines, deadline: float | None,
            console: Any) -> list[Ran]:
    """Run each campaign's chosen runs in turn (see the module for the time rules)."""
    done: list[Ran] = []
    saved = 0.0
    for index, (target, campaign, runs) in enumerate(items):
        if not runs:
            continue
        machines.settle(campaign, target, runs, console)
        n = machines.networks(campaign)
        estimated = sum(campaign.seconds(r) for r in runs) / machines.parallel(campaign) + CAMPAIGN_START_S
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
        executor = machines.executor(campaign, target, console)
        engine = Engine(campaign.prepared, target.db, executor, console, only=runs, stop_at=stop_at)
        try:
            with deadline_alarm(deadline):
                # A failed or flagged run the allocator chose runs once more (its first outcome kept aside).
                summary = engine.run(set(RUN_AGAIN))
            machines.ran_on(executor)
        except BudgetSpent:
            done.append(Ran(target, len(runs), {}, time.monotonic() - started, estimated, stopped=True, jobs=n))
            console.print("[yellow]time budget spent: the runs in flight are recorded interrupted (redone next "
                          "time)[/]")
            break
        took = time.monotonic() - started
        saved += estimated - took
        done.append(Ran(target, summary.selected, dict(summary.counts), took, estimated,
                        out_of_time=summary.out_of_time, jobs=n, reruns=summary.retried))
    return done


def merge(ran: list[Ran]) -> list[Ran]:
    """One ``Ran`` per campaign over the batches (counts and times added)."""
    out: dict[tuple[str, str], Ran] = {}
    for r in ran:
        key = (r.target.profile, r.target.alias)
        if key not in out:
            out[key] = Ran(r.target, r.selected, dict(r.counts), r.seconds, r.estimated, r.out_of_time, r.stopped,
                           r.jobs, r.reruns)
            continue
        m = out[key]
        m.selected += r.selected
        for status, n in r.counts.items():
            m.counts[status] = m.counts.get(status, 0) + n
        m.seconds += r.seconds
        m.estimated += r.estimated
        m.out_of_time = r.out_of_time   # the last batch's: runs of earlier ones left pending were chosen again
        m.stopped = m.stopped or r.stopped
        m.reruns += r.reruns
    return list(out.values())
