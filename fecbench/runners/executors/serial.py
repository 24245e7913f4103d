"""The serial executor: one network in this process, runs executed one after the other, in order."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fecbench.records.status import Status
from fecbench.runners.executors.engine import Finished, Started
from fecbench.runners.executors.selection import RunQueue
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.lifecycle import Runner, run_one
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.testbed import MininetTestbed, Testbed

# Builds a testbed for a topology, at a first point's values, with a link backend (None: probe).
TestbedFactory = Callable[[Any, dict[str, Any], "str | None"], Testbed]


def log_root_for(db_path: Path) -> Path:
    """Where runs keep their logs: results/<name>.logs/ beside the database."""
    return db_path.resolve().parent / f"{db_path.stem}.logs"


def twin_log_root(db_path: Path) -> Path:
    """Where twins (`fecbench run --twins`) keep their run folders, apart from their runs' own:
    results/<name>.twins.logs/, and beside it their artifacts (<name>.twins.artifacts/)."""
    return db_path.resolve().parent / f"{db_path.stem}.twins.logs"


class SerialExecutor:
    name = "one network"

    def __init__(self, prepared: Prepared, db_path: Path, *, link_backend: str | None, keep_logs: bool = False,
                 testbed_factory: TestbedFactory = MininetTestbed) -> None:
        self.prepared, self.link_backend, self.keep_logs = prepared, link_backend, keep_logs
        self.log_root = log_root_for(db_path)
        self.testbed_factory = testbed_factory
        self.testbed: Testbed | None = None
        self.runner: Runner | None = None
        self.current: Run | None = None

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.runner is not None:
            self.runner.stop_all()
        if self.testbed is not None:
            self.testbed.stop()

    def start(self, todo: list[Run]) -> None:
        self.testbed = self.testbed_factory(self.prepared.topology, todo[0].values, self.link_backend)
        self.runner = Runner(self.prepared, self.testbed, self.log_root, self.keep_logs)

    def backend(self) -> str:
        assert self.testbed is not None
        return self.testbed.backend

    def host_info(self) -> dict[str, Any]:
        from fecbench.runners.executors.hostinfo import fingerprint

        return fingerprint(self.backend())

    def host_info_changed(self) -> bool:
        return False

    def busy(self) -> bool:
        return self.current is not None

    def dispatch(self, queue: RunQueue) -> list[Started]:
        if self.current is not None or not queue:
            return []
        assert self.testbed is not None
        self.current = queue.pop_next()
        return [Started(self.current, self.testbed.hostname, self.testbed.backend)]

    def collect(self, timeout: float) -> list[Finished]:
        """Execute the current run here and now (a KeyboardInterrupt leaves it current, for cancel)."""
        if self.current is None:
            return []
        assert self.runner is not None
        started = time.monotonic()
        outcome, harness_error = run_one(self.runner, self.current)
        run, self.current = self.current, None
        return [Finished(run, outcome, harness_error, time.monotonic() - started)]

    def cancel(self, reason: str) -> list[Finished]:
        if self.current is None:
            return []
        run, self.current = self.current, None
        return [Finished(run, Outcome(status=Status.INTERRUPTED, error=reason))]

    def abort_reason(self) -> str | None:
        return None
