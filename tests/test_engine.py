"""The campaign engine's logic, without root: the real Engine, SerialExecutor, Runner, Recorder and SQLite,
real processes of the fake implementation, on the in-memory testbed (tests/helpers/fake_testbed.py).
Ordering, statuses, resume exactly once, retry, the harness-error circuit breaker, the per-label
circuit breaker, timeouts by the implementation's own limit, Ctrl-C and kill-and-resume bookkeeping."""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fecbench.host import cleanup
from fecbench.records.status import Status
from fecbench.runners.executors.engine import BREAKER_RUNS, MAX_HARNESS_ERRORS, Engine
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.executors.quiet import Quiet
from fecbench.runners.executors.selection import RunQueue, parse_retry
from fecbench.runners.executors.serial import SerialExecutor, log_root_for
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fake_design, fecbench, rows
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
                 timeout_s: float = 10, **testbed: Any) -> None:
        # timeout_s also bounds the fake server's readiness: generous, so a loaded machine is no fault.
        self.design = fake_design(tmp_path / "camp.toml", labels, points=points, timeout_s=timeout_s)
        self.db = tmp_path / "camp.sqlite"
        self.prepared = prepare(self.design)
        self.testbed_options = testbed
        self.testbeds: list[FakeTestbed] = []

    def factory(self, topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        testbed = FakeTestbed(topology, values, backend, **self.testbed_options)
        self.testbeds.append(testbed)
        return testbed

    def run(self, retry: str | None = None, breaker_runs: int = BREAKER_RUNS, sample: int | None = None) -> Any:
        executor = SerialExecutor(self.prepared, self.db, link_backend=None, testbed_factory=self.factory)
        return Engine(self.prepared, self.db, executor, SilentReporter(),
                      breaker_runs=breaker_runs, sample=sample).run(parse_retry(retry))

    def runs(self) -> dict[str, dict[str, Any]]:
        return {r["key"]: r for r in rows(self.db, "SELECT * FROM runs")}


def test_statuses_summary_and_order(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, BEHAVIOURS, timeout_s=4)  # the `hang` runs wait it out
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


def test_each_run_starts_in_its_own_empty_folder(tmp_path: Path) -> None:
    """The contract's run folder: the client's working directory (where implementations keep session
    tickets, keys, tokens), emptied before the run, so what an earlier attempt left never carries over."""
    camp = Campaign(tmp_path, {"fresh": {"behave": "fresh"}}, points=1)
    (run,) = camp.prepared.runs
    stale = log_root_for(camp.db) / run.key[:16]
    stale.mkdir(parents=True)
    (stale / "session.ticket").write_text("from an earlier attempt")
    camp.run()
    assert camp.runs()[run.key]["status"] == "ok", camp.runs()[run.key]["error"]


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


def test_fidelity_flagged_runs_run_once_more_at_the_end_keeping_the_first_outcome(tmp_path: Path) -> None:
    checks = Counter()

    def bad_first_check(values: dict[str, Any]) -> float | None:   # each point's first check fails
        key = json.dumps(values, sort_keys=True, default=str)
        checks[key] += 1
        return 1000.0 if checks[key] == 1 else None

    camp = Campaign(tmp_path, {"ok": {}, "ok2": {}}, measured_rtt=bad_first_check)
    summary = camp.run()
    runs = camp.runs()
    flagged = [r for r in runs.values() if r["attempts"] == 2]
    assert summary.retried == len(flagged) >= 1 and summary.counts == Counter({Status.OK: len(runs)})
    assert all(r["status"] == Status.OK for r in runs.values())
    earlier = rows(camp.db, "SELECT * FROM earlier_outcomes")
    assert sorted(e["run_key"] for e in earlier) == sorted(r["key"] for r in flagged)
    assert all(e["status"] == Status.FIDELITY and "does not match the design" in e["error"] and e["attempt"] == 1
               and json.loads(e["fidelity_json"])["fidelity"] for e in earlier)
    session = rows(camp.db, "SELECT * FROM sessions")
    assert len(session) == 1 and session[0]["runs"] == len(runs) + len(flagged) and session[0]["jobs"] == 1


def test_flagged_runs_rerun_in_rounds_one_at_a_time_after_waiting_keeping_every_attempt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run flagged on its first two attempts ends ok on its third: two rounds of re-runs, each after the wait for
    a quieter machine, each attempt's outcome and metrics kept; one flagged every time stays flagged after the
    budget of rounds."""
    monkeypatch.delenv("FECBENCH_ENDPOINT_BOUND_MS", raising=False)
    attempts = Counter()

    def flagged_twice(values: dict[str, Any]) -> list[int]:   # the first point: flagged twice, then fine
        key = json.dumps(values, sort_keys=True, default=str)
        attempts[key] += 1
        late = [20_000] * 50 + [50_000_000] * 5                  # 5 waits of 50 ms: 24 % of the run's 1 s
        if values["bw"] == first_bw:
            return late if attempts[key] <= 2 else [20_000] * 50
        return late     # the second point: always flagged

    waits = []
    camp = Campaign(tmp_path, {"ok": {}}, points=2, wake_ns=flagged_twice)
    first_bw = next(iter(camp.prepared.points.values()))["bw"]
    executor = SerialExecutor(camp.prepared, camp.db, link_backend=None, testbed_factory=camp.factory)
    engine = Engine(camp.prepared, camp.db, executor, SilentReporter(), fidelity_reruns=3,
                    quiet_wait=lambda: waits.append(1) or Quiet(4.0, 0.05, True))
    summary = engine.run(set())
    runs = {r["point"]: r for r in camp.runs().values()}
    assert runs[0]["status"] == Status.OK and runs[0]["attempts"] == 3
    assert runs[1]["status"] == Status.FIDELITY and runs[1]["attempts"] == 4
    assert len(waits) == 3 and [r["runs"] for r in summary.rounds] == [2, 2, 1]
    assert [r["still_flagged"] for r in summary.rounds] == [2, 1, 1] and summary.retried == 5
    assert summary.counts == Counter({Status.OK: 1, Status.FIDELITY: 1})
    earlier = rows(camp.db, "SELECT * FROM earlier_outcomes ORDER BY run_key, attempt")
    assert len(earlier) == 5 and all(e["status"] == Status.FIDELITY and "endpoints: waits beyond 2 ms added up to"
                                     in e["error"] for e in earlier)
    assert all("re-run" in e["why_again"] and "CPU pressure 5 % after waiting 4 s" in e["why_again"] for e in earlier)
    assert all(json.loads(e["fidelity_json"])["metrics"]["dct_ms"] > 0 for e in earlier)   # the attempt's metrics
    session = json.loads(rows(camp.db, "SELECT json FROM sessions")[0]["json"])
    assert session["fidelity_reruns"]["budget"] == 3 and len(session["fidelity_reruns"]["rounds"]) == 3


def test_a_rerun_never_reached_before_the_stop_time_keeps_its_outcome(tmp_path: Path) -> None:
    """The stop time comes before the re-runs: nothing is kept aside for a run that did not run again."""
    camp = Campaign(tmp_path, {"ok": {}}, measured_rtt=lambda values: 1000.0)
    executor = SerialExecutor(camp.prepared, camp.db, link_backend=None, testbed_factory=camp.factory)
    engine = Engine(camp.prepared, camp.db, executor, SilentReporter(), quiet_wait=lambda: Quiet(0.0, None, False))
    original = engine._cycle

    def cycle(todo, summary, one_at_a_time=False):   # the stop time passes as the re-runs begin
        if one_at_a_time:
            engine.stop_at = time.monotonic() - 1
        return original(todo, summary, one_at_a_time)

    engine._cycle = cycle
    summary = engine.run(set())
    assert summary.retried == 0 and summary.rerun_skipped == 2 and summary.out_of_time == 0
    assert all(r["attempts"] == 1 and r["status"] == Status.FIDELITY for r in camp.runs().values())
    assert rows(camp.db, "SELECT * FROM earlier_outcomes") == []


def test_no_retry_keeps_fidelity_flagged_runs_flagged(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, {"ok": {}}, measured_rtt=lambda values: 1000.0)
    executor = SerialExecutor(camp.prepared, camp.db, link_backend=None, testbed_factory=camp.factory)
    summary = Engine(camp.prepared, camp.db, executor, SilentReporter(), fidelity_reruns=0).run(set())
    assert summary.retried == 0 and all(r["attempts"] == 1 and r["status"] == Status.FIDELITY
                                        for r in camp.runs().values())
    assert rows(camp.db, "SELECT * FROM earlier_outcomes") == []


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


def test_run_queue_keeps_a_network_on_its_point() -> None:
    class R:
        def __init__(self, key: str, point: int) -> None:
            self.key, self.point = key, point

    queue = RunQueue([R("a", 1), R("b", 2), R("c", 2), R("d", 3), R("e", 1), R("f", 2)])  # type: ignore[arg-type]
    assert queue.pop_near(1, set()).key == "a"          # its own point first
    assert queue.pop_near(None, {2}).key == "e"         # the biggest point no one else has: 1 (2 is taken)
    assert queue.pop_near(5, {2, 3}).key == "b"         # every point taken: help with the biggest
    assert queue.pop_near(None, set()).key == "c"
    assert [queue.pop_near(None, set()).key for _ in range(2)] == ["f", "d"]  # ties: the first point
    assert queue.pop_near(1, set()) is None


def test_breaker_stops_a_label_whose_first_runs_all_fail_the_same_way(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, {"ok": {}, "fail": {"behave": "fail"}, "mixed": {"behave": "failreport"}},
                    points=6)
    summary = camp.run(breaker_runs=3)
    runs = list(camp.runs().values())
    per_label = {label: Counter(r["status"] for r in runs if r["label"] == label) for label in ("ok", "fail")}
    # "fail": its first 3 runs failed alike, the other 3 were never started (still pending: resumable).
    assert per_label["fail"] == Counter({"failed": 3, "pending": 3})
    assert all(r["started_at"] is None for r in runs if r["status"] == "pending")
    assert per_label["ok"] == Counter({"ok": 6})
    # "failreport" fails alike too, with a different message than "fail": a breaker of its own.
    (fail,) = [b for b in summary.breakers if b.label == "fail"]
    assert fail.runs == 3 and fail.skipped == 3 and fail.status == "failed" and "status 1" in fail.error
    assert "3 more not run" in fail.text()
    recorded = rows(camp.db, "SELECT * FROM breakers")
    assert {r["label"] for r in recorded} == {b.label for b in summary.breakers}
    assert {r["label"]: r["skipped"] for r in recorded}["fail"] == 3
    status = fecbench("status", str(camp.db), "--json")
    assert status.returncode == 0, status.stderr
    assert {b["label"] for b in json.loads(status.stdout)["breakers"]} == {"fail", "mixed"}
    text = fecbench("status", str(camp.db)).stdout
    assert "circuit breaker" in text and "fail: its" in text
    # The next `fecbench run` tries the label again (the cause may be fixed); 0 turns the breaker off.
    summary = camp.run(breaker_runs=0)
    assert summary.counts == Counter({"failed": 6}) and not summary.breakers


def test_breaker_lets_a_label_with_one_success_run_to_the_end(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, {"fail": {"behave": "fail"}}, points=4)
    clients: list[int] = []

    def one_ok(role: str, argv: list[str]) -> None:  # the first client succeeds, the others fail alike
        if role == "client":
            clients.append(1)
            if len(clients) == 1:
                argv[argv.index("--behave") + 1] = "ok"

    camp.testbed_options["on_start"] = one_ok
    summary = camp.run(breaker_runs=2)
    assert not summary.breakers
    assert Counter(r["status"] for r in camp.runs().values()) == Counter({"ok": 1, "failed": 3})


def test_implementation_time_limit_is_a_timeout_with_what_arrived(tmp_path: Path) -> None:
    """The contract: a client that gives up at {timeout_s} exits 124 -> `timeout`, never `failed`,
    with the bytes and elapsed time it reports; a client the harness kills is `timeout` too."""
    camp = Campaign(tmp_path, {"giveup": {"behave": "giveup"}, "hang": {"behave": "hang"}}, points=1,
                    timeout_s=3.0)
    summary = camp.run()
    runs = {r["label"]: r for r in camp.runs().values()}
    assert summary.counts == Counter({"timeout": 2}), {k: (r["status"], r["error"]) for k, r in runs.items()}
    assert "gave up at timeout_s = 3 s (exit status 124): 333 of 1000 bytes received" in runs["giveup"]["error"]
    assert "client still running" in runs["hang"]["error"] and "killed" in runs["hang"]["error"]
    (metrics,) = rows(camp.db, "SELECT m.* FROM metrics m JOIN runs r ON r.key = m.run_key WHERE r.label = 'giveup'")
    assert metrics["bytes_app"] == 333 and metrics["dct_ms"] is None
    assert json.loads(metrics["json"])["timed_out"] is True and json.loads(metrics["json"])["elapsed_ms"] > 0
    # The client got the design's timeout_s through the {timeout_s} placeholder.
    clients = [argv for role, argv in camp.testbeds[0].started if role == "client"]
    assert all(argv[argv.index("--timeout") + 1] == "3" for argv in clients)


def test_each_run_records_where_its_time_went(tmp_path: Path) -> None:
    """runs.phases_json: seconds per runner phase, within the run's duration; the fidelity check only for
    the first run of each point (per-point fidelity); `status --timing` sums them up."""
    from fecbench.runners.run.lifecycle import PHASES

    camp = Campaign(tmp_path, {"ok": {}, "fail": {"behave": "fail"}}, points=3)
    camp.run()
    runs = list(camp.runs().values())
    assert len(runs) == 6
    for run in runs:
        phases = json.loads(run["phases_json"])
        assert set(phases) <= set(PHASES) and {"configure", "losses", "server", "client", "stop"} <= set(phases)
        assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= run["duration_s"]
    checked = [json.loads(r["phases_json"]).get("fidelity") for r in runs]
    assert sum(1 for c in checked if c is not None) == 3  # one check per point
    out = fecbench("status", str(camp.db), "--timing", "--json")
    assert out.returncode == 0, out.stderr
    table = {p["phase"]: p for p in json.loads(out.stdout)["phases"]}
    assert table["client"]["runs"] == 3 and table["client"]["mean_s"] > 0  # the ok runs only


def test_sample_runs_a_seeded_pilot_and_leaves_the_rest_pending(tmp_path: Path) -> None:
    camp = Campaign(tmp_path, {"ok": {}, "also": {}}, points=4)
    summary = camp.run(sample=3)
    runs = camp.runs()
    done = {key for key, r in runs.items() if r["status"] == "ok"}
    assert summary.selected == 3 and len(done) == 3 and len(runs) == 8
    assert {r["status"] for key, r in runs.items() if key not in done} == {"pending"}
    # The same design draws the same runs (a fresh database), in campaign order.
    (tmp_path / "again").mkdir()
    again = Campaign(tmp_path / "again", {"ok": {}, "also": {}}, points=4)
    again.run(sample=3)
    assert {k for k, r in again.runs().items() if r["status"] == "ok"} == done
    order = [run.key for run in camp.prepared.runs if run.key in done]
    assert [r["key"] for r in sorted(runs.values(), key=lambda r: r["started_at"] or "~") if r["key"] in done] == order
    summary = camp.run()  # a plain run does the rest
    assert summary.selected == 5 and {r["status"] for r in camp.runs().values()} == {"ok"}


def test_a_finished_campaign_is_read_without_writing_beside_it_and_joins_the_machines_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48: reading a database written by a campaign creates no -shm or -wal beside it (results/ is in the
    checkout), and later estimates learn from it wherever it is (the machine's list of databases)."""
    from fecbench.analysis import results
    from fecbench.runners.experiment import estimate

    monkeypatch.setenv(estimate.HISTORY_ENV, str(tmp_path / "history.txt"))
    (tmp_path / "elsewhere").mkdir()
    camp = Campaign(tmp_path / "elsewhere", {"ok": {}})
    camp.run()
    assert not list(camp.db.parent.glob("camp.sqlite-*"))
    results.load(camp.db)
    fecbench("status", str(camp.db))
    assert not list(camp.db.parent.glob("camp.sqlite-*")), list(camp.db.parent.iterdir())
    assert (tmp_path / "history.txt").read_text().splitlines() == [str(camp.db.resolve())]
    history = estimate.machine_history(None, results=tmp_path / "no-results-folder")
    assert history.ratios and history.again
