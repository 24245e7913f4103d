"""The campaign engine's logic, without root: the real Engine, SerialExecutor, Runner, Recorder and SQLite,
real processes of the fake implementation, on the in-memory testbed (tests/helpers/fake_testbed.py).
Ordering, statuses, resume exactly once, retry, the harness-error circuit breaker, Ctrl-C and
kill-and-resume bookkeeping."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fecbench import cleanup
from fecbench.runners.engine import MAX_HARNESS_ERRORS, Engine, RunQueue, parse_retry
from fecbench.runners.prepare import prepare
from fecbench.runners.serial import SerialExecutor
from fecbench.status import Status
from tests.helpers.campaign import fake_design, rows
from tests.helpers.fake_testbed import FakeTestbed

BEHAVIOURS = {"ok": {}, "fail": {"behave": "fail"}, "hang": {"behave": "hang"},
              "unsupported": {"behave": "unsupported"}, "garbage": {"behave": "garbage"},
              "serverdies": {"server_behave": "die"}}
EXPECTED = {"ok": "ok", "fail": "failed", "hang": "timeout", "unsupported": "unsupported", "garbage": "failed",
            "serverdies": "failed"}


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fecbench records the processes it starts in a state folder: a test's own, writable without root."""
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


class Campaign:
    """One design, one database; each `run()` is a `fecbench run` with its own fresh testbed."""

    def __init__(self, tmp_path: Path, labels: dict[str, dict[str, str]], *, points: int = 2,
                 timeout_s: float = 1.5, **testbed: Any) -> None:
        self.design = fake_design(tmp_path / "camp.toml", labels, points=points, timeout_s=timeout_s)
        self.db = tmp_path / "camp.sqlite"
        self.prepared = prepare(self.design)
        self.testbed_options = testbed
        self.testbeds: list[FakeTestbed] = []

    def factory(self, topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        testbed = FakeTestbed(topology, values, backend, **self.testbed_options)
        self.testbeds.append(testbed)
        return testbed

    def run(self, retry: str | None = None) -> Any:
        executor = SerialExecutor(self.prepared, self.db, link_backend=None, testbed_factory=self.factory)
        return Engine(self.prepared, self.db, executor, Console(quiet=True)).run(parse_retry(retry))

    def runs(self) -> dict[str, dict[str, Any]]:
        return {r["key"]: r for r in rows(self.db, "SELECT * FROM runs")}


def test_statuses_summary_and_order(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, BEHAVIOURS)
    summary = camp.run()
    runs = camp.runs()
    assert len(runs) == 2 * len(BEHAVIOURS) == summary.selected == summary.total
    for run in runs.values():
        assert run["status"] == EXPECTED[run["label"]], (run["label"], run["error"])
        assert run["attempts"] == 1 and run["host"] == "fakehost" and run["link_backend"] == "fake"
    assert summary.counts == Counter(EXPECTED[r["label"]] for r in runs.values())
    assert not summary.aborted and not summary.interrupted
    # Runs start in the campaign's (seeded) order, each client after its server, on one testbed.
    (testbed,) = camp.testbeds
    assert testbed.stopped
    clients = [argv for role, argv in testbed.started if role == "client"]
    assert len(clients) == len(runs)
    started = [r["key"] for r in sorted(runs.values(), key=lambda r: r["started_at"])]
    assert started == [run.key for run in camp.prepared.runs]
    # Each run re-seeded every dropper stream with its own loss seed, after configuring its point.
    seeds = [seed for _link, _direction, _model, seed, _stream in testbed.losses if seed]
    assert seeds == [run.loss_seed for run in camp.prepared.runs for _ in range(2)]


def test_resume_runs_each_run_exactly_once_and_retry_only_what_is_named(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, {"ok": {}, "fail": {"behave": "fail"}})
    camp.run()
    first = camp.runs()
    summary = camp.run()  # nothing left: no testbed is even built
    assert summary.selected == 0 and len(camp.testbeds) == 1
    assert camp.runs() == first
    summary = camp.run(retry="failed")
    assert summary.selected == 2 and summary.counts == Counter({"failed": 2})
    after = camp.runs()
    for key, run in after.items():
        assert run["attempts"] == (2 if run["label"] == "fail" else 1)
        if run["label"] == "ok":
            assert run == first[key]


def test_fidelity_status_when_the_network_does_not_match(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, {"ok": {}}, measured_rtt=lambda values: 1000.0)
    camp.run()
    runs = list(camp.runs().values())
    assert {r["status"] for r in runs} == {Status.FIDELITY}
    assert all("does not match the design" in r["error"] for r in runs)


def test_circuit_breaker_stops_after_consecutive_harness_errors(tmp_path: Path) -> None:
    def broken(role: str, argv: list[str]) -> None:
        raise OSError("the network is gone")

    camp = Campaign(tmp_path, {"ok": {}}, points=8, on_start=broken)
    summary = camp.run()
    assert summary.aborted and "harness errors in a row" in summary.aborted
    statuses = Counter(r["status"] for r in camp.runs().values())
    assert statuses == Counter({"failed": MAX_HARNESS_ERRORS, "pending": 8 - MAX_HARNESS_ERRORS})
    assert all("harness: OSError" in r["error"] for r in camp.runs().values() if r["status"] == "failed")


def test_ctrl_c_interrupts_the_current_run_only_and_resume_redoes_it(tmp_path: Path) -> None:
    clients = []

    def interrupt_third_client(role: str, argv: list[str]) -> None:
        if role == "client":
            clients.append(argv)
            if len(clients) == 3:
                raise KeyboardInterrupt

    camp = Campaign(tmp_path, {"ok": {}}, points=5, on_start=interrupt_third_client)
    with pytest.raises(KeyboardInterrupt):
        camp.run()
    assert camp.testbeds[0].stopped  # torn down on the way out
    statuses = [camp.runs()[run.key]["status"] for run in camp.prepared.runs]
    assert statuses == ["ok", "ok", "interrupted", "pending", "pending"]
    assert "interrupted" in camp.runs()[camp.prepared.runs[2].key]["error"]
    camp.testbed_options = {}
    summary = camp.run()
    assert summary.selected == 3 and summary.counts == Counter({"ok": 3})
    attempts = [camp.runs()[run.key]["attempts"] for run in camp.prepared.runs]
    assert attempts == [1, 1, 2, 1, 1]


def test_a_run_left_started_by_a_killed_campaign_is_redone_once(tmp_path: Path) -> None:
    """kill -9 leaves the run in flight `pending` with a start time: the next run does it, once."""
    camp = Campaign(tmp_path, {"ok": {}}, points=3)
    camp.run()
    victim = camp.prepared.runs[1].key
    with sqlite3.connect(camp.db) as conn:  # what a kill -9 mid-run leaves in the database
        conn.execute("DELETE FROM metrics WHERE run_key = ?", (victim,))
        conn.execute("UPDATE runs SET status = 'pending', finished_at = NULL WHERE key = ?", (victim,))
    summary = camp.run()
    assert summary.selected == 1 and summary.counts == Counter({"ok": 1})
    runs = camp.runs()
    assert runs[victim]["status"] == "ok" and runs[victim]["attempts"] == 2
    assert sorted(r["attempts"] for r in runs.values()) == [1, 1, 2]


def test_run_queue_keeps_order_and_serves_points() -> None:
    class R:
        def __init__(self, key: str, point: int) -> None:
            self.key, self.point = key, point

    runs = [R("a", 1), R("b", 2), R("c", 1), R("d", 3), R("e", 2)]
    queue = RunQueue(runs)  # type: ignore[arg-type]
    assert queue.points() == {1: 2, 2: 2, 3: 1}
    assert queue.pop_point(2).key == "b"
    assert [queue.pop_next().key for _ in range(2)] == ["a", "c"]
    assert queue.points() == {2: 1, 3: 1} and len(queue) == 2
    assert queue.pop_point(3).key == "d" and queue.pop_next().key == "e" and not queue
