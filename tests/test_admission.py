"""CPU-weighted admission (`executors.jobs`, issue 67 item 1): a run's cores from the rate it moves, fitted on a
serial pilot; networks that start runs only within the CPU budget; a calibration that tries the most networks first."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fecbench.host import cleanup
from fecbench.runners.executors import calibrate, jobs
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.jobs import CpuModel, JobsExecutor, PilotRun
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fake_design, rows
from tests.helpers.fake_testbed import FakeTestbed


def test_fit_recovers_the_cores_per_run_and_per_mbit() -> None:
    """Endpoint CPU = 0.005 core per run + 0.015 per Mbit/s, pilot runs at 1.5-20 Mbit/s; the whole pilot used 1.5 ×
    the endpoints' CPU (harness, delay elements): both constants come back, scaled by 1.5."""
    runs = [PilotRun(wall, mbit_s * wall, 0.005 + 0.015 * mbit_s) for wall, mbit_s in
            [(30, 1.5), (60, 2.5), (10, 18.0), (20, 7.0), (5, 9.0)]]
    endpoints = sum(r.wall_s * r.endpoint_cpu_share for r in runs)
    model = jobs.fit(runs, 1.5 * endpoints, budget=1.4)
    assert model is not None
    assert model.floor == pytest.approx(1.5 * 0.005, rel=1e-6)
    assert model.per_mbit == pytest.approx(1.5 * 0.015, rel=1e-6)
    assert model.budget == 1.4


def test_fit_needs_three_measured_runs() -> None:
    measured = [PilotRun(10, 100, 0.2), PilotRun(20, 50, 0.1)]
    assert jobs.fit([*measured, PilotRun(10, 100, None)], 10.0, 1.4) is None
    assert jobs.fit([*measured, PilotRun(5, 10, 0.05)], 10.0, 1.4) is not None


def test_one_run_always_admitted_and_the_budget_otherwise(tmp_path: Path) -> None:
    starts = jobs.Starts(CpuModel(floor=0.1, per_mbit=0.0, budget=0.35), _prepared(tmp_path).design)
    assert starts.admits(5.0, [])                    # heavier than the budget: runs alone
    assert starts.admits(0.1, [0.1, 0.1]) and not starts.admits(0.1, [0.1, 0.1, 0.1])


def test_the_budget_settles_where_the_target_share_of_runs_is_flagged(tmp_path: Path) -> None:
    """A flagged run shrinks the budget once per round (runs started before it shrank do not shrink it again), an
    unflagged one grows it back up to the model's; at the target share of flagged runs the two balance."""
    model = CpuModel(floor=0.05, per_mbit=0.0, budget=1.4)
    starts = jobs.Starts(model, _prepared(tmp_path).design)
    first = starts.started()
    starts.finished(first, load_flagged=True)
    assert starts.budget == pytest.approx(1.4 * (1 - jobs.BACKOFF)) and starts.lowered == 1
    assert starts.record() == {"model_cores": 1.4, "final_cores": round(1.4 * (1 - jobs.BACKOFF), 3), "lowered": 1}
    starts.finished(first, load_flagged=True)              # admitted under the larger budget: no second cut
    assert starts.budget == pytest.approx(1.4 * (1 - jobs.BACKOFF))
    later = starts.started()
    starts.finished(later, load_flagged=False)
    assert starts.budget == pytest.approx(1.4 * (1 - jobs.BACKOFF) * jobs.GROWTH)
    for _ in range(200):
        starts.finished(later, load_flagged=False)
    assert starts.budget == 1.4                             # never above the model's
    for _ in range(100):                                    # every run flagged: down to one run's floor, not zero
        starts.finished(starts.started() + 1.0, load_flagged=True)
    assert starts.budget == model.floor
    # One flagged run in 1 / target, each cut earned back by the clean runs before the next: right after a cut the
    # budget is where it was; twice as many flagged runs take it down, half as many to the model's before each cut.
    every = round(1 / jobs.FLAGGED_TARGET)
    for flagged_every, moved in ((every, lambda b: b == pytest.approx(0.8)), (every // 2, lambda b: b < 0.4),
                                 (every * 2, lambda b: b == pytest.approx(1.4 * (1 - jobs.BACKOFF)))):
        starts.budget = 0.8
        for i in range(1, 201):   # ends on a flagged run
            starts.finished(starts.started() + 1.0, load_flagged=i % flagged_every == 0)
        assert moved(starts.budget), (flagged_every, starts.budget)


def test_without_a_model_the_flags_change_nothing(tmp_path: Path) -> None:
    starts = jobs.Starts(None, _prepared(tmp_path).design)
    starts.finished(starts.started(), load_flagged=True)
    assert starts.admits(100.0, [100.0] * 31) and starts.lowered == 0 and starts.record() is None


def _prepared(tmp_path: Path, points: int = 4) -> Any:
    return prepare(fake_design(tmp_path / "adm.toml", {"quic": {}, "fec": {}}, points=points, sizes='["1MB"]',
                               timeout_s=30))


def test_cost_follows_the_modelled_rate(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    model = CpuModel(floor=0.01, per_mbit=0.02, budget=1.4)
    run = prepared.runs[0]
    rate = jobs.expected_mbit_s(run, prepared.design)
    assert 0 < rate <= float(run.values.get("bw", rate)) + 1e-9
    assert model.cost(run, prepared.design) == pytest.approx(0.01 + 0.02 * rate)
    assert model.ceiling(prepared.runs, prepared.design, 32) == min(
        32, int(1.4 // min(model.cost(r, prepared.design) for r in prepared.runs)))


class _Concurrency:
    """Wraps ``run_one``: the most runs it saw in flight at once."""

    def __init__(self, real: Any) -> None:
        self.real, self.now, self.most, self.lock = real, 0, 0, threading.Lock()

    def __call__(self, *args: Any) -> Any:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return self.real(*args)
        finally:
            with self.lock:
                self.now -= 1


def test_networks_start_runs_only_within_the_cpu_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six networks, a run costs 0.3 core and the budget is 0.7: never more than two runs at once, every run done
    once; without the model more run at once."""
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(jobs, "START_GAP_S", 0.0)   # fake runs end before a real run's start gap
    prepared = _prepared(tmp_path, points=6)
    calibration = {"chosen": 6, "cpu_model": CpuModel(0.3, 0.0, 0.7).record()}
    for model, most in ((calibration, 2), (None, 6)):   # 6: the most without a model (all but certain: > 2)
        watch = _Concurrency(jobs.run_one)
        monkeypatch.setattr(jobs, "run_one", watch)
        db = tmp_path / f"adm-{most}.sqlite"
        executor = JobsExecutor(prepared, db, 6, link_backend=None, calibration=model,
                                testbed_factory=lambda t, v, b: FakeTestbed(t, v, b))
        summary = Engine(prepared, db, executor, SilentReporter()).run(set())
        assert summary.counts == {"ok": 12} and len(rows(db, "SELECT key FROM runs")) == 12
        assert watch.most == 2 if model else watch.most > 2
    assert "CPU-weighted" in JobsExecutor(prepared, tmp_path / "x.sqlite", 6, link_backend=None,
                                          calibration=calibration).name


def test_runs_start_a_gap_apart_while_others_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four networks, runs that last ~0.7 s: no two starts closer than the gap while a run is in flight. A start is
    when the executor hands the run to its network (``Starts.started``, where the gap is kept), not when that
    network's thread first runs: on a loaded machine a thread may begin late and two begin closer together."""
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(jobs, "START_GAP_S", 0.25)
    prepared = _prepared(tmp_path, points=4)
    starts: list[float] = []
    real, started = jobs.run_one, jobs.Starts.started

    def recorded(self: jobs.Starts) -> float:
        starts.append(started(self))
        return starts[-1]

    def slow(*args: Any) -> Any:
        time.sleep(0.7)
        return real(*args)

    monkeypatch.setattr(jobs.Starts, "started", recorded)

    watch = _Concurrency(slow)
    monkeypatch.setattr(jobs, "run_one", watch)
    db = tmp_path / "gap.sqlite"
    executor = JobsExecutor(prepared, db, 4, link_backend=None, testbed_factory=lambda t, v, b: FakeTestbed(t, v, b))
    assert Engine(prepared, db, executor, SilentReporter()).run(set()).counts == {"ok": 8}
    gaps = [later - first for first, later in zip(starts, starts[1:], strict=False)]
    assert len(starts) == 8 and min(gaps) >= 0.25 and watch.most >= 2


def test_a_loaded_pilot_keeps_the_cpu_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(jobs, "START_GAP_S", 0.0)
    prepared = _prepared(tmp_path, points=6)
    watch = _Concurrency(calibrate.run_one)
    monkeypatch.setattr(calibrate, "run_one", watch)
    pilot, fillers = calibrate.pilot_of(prepared, 5)
    got = calibrate.execute(prepared, pilot, fillers, 6, None, lambda t, v, b: FakeTestbed(t, v, b),
                            CpuModel(0.3, 0.0, 0.7))
    assert set(got) == {run.key for run in pilot} and 1 <= watch.most <= 2


def _result(key: str, value: float) -> dict[str, Any]:
    return {"key": key, "status": "ok", "error": None, "value": value, "endpoint_p99_ms": 0.2, "endpoint_ok": True,
            "lateness_p99_ms": 0.1, "lateness_ok": True, "cpu_share": 0.05, "client_wall_s": 10.0}


def test_with_a_cpu_model_networks_are_tried_up_to_what_the_lightest_runs_fill(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lightest runs fill 24 networks (beyond the serial pilot's CPU share): 2, 4, 8, 16 keep the results, 24
    changes them (twice): 16 is taken, and the model is recorded with the choice."""
    prepared = _prepared(tmp_path, points=16)
    seen: list[int] = []

    def execute(prepared: Any, pilot: list[Any], fillers: list[Any], n: int, *args: Any) -> dict[str, Any]:
        seen.append(n)
        slow = 1.3 if n > 16 else 1.0
        return {run.key: _result(run.key, (100 + i) * slow) for i, run in enumerate(pilot)}

    monkeypatch.setattr(calibrate, "execute", execute)
    monkeypatch.setattr(calibrate, "fit_cpu", lambda *args: CpuModel(0.0, 0.0, 1.4))
    monkeypatch.setattr(CpuModel, "ceiling", lambda self, runs, design, most: 24)
    result = calibrate.calibrate(prepared, None, pilot_runs=6)
    assert seen == [1, 2, 4, 8, 16, 24, 24] and result["chosen"] == 16
    assert result["cpu_model"] == {"floor": 0.0, "per_mbit": 0.0, "budget": 1.4}
    assert result["rows"][0]["network_limit"] == 24
