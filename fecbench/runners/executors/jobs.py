"""The local parallel executor (`fecbench run --jobs N`): N networks on this machine, one run in flight
on each, without Dask.

Runs mostly wait on emulated delays, not on the CPU, so several networks overlap well even on a 2-core
machine. Each network is a separate testbed (its own name prefix, droppers and delay elements) with its
own Runner, driven by its own thread; the engine in the main thread records every start and outcome.
Like the Dask executor, a network keeps taking runs of its current design point while there are any,
so it reconfigures its links (and measures fidelity) rarely; every run keeps its own loss seed.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fecbench.inputs.errors import UserError
from fecbench.records.status import Status
from fecbench.runners.executors.engine import Finished, Started
from fecbench.runners.executors.selection import RunQueue
from fecbench.runners.executors.serial import TestbedFactory, log_root_for
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.lifecycle import Runner, run_one
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.testbed import MininetTestbed, Testbed

MAX_JOBS = 32
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


class JobsExecutor:
    def __init__(self, prepared: Prepared, db_path: Path, jobs: int, *, link_backend: str | None,
                 keep_logs: bool = False, testbed_factory: TestbedFactory = MininetTestbed,
                 calibration: dict[str, Any] | None = None) -> None:
        self.prepared, self.jobs, self.calibration = prepared, jobs, calibration
        self.link_backend, self.keep_logs = link_backend, keep_logs
        self.log_root = log_root_for(db_path)
        self.testbed_factory = testbed_factory
        self.name = f"{jobs} networks"
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
            slot.run = queue.pop_near(slot.point, {s.point for s in self.slots if s is not slot})
            if slot.run is None:
                break
            slot.point = slot.run.point
            slot.started = time.monotonic()
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
