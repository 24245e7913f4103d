"""`fecbench run --jobs N`: N networks at once through the one engine; the same runs, statuses and loss
patterns as a serial campaign."""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fecbench.host import cleanup
from fecbench.inputs.errors import UserError
from fecbench.runners.executors import jobs
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.jobs import JobsExecutor, parse_jobs
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fake_design, fecbench, rows, smoke_copy
from tests.helpers.fake_testbed import FakeTestbed


@pytest.mark.parametrize("text", ["0", "x", "-1", "33", "2.5"])
def test_bad_jobs_values(text: str) -> None:
    with pytest.raises(UserError, match="--jobs"):
        parse_jobs(text)


def test_bench_campaign_bad_jobs_exit_2() -> None:
    out = fecbench("bench", "campaign", "--jobs", "1,0")
    assert out.returncode == 2 and "--jobs '0'" in out.stderr and "Traceback" not in out.stderr


def test_jobs_with_dask_is_refused() -> None:
    out = fecbench("run", "designs/smoke.toml", "--jobs", "2", "--dask", "local:2", "--dry-run")
    assert out.returncode == 2 and "choose one" in out.stderr


def test_recalibrate_without_jobs_auto_is_refused() -> None:
    out = fecbench("run", "designs/smoke.toml", "--jobs", "2", "--recalibrate", "--dry-run")
    assert out.returncode == 2 and "--recalibrate goes with --jobs auto" in out.stderr


def test_every_run_once_on_three_networks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(jobs, "START_GAP_S", 0.0)   # fake runs end before a real run's start gap
    design = fake_design(tmp_path / "j.toml", {"ok": {}, "fail": {"behave": "fail"}, "slow": {"behave": "slow"}},
                         points=4)
    prepared = prepare(design)
    db = tmp_path / "j.sqlite"
    testbeds: list[FakeTestbed] = []

    def factory(topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        testbeds.append(FakeTestbed(topology, values, backend))
        return testbeds[-1]

    executor = JobsExecutor(prepared, db, 3, link_backend=None, testbed_factory=factory)
    summary = Engine(prepared, db, executor, SilentReporter()).run(set())
    runs = rows(db, "SELECT * FROM runs")
    assert len(runs) == 12 and all(r["attempts"] == 1 for r in runs)
    assert Counter(r["status"] for r in runs) == Counter({"ok": 8, "failed": 4}) == summary.counts
    assert len(testbeds) == 3 and all(t.stopped for t in testbeds)
    assert all(t.started for t in testbeds)  # every network ran something
    # Each run's two dropper streams were seeded with its own loss seed, on whichever network ran it.
    seeds = Counter(seed for t in testbeds for _l, _d, _m, seed, _s in t.losses if seed)
    assert seeds == Counter(run.loss_seed for run in prepared.runs for _stream in range(2))


def _verdicts(db: Path) -> dict[tuple[str, str, str], np.ndarray]:
    return {(r["run_key"], r["link"], r["direction"]): np.load(io.BytesIO(r["data"]), allow_pickle=False)
            for r in rows(db, "SELECT run_key, link, direction, data FROM verdict_logs")}


@pytest.mark.require_root
@pytest.mark.slow
def test_jobs_and_serial_give_identical_loss_patterns(tmp_path: Path) -> None:
    design = smoke_copy(tmp_path)
    design.write_text(design.read_text().replace("[space]", "verdict_log = true\n\n[space]", 1))
    serial, parallel = tmp_path / "serial.sqlite", tmp_path / "jobs.sqlite"
    for db, extra in ((serial, []), (parallel, ["--jobs", "4"])):
        out = fecbench("run", str(design), "--db", str(db), *extra)
        assert out.returncode == 0, out.stdout + out.stderr
    assert {r["key"]: r["status"] for r in rows(serial, "SELECT key, status FROM runs")} == \
        {r["key"]: r["status"] for r in rows(parallel, "SELECT key, status FROM runs")}
    host = rows(parallel, "SELECT host_json FROM campaigns")[0]["host_json"]
    assert '"jobs": 4' in host
    # The campaign's own processes stayed off the CPU left to the delay elements (fecbench.host.affinity).
    placed = json.loads(host)["cpu_affinity"]
    if len(placed["delay_cpus"]) >= 2 and os.environ.get("FECBENCH_CPU_AFFINITY", "on") != "off":
        assert max(placed["delay_cpus"]) not in placed["harness_cpus"], placed
    one, four = _verdicts(serial), _verdicts(parallel)
    assert set(one) == set(four) and len(one) == 32
    for key in one:
        a, b = one[key], four[key]
        n = min(len(a), len(b))
        assert n > 0
        # Packet i of a run meets verdict D[i] of its (seed, stream), whatever else runs beside it.
        assert np.array_equal(a["index"][:n], b["index"][:n]) and np.array_equal(a["verdict"][:n], b["verdict"][:n])


def test_auto_parses_only_where_allowed() -> None:
    assert parse_jobs("auto", allow_auto=True) is None and parse_jobs("3", allow_auto=True) == 3
    with pytest.raises(UserError, match="or auto"):
        parse_jobs("lots", allow_auto=True)
    with pytest.raises(UserError, match="--jobs 'auto'"):
        parse_jobs("auto")


def _result(key: str, value: float, status: str = "ok", endpoint_ok: bool = True) -> dict[str, Any]:
    return {"key": key, "status": status, "error": None, "value": value, "endpoint_p99_ms": 0.2,
            "endpoint_ok": endpoint_ok, "lateness_p99_ms": 0.1, "lateness_ok": True}


def test_compare_pairs_the_pilot_with_its_serial_runs_by_key() -> None:
    from fecbench.runners.executors.calibrate import compare

    serial = {f"k{i}": _result(f"k{i}", 100.0 + i) for i in range(16)}
    same = compare(serial, {k: _result(k, r["value"] * (1.01 if i % 2 else 0.99)) for i, (k, r) in
                            enumerate(serial.items())}, 0.0)
    assert same["pairs"] == 16 and abs(same["median_ratio"] - 1) < 0.011 and same["wilcoxon_p"] > 0.5
    slower = compare(serial, {k: _result(k, r["value"] * 1.08) for k, r in serial.items()}, 0.0)
    assert slower["median_ratio"] == pytest.approx(1.08) and slower["wilcoxon_p"] < 0.001
    failed = compare(serial, {**serial, "k3": _result("k3", None, status="timeout")}, 0.0)
    assert failed["changed_status"] == ["k3"] and failed["pairs"] == 15
    # Re-buffering: ε (one message interval) on both sides, so runs without stalls have a ratio.
    stalls = compare({"a": _result("a", 0.0)}, {"a": _result("a", 33.3)}, 33.3)
    assert stalls["median_ratio"] == 2.0


def _prepared(tmp_path: Path, points: int = 4) -> Any:
    return prepare(fake_design(tmp_path / "calib.toml", {"quic": {}, "fec": {}}, points=points))


def test_auto_takes_the_largest_n_whose_pilot_keeps_the_results(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to 4 networks the pilot matches its serial runs; 8 slow them by 30 % in both measurements:
    auto takes 4, having measured 8 twice and nothing beyond."""
    from fecbench.runners.executors import calibrate

    prepared = _prepared(tmp_path)
    seen: list[int] = []

    def execute(prepared: Any, pilot: list[Any], fillers: list[Any], jobs: int, *args: Any) -> dict[str, Any]:
        seen.append(jobs)
        assert jobs == 1 and not fillers or len(pilot) + len(fillers) == len(prepared.runs)
        slow = 1.3 if jobs >= 8 else 1.0
        return {run.key: _result(run.key, (100 + i) * slow) for i, run in enumerate(pilot)}

    monkeypatch.setattr(calibrate, "execute", execute)
    result = calibrate.calibrate(prepared, None, pilot_runs=6)
    assert seen == [1, 2, 4, 8, 8] and result["chosen"] == 4 and len(result["pilot"]) == 6
    rows = {r["jobs"]: r for r in result["rows"]}
    assert rows[4]["keeps_results"] and rows[4]["tries"] == 1 and rows[4]["median_ratio"] == 1.0
    assert not rows[8]["keeps_results"] and rows[8]["tries"] == 2 and "median ratio to serial 1.300" in rows[8]["why"]
    assert result["metric"] == "dct_ms" and result["endpoint_bound_ms"] > 0


def test_a_pilot_run_beyond_a_bound_fails_its_n(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fecbench.runners.executors import calibrate

    prepared = _prepared(tmp_path)

    def execute(prepared: Any, pilot: list[Any], fillers: list[Any], jobs: int, *args: Any) -> dict[str, Any]:
        return {run.key: _result(run.key, 100.0, endpoint_ok=not (jobs == 2 and i == 0)) for i, run in enumerate(pilot)}

    monkeypatch.setattr(calibrate, "execute", execute)
    result = calibrate.calibrate(prepared, None, pilot_runs=4)
    assert result["chosen"] == 1 and result["rows"][-1]["why"] == "1 pilot run(s) beyond a bound"


def test_auto_measures_no_more_networks_than_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4-run campaign never builds 8 networks, so calibration stops measuring at 4."""
    from fecbench.runners.executors import calibrate

    prepared = _prepared(tmp_path, points=2)
    assert len(prepared.runs) == 4
    seen: list[int] = []

    def execute(prepared: Any, pilot: list[Any], fillers: list[Any], jobs: int, *args: Any) -> dict[str, Any]:
        seen.append(jobs)
        return {run.key: _result(run.key, 100.0) for run in pilot}

    monkeypatch.setattr(calibrate, "execute", execute)
    assert calibrate.calibrate(prepared, None)["chosen"] == 4 and seen == [1, 2, 4]


def test_execute_runs_the_pilot_on_busy_networks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real Runner on in-memory testbeds: every pilot run is executed once, every network is built and
    stopped, fillers keep the others busy and are not reported."""
    from fecbench.runners.executors import calibrate

    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    prepared = _prepared(tmp_path, points=4)
    built: list[FakeTestbed] = []

    def factory(topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        built.append(FakeTestbed(topology, values, backend))
        return built[-1]

    pilot, fillers = calibrate.pilot_of(prepared, 3)
    got = calibrate.execute(prepared, pilot, fillers, 2, None, factory)
    assert set(got) == {run.key for run in pilot} and {r["status"] for r in got.values()} == {"ok"}
    assert all(r["endpoint_ok"] is True and r["value"] > 0 for r in got.values())
    assert len(built) == 2 and all(t.stopped for t in built)
    started = [argv for t in built for role, argv in t.started if role == "client"]
    assert len(started) >= 3


@pytest.mark.require_root
@pytest.mark.slow
def test_jobs_auto_calibrates_records_and_runs_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--jobs auto on real networks: a pilot of the design's own runs, serially (kept as results) and on N
    networks; the calibration's rows and choice are recorded with the campaign, the choice follows its rule,
    and every run ends ok. A second campaign of the same class reuses the choice after a short paired pilot."""
    from fecbench.runners.executors.calibrate import networks_to_try
    from fecbench.runners.executors.calibrations import STORE_ENV

    monkeypatch.setenv(STORE_ENV, str(tmp_path / "calibrations.json"))

    design = smoke_copy(tmp_path)
    # 6 runs: networks 1, then 2, 4 and at most 6 (never more networks than runs; how many the serial pilot's CPU
    # allows depends on this machine), a pilot of 4 and 2 fillers. The whole smoke design (16 runs) also measured 8
    # and 16 networks: up to a minute of building networks.
    design.write_text(design.read_text().replace("points = 4", "points = 3")
                      .replace('sizes = ["1kB", "50kB"]', 'sizes = ["1kB"]'))
    db = tmp_path / "auto.sqlite"
    out = fecbench("run", str(design), "--db", str(db), "--jobs", "auto", "--jobs-pilot", "4")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "--jobs auto: 1 network(s): 4 of 4 pilot runs ok, worst p99 endpoints" in out.stdout
    host = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])
    calibration = host["jobs_calibration"]
    measured = calibration["rows"]
    tried = [1, *networks_to_try(measured[0]["network_limit"], 6)]
    assert [r["jobs"] for r in measured] == tried[:len(measured)] and len(calibration["pilot"]) == 4
    assert all(r["runs"] == 4 and r["endpoint_p99_ms"] is not None for r in measured)
    keeping = [r["jobs"] for r in measured[1:] if r["keeps_results"]]
    assert calibration["chosen"] == (keeping[-1] if keeping else 1)
    assert host["jobs"] == min(calibration["chosen"], 2)   # the 2 runs the serial pilot left, one network each
    assert all(r["keeps_results"] for r in measured[1:-1])   # only the last measured N may fail
    statuses = [r["status"] for r in rows(db, "SELECT status FROM runs")]
    assert statuses == ["ok"] * 6 and max(r["jobs"] for r in measured) <= 6, (statuses, measured)
    assert f"--jobs auto: {calibration['chosen']} network(s)" in out.stdout
    # The serial pilot is a session of the campaign (its 4 runs recorded once); the rest ran after it.
    assert sorted(calibration["recorded"]) == sorted(calibration["pilot"])
    sessions = rows(db, "SELECT executor, runs FROM sessions")
    assert sessions == [{"executor": "one network", "runs": 4}, {"executor": "jobs auto", "runs": 2}], sessions
    # What the runs' flags did to the CPU budget (the calibration's model, the budget at the end, its cuts).
    # One network chosen (a busy machine's calibration): no CPU-weighted starts, so no budget to record.
    session = json.loads(rows(db, "SELECT json FROM sessions WHERE executor = 'jobs auto'")[0]["json"])
    if calibration["chosen"] > 1:
        budget = session["cpu_budget"]
        assert 0 < budget["final_cores"] <= budget["model_cores"] and budget["lowered"] >= 0, budget
    else:
        assert "cpu_budget" not in session and calibration["cpu_model"] is None, session

    again = tmp_path / "again.sqlite"
    out = fecbench("run", str(design), "--db", str(again), "--jobs", "auto", "--jobs-pilot", "4")
    assert out.returncode == 0, out.stdout + out.stderr
    second = json.loads(rows(again, "SELECT host_json FROM campaigns")[0]["host_json"])["jobs_calibration"]
    if calibration["chosen"] == 1:     # reused as is: nothing to confirm
        assert second["reused"]["design"] == "smoke" and second["reused"]["age_h"] < 1 and second["pilot"] == []
        assert "nothing to confirm" in out.stdout
    else:                              # a paired pilot of its own runs at the kept choice
        assert [r["jobs"] for r in second["confirmation"]] == [1, calibration["chosen"]]
        if second["confirmation"][-1]["keeps_results"]:
            assert second["reused"]["design"] == "smoke" and "confirmed by a paired pilot of 6 runs" in out.stdout
        else:                          # the machine got busier since: calibrated again
            assert second["reused"] is None and "was not confirmed" in out.stdout
    assert [r["status"] for r in rows(again, "SELECT status FROM runs")] == ["ok"] * 6

