"""A campaign's route, step by step: check the inputs → plan the runs → estimate and decide how to execute →
execute → summarise. `fecbench run` is these steps in order (cli/run.py); `reproduce` and `bench campaign`
take the steps they share with it from here (the machine and its executor: `runners.executors`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.runners.executors import Machine, make_executor

if TYPE_CHECKING:
    from collections.abc import Callable

    from fecbench.runners.executors.engine import Executor, Finished, Summary, Tail
    from fecbench.runners.executors.progress import Reporter
    from fecbench.runners.experiment.estimate import CampaignEstimate
    from fecbench.runners.experiment.prepare import Prepared
    from fecbench.runners.experiment.runs import Run


@dataclass
class Execution:
    """What step 3 decided: the executor, the runs it gets (a --jobs auto pilot's runs are results already) and
    the calibration that chose the number of networks, if one did."""
    executor: Executor
    todo: list[Run]
    calibration: dict[str, Any] | None = None
    jobs: int = 1
    notes: list[str] = field(default_factory=list)


# --- 1. check the inputs -----------------------------------------------------------------------------------
def check_inputs(design: Path, *, capture: str | None = None, accept_short_timeout: bool = False,
                 dry_run: bool = False) -> Prepared:
    """The design validated (implementations, planner, topology, loss, every argument by its stack's check), the
    capture policy as the command overrides it, and the capture tools present when runs may keep packets."""
    from fecbench.runners.experiment.checks import validate

    prepared = validate(design, accept_short_timeout=accept_short_timeout, dry_run=dry_run)
    if capture is not None:
        from fecbench.runners.experiment.capture import parse_option

        prepared.design.capture = parse_option(capture, prepared.design.capture)
    if not dry_run:
        from fecbench.runners.run.pcap import require_tools

        require_tools(prepared.design.capture)   # tcpdump and editcap, when runs may keep packet captures
    return prepared


# --- 2. plan the runs --------------------------------------------------------------------------------------
def choose_runs(prepared: Prepared, db_path: Path, retry: set[str], sample: int | None = None,
              only: str | None = None) -> list[Run]:
    """The one selection of the runs to do (pending, interrupted, the statuses to retry, a seeded sample, `--only`
    these keys); a campaign given more repetitions keeps the keys of the runs its database holds
    (`continue_recorded`)."""
    from fecbench.runners.executors.selection import continue_recorded, only_keys, runs_to_do

    continue_recorded(prepared, db_path)
    return runs_to_do(prepared, db_path, retry, sample, only_keys(prepared, only))


# --- 3. estimate and decide how to execute -----------------------------------------------------------------
def estimate(prepared: Prepared, todo: list[Run], machine: Machine, db_path: Path) -> CampaignEstimate:
    from fecbench.runners.experiment.estimate import estimate_campaign

    return estimate_campaign(prepared, todo, machine.jobs, db_path)


def decide_execution(prepared: Prepared, db_path: Path, todo: list[Run], machine: Machine,
                     reporter: Reporter) -> Execution:
    """The executor for the machine chosen; --jobs auto calibrates first (its serial pilot's runs are kept)."""
    jobs, calibration = machine.jobs, None
    if jobs is None and not todo:
        jobs = 1
    if jobs is None:
        from fecbench.runners.executors.calibrations import for_campaign

        calibration = for_campaign(prepared, db_path, machine.link_backend, reporter, runs=todo,
                                   pilot_runs=machine.jobs_pilot, recalibrate=machine.recalibrate)
        jobs = int(calibration["chosen"])
        kept = set(calibration["recorded"])
        todo = [run for run in todo if run.key not in kept]
    executor = make_executor(prepared, db_path, machine, jobs, calibration, reporter)
    return Execution(executor, todo, calibration, jobs)


# --- 4. execute --------------------------------------------------------------------------------------------
def execute(prepared: Prepared, db_path: Path, execution: Execution, reporter: Reporter, *, retry: set[str],
            breaker: int = 5, reruns: int = 0, stop_at: float | None = None,
            on_finished: Callable[[Finished], None] | None = None,
            fill_tail: Callable[[Tail], list[Run]] | None = None) -> Summary:
    """The engine runs the execution's runs (``stop_at``: none starts after it, time.monotonic(); ``on_finished``:
    told of each outcome the engine records as the run's; ``fill_tail``: more runs for idle networks)."""
    from fecbench.runners.executors.engine import Engine

    return Engine(prepared, db_path, execution.executor, reporter, breaker_runs=breaker, todo=execution.todo,
                  fidelity_reruns=reruns, stop_at=stop_at, on_finished=on_finished, fill_tail=fill_tail).run(retry)


def twins(prepared: Prepared, db_path: Path, n: int, machine: Machine, jobs: int, reporter: Reporter, *,
          reruns: int = 0) -> Summary | None:
    """``--twins N``: N of the campaign's ok runs run again under their keys on as many networks as the campaign
    used (``selection.twins``: seeded, none twinned twice), each recorded beside its run (the twins table), never in
    its place; a flagged twin re-run as a twin (``reruns`` rounds). None when no run is left to twin."""
    from fecbench.runners.executors import selection
    from fecbench.runners.executors.engine import Engine

    todo = selection.twins(prepared, db_path, n)
    if not todo:
        return None
    executor = make_executor(prepared, db_path, machine, jobs, None, reporter, twins=True)
    return Engine(prepared, db_path, executor, reporter, todo=todo, fidelity_reruns=reruns, twins=True).run(set())


# --- 5. summarise ------------------------------------------------------------------------------------------
def summary_lines(db_path: Path, summary: Summary) -> list[tuple[str, str]]:
    """(rich style, line) of what the campaign did: counts, re-runs of flagged runs, breakers, why it stopped."""
    done = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing to do"
    lines = [("", f"{db_path}: {summary.selected} of {summary.total} run(s) executed: {done}"
                  + (f" ({rerun_text(summary)})" if summary.rounds else ""))]
    lines += [("red", f"circuit breaker: {tripped.text()}") for tripped in summary.breakers]
    if summary.aborted:
        lines.append(("red", f"campaign stopped: {summary.aborted}"))
    return lines


def rerun_text(summary: Summary) -> str:
    """What the re-runs of flagged runs did: rounds, re-runs and how many runs ended flagged after them."""
    first, last = summary.rounds[0], summary.rounds[-1]
    text = (f"{first['runs']} run(s) flagged fidelity, re-run in {len(summary.rounds)} round(s) ({summary.retried} "
            f"re-run(s)): {last['still_flagged']} still flagged; every earlier outcome kept in earlier_outcomes")
    return text + (f"; {summary.rerun_skipped} not re-run before the stop time" if summary.rerun_skipped else "")
