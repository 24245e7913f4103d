"""Running a pack's chosen runs within its time budget: one ordinary campaign per (profile, design).

Each campaign runs its chosen runs in the plan's order through ``fecbench run``'s steps (the machine's executor:
``runners.executors.make_executor``; the engine: ``runners.commands.pipeline.execute``) on one network, or on N
(``--jobs N``; ``auto``: calibrated once per workload class, on the first campaign of that class that runs, as
``fecbench run --jobs auto`` does, its serial pilot drawn from the runs the budget chose and kept as results: a class
whose runs wait on slow links gets the networks its CPU share allows, one whose runs keep the CPU busy its own; and
at most ``MESSAGES_MAX_JOBS`` networks for real-time messages, whose endpoints suffer first: designs/README.md,
"What lateness does not see"), or on a Dask cluster (``--dask``, as ``fecbench run --dask``: one
cluster session per campaign and batch; a tls:// cluster's worker count, learnt from the first
campaign, sizes the next batches).

Tails. A network that ends a run with none of its campaign's chosen runs left to start, while others still run,
asks ``fill`` for more of that campaign's runs (a reproduction's ``session.TailFill``); every outcome is recorded in
its campaign (``campaign.record``) as the engine reports it, so that choice sees what is done.

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from fecbench.runners.commands.pipeline import Execution, execute
from fecbench.runners.executors import Machine, make_executor
from fecbench.runners.executors.engine import Executor, Finished
from fecbench.runners.executors.jobs import CpuModel
from fecbench.runners.executors.progress import Reporter
from fecbench.runners.executors.quiet import FIDELITY_RERUNS
from fecbench.runners.executors.selection import runs_to_do
from fecbench.runners.experiment.runs import Run
from fecbench.verdicts.campaign import RUN_AGAIN, Campaign, read, record
from fecbench.verdicts.profiles import Target

MESSAGES_MAX_JOBS = 4
#: What a campaign costs besides its runs: Python, planning, building the network(s).
CAMPAIGN_START_S = 8.0
#: A campaign's time share may overrun its estimate by this factor before it stops starting runs.
SHARE_MARGIN = 1.25
#: ``--jobs auto``: runs of the serial pilot, drawn from those the budget chose.
PILOT_RUNS = 8


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
    # The outcomes the engine reported as it recorded them, in order (``session._record``).
    finished: list[Finished] = field(default_factory=list)


def jobs_for(campaign: Campaign, jobs: int) -> int:
    return min(jobs, MESSAGES_MAX_JOBS) if campaign.prepared.design.workload.kind == "messages" else jobs


def networks(machine: Machine, campaign: Campaign | None = None) -> int:
    """Runs at once (planning the budget; what runs at once is the executor's business): a campaign's class's own
    choice once --jobs auto calibrated it, else the machine's."""
    if machine.dask is not None:
        from fecbench.runners.executors.distributed import parse_target

        kind, value = parse_target(machine.dask)
        return int(value) if kind == "local" else machine.workers or 1
    mine = _class_calibration(machine, campaign) if campaign is not None else None
    jobs = int(mine["chosen"]) if mine else machine.jobs or 1
    return jobs_for(campaign, jobs) if campaign is not None else jobs


def _class_calibration(machine: Machine, campaign: Campaign) -> dict[str, Any] | None:
    from fecbench.runners.executors.calibrations import class_key

    return machine.by_class.get(class_key(campaign.prepared, machine.link_backend))


def _calibration(machine: Machine, campaign: Campaign) -> dict[str, Any] | None:
    """The --jobs auto calibration a campaign runs on: its class's, else the machine's."""
    return _class_calibration(machine, campaign) or machine.calibration


def parallel(machine: Machine, campaign: Campaign | None = None, runs: list[Run] | None = None) -> float:
    """Runs' worth of machine time per second of wall time: a fifth is lost to sharing the machine. Networks that start
    runs by CPU (``executors.jobs.CpuModel``) run ``runs`` at most as many at once as their mean cores (by time) fit."""
    n: float = networks(machine, campaign)
    cpu = CpuModel.read((_calibration(machine, campaign) or {}).get("cpu_model")) if campaign is not None else None
    if cpu is not None and campaign is not None and runs:
        seconds = [campaign.seconds(run) for run in runs]
        cores = sum(cpu.cost(run, campaign.prepared.design) * s for run, s in zip(runs, seconds, strict=True))
        n = min(n, max(1.0, cpu.budget * sum(seconds) / max(cores, 1e-9)))
    return n * 0.8 if n > 1 else 1.0


def settle(machine: Machine, campaign: Campaign, target: Target, runs: list[Run], reporter: Reporter) -> bool:
    """``--jobs auto`` is calibrated once per workload class, on the first campaign of the class that runs: the
    calibration ``runners.executors.calibrations`` makes (or reuses) on its design, its serial pilot drawn from
    ``runs`` (those the budget chose) and recorded as results. The machine keeps each class's calibration (and the
    first one's choice plans the batches). True when it calibrated (its pilot's runs are then in the database)."""
    if machine.dask is not None or (machine.jobs is not None and not machine.by_class):
        return False   # --jobs N, or a cluster
    from fecbench.runners.executors.calibrations import class_key, for_campaign

    key = class_key(campaign.prepared, machine.link_backend)
    if key in machine.by_class:
        return False
    todo = runs_to_do(campaign.prepared, target.db, set(), only=runs)
    calibration = for_campaign(campaign.prepared, target.db, machine.link_backend, reporter, runs=todo,
                               pilot_runs=PILOT_RUNS, recalibrate=machine.recalibrate)
    machine.by_class[key] = calibration
    if machine.jobs is None:
        machine.calibration, machine.jobs = calibration, int(calibration["chosen"])
    return True


def calibrate(items: list[tuple[Target, Campaign, list[Run]]], machine: Machine, deadline: float | None,
              reporter: Reporter) -> bool:
    """--jobs auto: ``settle`` on the first campaign that has runs to do (its serial pilot's runs are results);
    False when the budget ended first."""
    target, campaign, runs = next(item for item in items if item[2])
    try:
        with deadline_alarm(deadline):
            settle(machine, campaign, target, runs, reporter)
    except BudgetSpent:
        reporter.say("[yellow]time budget spent while calibrating --jobs auto: the pilot's runs in "
                     "flight are recorded interrupted (redone next time)[/]")
        return False
    # The calibration records its pilot's runs itself and hands back no outcomes: what they did is read back.
    read(campaign)
    return True


def share_ends(started: float, deadline: float | None, estimated: float, saved: float, *, typical_s: float,
               later: int) -> float | None:
    """When a campaign may start no more runs (the module's time rule; None: no deadline): its estimate a quarter
    more (``SHARE_MARGIN``) and what earlier campaigns saved (never what they overspent) after its start, and no
    later than leaves a typical run of it and the ``later`` campaigns' starts before the deadline."""
    if deadline is None:
        return None
    return min(deadline - typical_s - later * CAMPAIGN_START_S, started + estimated * SHARE_MARGIN + max(0.0, saved))


def run_all(items: list[tuple[Target, Campaign, list[Run]]], *, machine: Machine, deadline: float | None,
            reporter: Reporter, fill: Callable[..., list[Run]] | None = None) -> list[Ran]:
    """Run each campaign's chosen runs in turn (see the module for the time rules), each outcome recorded in its
    campaign as the engine reports it; ``fill(campaign, tail, last=)``: more of a campaign's runs for its networks
    idle in its tail (``last``: the batch's last campaign with runs)."""
    done: list[Ran] = []
    saved = 0.0
    last = max((index for index, item in enumerate(items) if item[2]), default=-1)
    for index, (target, campaign, runs) in enumerate(items):
        if not runs:
            continue
        if machine.jobs is None or (machine.by_class and _class_calibration(machine, campaign) is None):
            # --jobs auto, this workload class not calibrated yet (its pilot's runs are then done: runs_to_do skips)
            if not calibrate([(target, campaign, runs)], machine, deadline, reporter):
                break
        n = networks(machine, campaign)
        estimated = sum(campaign.seconds(r) for r in runs) / parallel(machine, campaign, runs) + CAMPAIGN_START_S
        started = time.monotonic()
        stop_at = share_ends(started, deadline, estimated, saved,
                             typical_s=sorted(campaign.seconds(r) for r in runs)[len(runs) // 2],
                             later=sum(1 for _, _, r in items[index + 1:] if r))
        if stop_at is not None and stop_at <= started:
            done.append(Ran(target, len(runs), {}, 0.0, estimated, out_of_time=len(runs), jobs=n))
            continue
        reporter.say(f"[bold]{target.profile} / {campaign.prepared.design.name}[/]: {len(runs)} run(s), "
                     f"estimated {estimated / 60:.1f} min → {target.db}")
        calibration = _calibration(machine, campaign)
        executor = make_executor(campaign.prepared, target.db, machine, n, calibration, reporter)
        finished: list[Finished] = []
        more = None if fill is None else partial(fill, campaign, last=index == last)
        try:
            with deadline_alarm(deadline):
                # A flagged run the allocator chose runs once more (its first outcome kept aside).
                todo = runs_to_do(campaign.prepared, target.db, set(RUN_AGAIN), only=runs)
                summary = execute(campaign.prepared, target.db, Execution(executor, todo, calibration, n),
                                  reporter, retry=set(RUN_AGAIN), reruns=FIDELITY_RERUNS, stop_at=stop_at,
                                  on_finished=partial(_recorded, finished, campaign), fill_tail=more)
            _ran_on(machine, executor)
        except BudgetSpent:
            done.append(Ran(target, len(runs), {}, time.monotonic() - started, estimated, stopped=True, jobs=n,
                            finished=finished))
            reporter.say("[yellow]time budget spent: the runs in flight are recorded interrupted (redone next "
                         "time)[/]")
            break
        took = time.monotonic() - started
        saved += estimated - took
        done.append(Ran(target, summary.selected, dict(summary.counts), took, estimated,
                        out_of_time=summary.out_of_time, jobs=n, reruns=summary.retried, finished=finished))
    return done


def _recorded(finished: list[Finished], campaign: Campaign, done: Finished) -> None:
    """An outcome the engine recorded: kept with the batch, and in its campaign at once (a tail's next runs are
    chosen from what is done)."""
    finished.append(done)
    record(campaign, [done])


def _ran_on(machine: Machine, executor: Executor) -> None:
    """What a Dask campaign found: the most workers it had ready (the next batch plans with them)."""
    workers = getattr(executor, "most_workers", 0)
    if workers:
        machine.workers = max(machine.workers or 0, workers)


def merge(ran: list[Ran]) -> list[Ran]:
    """One ``Ran`` per campaign over the batches (counts, times and outcomes added)."""
    out: dict[tuple[str, str], Ran] = {}
    for r in ran:
        key = (r.target.profile, r.target.alias)
        if key not in out:
            out[key] = replace(r, counts=dict(r.counts), finished=list(r.finished))
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
        m.finished += r.finished
    return list(out.values())
