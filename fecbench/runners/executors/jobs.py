"""The local parallel executor (`fecbench run --jobs N`): N networks on this machine, one run in flight
on each, without Dask.

Runs mostly wait on emulated delays, not on the CPU, so several networks overlap well even on a 2-core
machine. Each network is a separate testbed (its own name prefix, droppers and delay elements) with its
own Runner, driven by its own thread; the engine in the main thread records every start and outcome.
Like the Dask executor, a network keeps taking runs of its current design point while there are any,
so it reconfigures its links (and measures fidelity) rarely; every run keeps its own loss seed. With a CPU model
(`--jobs auto`'s calibration; CPU-weighted admission, below), a network starts the next run only while the runs in
flight and it fit the CPU budget: the next run waits (first in line) for the CPU the others free. Runs start
`START_GAP_S` apart while others run.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fecbench.inputs.errors import UserError
from fecbench.records.status import Status
from fecbench.runners.executors.engine import Finished, Started
from fecbench.runners.executors.selection import RunQueue
from fecbench.runners.executors.serial import TestbedFactory, log_root_for
from fecbench.runners.experiment.design import Design
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import PACKET_BYTES, Run, estimate_seconds
from fecbench.runners.run.lifecycle import Runner, run_one
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.testbed import MininetTestbed, Testbed
from fecbench.timekeeping import checks

MAX_JOBS = 32
#: Seconds between two runs' starts while others run: the endpoints of runs started together start together (process
#: start, handshake, slow start: a burst of CPU each), and sixteen such bursts at once kept the endpoints of a cellular
#: cut waiting for a CPU up to 83 ms on a machine 90 % idle (11 of 16 runs flagged); the same runs staggered did not.
START_GAP_S = 1.0
CANCEL_WAIT_S = 60


def parse_jobs(text: str, *, allow_auto: bool = False) -> int | None:
    """A number of networks, or None for `auto` (where allowed: chosen by `runners.executors.calibrate`)."""
    if allow_auto and text == "auto":
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_JOBS:
        more = " or auto" if allow_auto else ""
        raise UserError(f"--jobs {text!r}: expected a number of networks from 1 to {MAX_JOBS}{more}")
    return int(text)


@dataclass
class _Slot:
    testbed: Testbed
    runner: Runner
    point: int | None = None
    run: Run | None = None
    future: cf.Future | None = None
    started: float = 0.0
    cost: float = 0.0      # the run's expected cores (0 without a CPU model)


class JobsExecutor:
    def __init__(self, prepared: Prepared, db_path: Path, jobs: int, *, link_backend: str | None,
                 keep_logs: bool = False, testbed_factory: TestbedFactory = MininetTestbed,
                 calibration: dict[str, Any] | None = None) -> None:
        self.prepared, self.jobs, self.calibration = prepared, jobs, calibration
        self.link_backend, self.keep_logs = link_backend, keep_logs
        self.log_root = log_root_for(db_path)
        self.testbed_factory = testbed_factory
        self.starts = Starts(CpuModel.read((calibration or {}).get("cpu_model")), prepared.design)
        self.name = f"{jobs} networks" + (" (CPU-weighted)" if self.starts.cpu else "")
        self.slots: list[_Slot] = []
        self.pool: cf.ThreadPoolExecutor | None = None

    def __enter__(self) -> JobsExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        for slot in self.slots:
            slot.runner.stop_all()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        for slot in self.slots:
            slot.testbed.stop()

    def start(self, todo: list[Run]) -> None:
        # Built one after another in this (main) thread: building traps signals and names interfaces.
        for _ in range(min(self.jobs, len(todo))):
            testbed = self.testbed_factory(self.prepared.topology, todo[0].values, self.link_backend)
            try:
                runner = Runner(self.prepared, testbed, self.log_root, self.keep_logs)
            except BaseException:
                testbed.stop()
                raise
            self.slots.append(_Slot(testbed, runner))
        self.pool = cf.ThreadPoolExecutor(max_workers=len(self.slots), thread_name_prefix="fecbench-job")

    def backend(self) -> str:
        return self.slots[0].testbed.backend

    def host_info(self) -> dict[str, Any]:
        from fecbench.runners.executors.hostinfo import fingerprint

        info = {**fingerprint(self.backend()), "jobs": len(self.slots),
                "networks": [slot.testbed.prefix for slot in self.slots]}
        if self.calibration is not None:
            info["jobs_calibration"] = self.calibration  # --jobs auto: what was measured and chosen
        return info

    def host_info_changed(self) -> bool:
        return False

    def busy(self) -> bool:
        return any(slot.run is not None for slot in self.slots)

    def dispatch(self, queue: RunQueue) -> list[Started]:
        assert self.pool is not None
        started = []
        for slot in self.slots:
            if slot.run is not None or not queue:
                continue
            if not self.starts.gap_open(self.busy()):
                break
            run = queue.pop_near(slot.point, {s.point for s in self.slots if s is not slot})
            cost = self.starts.cost(run) if run is not None else 0.0
            if run is None or not self.starts.admits(cost, [s.cost for s in self.slots if s.run is not None]):
                queue.put_back([run] if run is not None else [])
                break
            slot.run, slot.cost = run, cost
            slot.point = slot.run.point
            slot.started = self.starts.started()
            slot.future = self.pool.submit(run_one, slot.runner, slot.run)
            started.append(Started(slot.run, slot.testbed.hostname, slot.testbed.backend))
        return started

    def collect(self, timeout: float) -> list[Finished]:
        futures = [slot.future for slot in self.slots if slot.future is not None]
        if not futures:
            return []
        cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        done = []
        for slot in self.slots:
            if slot.future is not None and slot.future.done() and slot.run is not None:
                outcome, harness_error = slot.future.result()
                self.starts.finished(slot.started, checks.load_flagged(outcome.endpoints, outcome.link_stats))
                done.append(Finished(slot.run, outcome, harness_error, time.monotonic() - slot.started))
                slot.run, slot.future = None, None
        return done

    def cancel(self, reason: str) -> list[Finished]:
        """Stop every run in flight (its processes) and wait for its thread; those runs are interrupted."""
        busy = [slot for slot in self.slots if slot.run is not None]
        futures = [slot.future for slot in busy if slot.future is not None]
        deadline = time.monotonic() + CANCEL_WAIT_S
        # Stop again until each thread returns: a run stopped between its server and its client starts
        # the client next.
        while futures and time.monotonic() < deadline:
            for slot in busy:
                slot.runner.stop_all()
            _, pending = cf.wait(futures, timeout=0.2)
            futures = list(pending)
        lost = []
        for slot in busy:
            assert slot.run is not None
            lost.append(Finished(slot.run, Outcome(status=Status.INTERRUPTED, error=reason)))
            slot.run, slot.future = None, None
        return lost

    def abort_reason(self) -> str | None:
        return None


# --- CPU-weighted admission ---------------------------------------------------------------------------
# With `--jobs auto`'s CPU model, a network starts its next run only while the runs in flight, with it, are
# expected to keep at most `calibrate.CPU_TARGET` of the usable CPUs busy. A machine then keeps many networks busy where
# runs wait on slow links (a satellite download at 1.5 Mbit/s takes a few % of a core for minutes) and few where they
# keep the CPU busy (a 20 Mbit/s download), instead of one network count for both (issue 67, item 1).
#
# A run's CPU is modelled from what it moves: cores = ``floor`` + ``per_mbit`` × its expected rate (its bytes × 8 ÷ its
# expected duration, `runs.estimate_seconds`: the loss-limited rate model the budgets use). Both constants are fitted on
# the calibration's serial pilot (one run at a time): each run's endpoint CPU (their cgroup's `cpu.stat`,
# `timekeeping.endpoint_timing`) against its wall time and its megabits (least squares, both ≥ 0), scaled by the whole
# pilot's CPU (this process and every child it reaped: the harness, the delay elements) ÷ the endpoints' sum, since the
# rest grows with the traffic too. Fitted here on rquic2021's rQUIC runs: 0.038 core per run + 0.024 per Mbit/s.
#
# The calibration then tries networks up to as many as its lightest runs fit (`ceiling`), each loaded pilot under this
# admission, and judges the results against serial as before: what it keeps is a number of networks *and* the rule that
# fills them.

#: Pilot runs with a measured endpoint CPU the fit needs (two constants).
MIN_FITTED = 3


def run_bytes(run: Run, design: Design) -> float:
    """The bytes a run's workload moves (both directions of an exchange; a message stream's packets)."""
    workload = design.workload
    if workload.kind == "messages":
        return workload.rate * workload.packets * PACKET_BYTES * workload.duration
    if workload.kind == "reqresp":
        return workload.exchanges * sum(workload.exchange_sizes(run.size))
    return float(run.size or 0)


def expected_mbit_s(run: Run, design: Design) -> float:
    """The run's expected rate: its bytes over its modelled duration."""
    return run_bytes(run, design) * 8 / 1e6 / max(1e-3, estimate_seconds(run, design))


@dataclass(frozen=True)
class CpuModel:
    """What a run costs in cores, and how many cores the runs in flight may keep busy."""
    floor: float      # cores per run whatever it moves
    per_mbit: float   # cores per Mbit/s it moves
    budget: float     # CPU_TARGET × the usable CPUs

    def cost(self, run: Run, design: Design) -> float:
        return self.floor + self.per_mbit * expected_mbit_s(run, design)

    def ceiling(self, runs: list[Run], design: Design, most: int) -> int:
        """The most networks the lightest of ``runs`` fill within the budget (at most ``most``)."""
        lightest = min((self.cost(run, design) for run in runs), default=self.budget)
        return max(1, min(most, math.floor(self.budget / max(lightest, 1e-6))))

    def record(self) -> dict[str, float]:
        return {key: round(value, 6) for key, value in asdict(self).items()}

    @classmethod
    def read(cls, recorded: dict[str, Any] | None) -> CpuModel | None:
        if not recorded:
            return None
        return cls(float(recorded["floor"]), float(recorded["per_mbit"]), float(recorded["budget"]))


@dataclass(frozen=True)
class PilotRun:
    """What the fit reads of one serial pilot run."""
    wall_s: float
    megabits: float
    endpoint_cpu_share: float | None    # the endpoints' CPU ÷ the run's wall time (None: not measured)


def fit(runs: list[PilotRun], total_cpu_s: float, budget: float) -> CpuModel | None:
    """The model from a serial pilot's runs (see the module); None when fewer than ``MIN_FITTED`` runs measured
    their endpoints' CPU (the calibration then bounds the networks by the pilot's CPU share alone, as before)."""
    import numpy as np
    from scipy.optimize import nnls

    measured = [r for r in runs if r.endpoint_cpu_share is not None and r.wall_s > 0]
    if len(measured) < MIN_FITTED:
        return None
    walls = np.array([r.wall_s for r in measured])
    cpu = np.array([r.endpoint_cpu_share for r in measured]) * walls
    (floor, per_mbit), _ = nnls(np.column_stack([walls, [r.megabits for r in measured]]), cpu)
    endpoints = float(cpu.sum())
    scale = max(1.0, total_cpu_s / endpoints) if endpoints > 0 else 1.0
    return CpuModel(float(floor) * scale, float(per_mbit) * scale, budget)


#: A run the host's load flagged (`checks.load_flagged`: its endpoints or its delay elements waited for a CPU) shrinks
#: the CPU budget by BACKOFF, once per run started since the budget last shrank (runs admitted under the larger
#: budget do not shrink it again); each run that ended unflagged grows it by the factor that (1 − FLAGGED_TARGET) ÷
#: FLAGGED_TARGET of them need to undo one cut, up to the model's. Where a share FLAGGED_TARGET of the runs is
#: flagged, cuts and growth balance: the budget settles there, whatever the calibration's pilot promised. Measured
#: on rquic2021 (issue 67): the calibration's 8-run pilot kept its results on 31 networks, and admission by the
#: model alone then had 115 of the campaign's 270 runs flagged by their endpoints' waits (rQUIC with coding at the
#: lossy Wi-Fi points, about 10 in flight).
BACKOFF = 0.3
FLAGGED_TARGET = 0.05
GROWTH = (1 - BACKOFF) ** (-FLAGGED_TARGET / (1 - FLAGGED_TARGET))


@dataclass
class Starts:
    """When a network may start its next run, in a campaign (`JobsExecutor`) and in `--jobs auto`'s loaded pilots
    alike: `START_GAP_S` after the last start while other runs are in flight, and within the CPU budget beside
    them (``cpu``; None: any run). In a campaign the budget follows the runs' flags (``finished``)."""
    cpu: CpuModel | None
    design: Design
    last: float = -START_GAP_S
    budget: float = math.inf          # the budget now (the model's until a run is flagged)
    lowered_at: float = -math.inf     # when it last shrank
    lowered: int = 0                  # how often it shrank

    def __post_init__(self) -> None:
        if self.cpu is not None:
            self.budget = self.cpu.budget

    def cost(self, run: Run) -> float:
        """The run's expected cores (0 without a CPU model)."""
        return self.cpu.cost(run, self.design) if self.cpu else 0.0

    def gap_open(self, others_running: bool) -> bool:
        return not others_running or time.monotonic() - self.last >= START_GAP_S

    def admits(self, cost: float, in_flight: list[float]) -> bool:
        """A run of ``cost`` may start beside runs of ``in_flight`` costs (one always may: a run heavier than the
        budget alone runs alone)."""
        return self.cpu is None or not in_flight or sum(in_flight) + cost <= self.budget

    def started(self) -> float:
        """A run starts now: the time, kept as the last start."""
        self.last = time.monotonic()
        return self.last

    def record(self) -> dict[str, float | int] | None:
        """What the budget did, for the campaign's session record (None without a CPU model): the model's cores,
        the budget at the end and how often the flags shrank it."""
        if self.cpu is None:
            return None
        return {"model_cores": round(self.cpu.budget, 3), "final_cores": round(self.budget, 3),
                "lowered": self.lowered}

    def finished(self, started_at: float, load_flagged: bool) -> None:
        """A run started at ``started_at`` ended, flagged by the host's load or not: the budget follows (above)."""
        if self.cpu is None or started_at < self.lowered_at:
            return
        if load_flagged:
            self.budget = max(self.cpu.floor, self.budget * (1 - BACKOFF))
            self.lowered_at, self.lowered = time.monotonic(), self.lowered + 1
        else:
            self.budget = min(self.cpu.budget, self.budget * GROWTH)
