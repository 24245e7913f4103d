"""`--jobs auto` keeps its serial pilot's runs as results, and reuses this machine's calibration for the same
workload class within its age once a short paired pilot confirms it (fecbench.runners.executors.calibrations).
The pilots are simulated (`calibrate.execute` replaced) or run on in-memory testbeds; tests/test_jobs.py runs
them on real networks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fecbench.host import cleanup
from fecbench.runners.executors import calibrate, calibrations
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fake_design, rows
from tests.helpers.fake_testbed import FakeTestbed

HOUR = 3600.0


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calibrations.json"
    monkeypatch.setenv(calibrations.STORE_ENV, str(path))
    return path


def _prepared(tmp_path: Path, points: int = 8, impl_args: dict[str, str] | None = None, name: str = "calib") -> Any:
    return prepare(fake_design(tmp_path / f"{name}.toml", {"quic": impl_args or {}, "fec": {}}, points=points,
                               name=name))


def _pilots(slow_at: int | None = None) -> tuple[list[tuple[int, int]], Any]:
    """A simulated `calibrate.execute`: every run 100 ms serially, 30 % slower from `slow_at` networks on;
    it notes (networks, pilot size) of each call."""
    calls: list[tuple[int, int]] = []

    def execute(prepared: Any, pilot: list[Any], fillers: list[Any], jobs: int, *args: Any) -> dict[str, Any]:
        calls.append((jobs, len(pilot)))
        slow = 1.3 if slow_at is not None and jobs >= slow_at else 1.0
        return {run.key: {"key": run.key, "status": "ok", "error": None, "value": 100.0 * slow,
                          "endpoint_p99_ms": 0.2, "endpoint_ok": True, "lateness_p99_ms": 0.1, "lateness_ok": True}
                for run in pilot}

    return calls, execute


def test_a_full_calibration_is_kept_and_reused_after_a_confirming_pilot(
        tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, execute = _pilots(slow_at=8)
    monkeypatch.setattr(calibrate, "execute", execute)
    prepared = _prepared(tmp_path)
    first = calibrations.auto_jobs(prepared, None, pilot_runs=6, now=1000 * HOUR)
    assert first["chosen"] == 4 and first["reused"] is None and first["recorded"] == []   # not recorded: no db
    assert calls == [(1, 6), (2, 6), (4, 6), (8, 6), (8, 6)]
    kept = json.loads(store.read_text())
    assert len(kept) == 1 and kept[0]["chosen"] == 4 and kept[0]["class"]["workload"] == "download"

    # Another design of the same class, two days later: 6 runs serially, the same 6 on 4 networks, no more.
    calls.clear()
    other = _prepared(tmp_path, points=5, impl_args={"level": "2"}, name="other")
    second = calibrations.auto_jobs(other, None, pilot_runs=6, now=1048 * HOUR)
    assert calls == [(1, calibrations.CONFIRM_RUNS), (4, calibrations.CONFIRM_RUNS)]
    assert second["chosen"] == 4 and second["reused"]["age_h"] == 48 and second["reused"]["design"] == "calib"
    assert [r["jobs"] for r in second["rows"]] == [1, 4] and second["rows"][1]["keeps_results"]
    assert "confirmed by a paired pilot of 6 runs" in calibrations.choice_text(second)
    assert json.loads(store.read_text())[0]["at"] == 1000 * HOUR   # a confirmation does not extend the age


def test_an_old_or_foreign_calibration_is_not_reused(tmp_path: Path, store: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    calls, execute = _pilots()
    monkeypatch.setattr(calibrate, "execute", execute)
    prepared = _prepared(tmp_path)
    calibrations.auto_jobs(prepared, None, pilot_runs=4, now=0.0)
    assert calibrations.find(prepared, None, now=calibrations.MAX_AGE_H * HOUR) is not None
    assert calibrations.find(prepared, None, now=calibrations.MAX_AGE_H * HOUR + 1) is None   # too old
    assert calibrations.find(prepared, "netem", now=1.0) is None                              # another class
    entries = json.loads(store.read_text())
    entries[0]["machine"]["cpus"] += 1                                                        # another machine
    store.write_text(json.dumps(entries))
    assert calibrations.find(prepared, None, now=1.0) is None
    store.write_text("{ not json")                                                            # unreadable
    assert calibrations.find(prepared, None, now=1.0) is None
    calls.clear()
    again = calibrations.auto_jobs(prepared, None, pilot_runs=4, now=2.0)
    assert again["reused"] is None and calls[0] == (1, 4) and len(json.loads(store.read_text())) == 1


def test_a_confirmation_that_changes_the_results_calibrates_in_full(tmp_path: Path, store: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    calls, execute = _pilots(slow_at=None)
    monkeypatch.setattr(calibrate, "execute", execute)
    prepared = _prepared(tmp_path, points=12)
    assert calibrations.auto_jobs(prepared, None, pilot_runs=4, now=0.0)["chosen"] == 16
    # The machine got busier: from 4 networks on, runs are 30 % slower.
    calls.clear()
    monkeypatch.setattr(calibrate, "execute", _pilots(slow_at=4)[1])
    result = calibrations.auto_jobs(prepared, None, pilot_runs=4, now=HOUR)
    assert result["chosen"] == 2 and result["reused"] is None
    assert not result["confirmation"][-1]["keeps_results"]
    assert "the kept calibration was not confirmed" in calibrations.choice_text(result)
    assert json.loads(store.read_text())[0]["chosen"] == 2 and json.loads(store.read_text())[0]["at"] == HOUR
    # --recalibrate ignores the kept calibration.
    assert calibrations.auto_jobs(prepared, None, pilot_runs=4, recalibrate=True, now=2 * HOUR)["reused"] is None


def _cpu(monkeypatch: pytest.MonkeyPatch, share: float, cpus: int = 2) -> None:
    """Each serial pilot takes 10 s of wall time and ``share`` of a CPU per second, on ``cpus`` CPUs."""
    clock = {"wall": 0.0, "cpu": 0.0}

    def wall() -> float:
        clock["wall"] += 5.0
        return clock["wall"]

    def cpu() -> float:
        clock["cpu"] += 5.0 * share
        return clock["cpu"]

    monkeypatch.setattr(calibrate, "wall_seconds", wall)
    monkeypatch.setattr(calibrate, "cpu_seconds", cpu)
    monkeypatch.setattr(calibrate, "all_cpus", lambda: set(range(cpus)))


def test_a_kept_choice_of_one_network_whose_runs_took_the_cpus_is_reused_without_a_pilot(
        tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, execute = _pilots(slow_at=2)
    monkeypatch.setattr(calibrate, "execute", execute)
    _cpu(monkeypatch, share=1.5)      # one network's runs take 1.5 of the 2 CPUs: at most 0 networks fit in 70 %
    prepared = _prepared(tmp_path)
    first = calibrations.auto_jobs(prepared, None, pilot_runs=4, now=0.0)
    assert first["chosen"] == 1 and first["rows"][0]["network_limit"] == 0
    assert [jobs for jobs, _ in calls] == [1, 2, 2]   # 2 networks tried even so (twice): the pilot judges
    calls.clear()
    result = calibrations.auto_jobs(prepared, None, pilot_runs=4, now=1.0)
    assert result["chosen"] == 1 and result["reused"] is not None and calls == [] and result["pilot"] == []
    assert "its runs took the CPUs: nothing to confirm" in calibrations.choice_text(result)


def test_a_kept_choice_of_one_network_on_idle_cpus_is_tried_again(tmp_path: Path, store: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration that chose 1 network while the CPUs were idle (a busy moment's choice) is not reused blindly:
    a short pilot tries 2 networks; where they now keep the results, a full calibration follows."""
    busy = {"now": True}
    calls: list[tuple[int, int]] = []

    def execute(prepared: Any, pilot: list[Any], fillers: list[Any], jobs: int, *args: Any) -> dict[str, Any]:
        calls.append((jobs, len(pilot)))
        slow = 1.3 if busy["now"] and jobs >= 2 else 1.0
        return {run.key: _ok(run.key, 100.0 * slow) for run in pilot}

    monkeypatch.setattr(calibrate, "execute", execute)
    _cpu(monkeypatch, share=0.125)    # 2 CPUs × 70 % ÷ 0.125 = 11.2: 11 networks
    prepared = _prepared(tmp_path, points=12)
    assert calibrations.auto_jobs(prepared, None, pilot_runs=4, now=0.0)["chosen"] == 1
    calls.clear()
    still = calibrations.auto_jobs(prepared, None, pilot_runs=4, now=1.0)   # still busy: 2 change the results
    assert still["chosen"] == 1 and still["reused"] is not None and calls == [(1, 6), (2, 6)]
    assert "2 networks changed the results again" in calibrations.choice_text(still)
    busy["now"] = False
    calls.clear()
    quiet = calibrations.auto_jobs(prepared, None, pilot_runs=4, now=2.0)
    assert quiet["reused"] is None and quiet["chosen"] == 11
    assert [jobs for jobs, _ in calls] == [1, 2, 1, 2, 4, 8, 11]
    assert json.loads(store.read_text())[0]["chosen"] == 11


def _ok(key: str, value: float | None, status: str = "ok") -> dict[str, Any]:
    return {"key": key, "status": status, "error": None, "value": value, "endpoint_p99_ms": 0.2,
            "endpoint_ok": True, "lateness_p99_ms": 0.1, "lateness_ok": True}


def test_the_cpu_share_of_one_network_bounds_the_networks_tried(tmp_path: Path, store: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls, execute = _pilots(slow_at=None)
    monkeypatch.setattr(calibrate, "execute", execute)
    _cpu(monkeypatch, share=0.25)     # 2 CPUs × 70 % ÷ 0.25 = 5.6: 5 networks
    result = calibrate.calibrate(_prepared(tmp_path, points=12), None, pilot_runs=4)
    assert [jobs for jobs, _ in calls] == [1, 2, 4, 5] and result["chosen"] == 5
    assert result["rows"][0]["network_limit"] == 5 and result["cpu_target"] == calibrate.CPU_TARGET
    assert "at most 5 networks on 2 CPUs" in calibrations.row_text(result["rows"][0])
    assert calibrate.networks_to_try(11, 100) == [2, 4, 8, 11]
    assert calibrate.networks_to_try(None, 100) == [2, 4, 8, 16, 32]
    assert calibrate.networks_to_try(None, 6) == [2, 4] and calibrate.networks_to_try(11, 6) == [2, 4, 6]
    assert calibrate.networks_to_try(0, 100) == [2] and calibrate.networks_to_try(1, 1) == []


def _twin_world(flips_loaded: int, flips_twins: int, shift_loaded: float, shift_twins: float) -> Any:
    """A simulated `calibrate.execute`: 16 pilot runs of 100 + 10 i ms serially; a loaded pilot (N > 1) times out on
    its first ``flips_loaded`` runs and its values are ``shift_loaded`` slower (a little more for later runs); the
    serial twins (the second serial call) likewise with theirs."""
    serial_calls = {"n": 0}

    def execute(prepared: Any, pilot: list[Any], fillers: list[Any], jobs: int, *args: Any) -> dict[str, Any]:
        if jobs == 1:
            serial_calls["n"] += 1
        first = jobs == 1 and serial_calls["n"] == 1
        flips, shift = (0, 0.0) if first else (flips_loaded, shift_loaded) if jobs > 1 else (flips_twins, shift_twins)
        return {run.key: _ok(run.key, None, "timeout") if i < flips
                else _ok(run.key, (100.0 + 10 * i) * (1 + shift * (1 + i / 64))) for i, run in enumerate(pilot)}

    return execute


@pytest.mark.parametrize(("flips", "twin_flips", "shift", "twin_shift", "keeps"), [
    (1, 1, 0.0, 0.0, True),       # one run ends otherwise, as it does between serial twins
    (2, 0, 0.0, 0.0, True),       # two of 16 against none: within chance (Fisher p ≈ 0.24)
    (8, 0, 0.0, 0.0, False),      # eight: the load's doing
    (0, 0, 0.03, 0.03, True),     # 3 % slower (within the 5 % bias tolerance), as the serial twins are
    (0, 0, 0.03, 0.0, False),     # ... while the twins repeat the serial values: the load's doing
])
def test_a_loaded_pilot_is_judged_against_what_serial_twins_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               flips: int, twin_flips: int, shift: float,
                                                               twin_shift: float, keeps: bool) -> None:
    monkeypatch.setattr(calibrate, "execute", _twin_world(flips, twin_flips, shift, twin_shift))
    result = calibrate.calibrate(_prepared(tmp_path, points=8), None, pilot_runs=16, candidates=(1, 2))
    row = result["rows"][-1]
    assert row["jobs"] == 2 and row["keeps_results"] is keeps, row["why"]
    assert row["twins"]["runs"] == 16 and len(row["twins"]["changed_status"]) == twin_flips
    assert result["chosen"] == (2 if keeps else 1)
    # Without twins every one of these pilots changes the results (a run ended otherwise, or Wilcoxon rejects).
    pilot, world = [SimpleNamespace(key=f"k{i}") for i in range(16)], _twin_world(flips, 0, shift, 0.0)
    serial, loaded = world(None, pilot, [], 1), world(None, pilot, [], 2)
    assert not calibrate.summarise(2, loaded, serial, 0.0)["keeps_results"]
    assert "serial twins" in calibrations.row_text(row)


def test_twins_are_measured_once_and_only_when_the_outcomes_alone_differ(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls, execute = _pilots(slow_at=2)   # 30 % slower: a bias no twin explains
    monkeypatch.setattr(calibrate, "execute", execute)
    result = calibrate.calibrate(_prepared(tmp_path), None, pilot_runs=4)
    assert [jobs for jobs, _ in calls] == [1, 2, 2] and "twins" not in result["rows"][-1]
    monkeypatch.setattr(calibrate, "execute", _twin_world(1, 1, 0.0, 0.0))
    result = calibrate.calibrate(_prepared(tmp_path, points=12), None, pilot_runs=16)
    assert result["chosen"] == 16 and all(row["twins"]["runs"] == 16 for row in result["rows"][1:])


def test_the_serial_pilot_is_recorded_as_results_of_the_campaign(tmp_path: Path, store: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The real Runner and engine on in-memory testbeds: the serial pilot's runs are in the campaign's database
    (one session of one network, ok), the loaded pilots' are not, and the result names them."""
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    prepared = _prepared(tmp_path, points=4)
    db = tmp_path / "calib.sqlite"

    def factory(topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        return FakeTestbed(topology, values, backend)

    serial = calibrate.RecordedSerialPilot(prepared, db, None, SilentReporter(), factory)
    result = calibrations.auto_jobs(prepared, None, runs=prepared.runs[:6], serial_pilot=serial, factory=factory,
                                    pilot_runs=3)
    recorded = rows(db, "SELECT key, status FROM runs WHERE status != 'pending'")
    assert sorted(r["key"] for r in recorded) == sorted(result["recorded"]) == sorted(result["pilot"])
    assert len(recorded) == 3 and {r["status"] for r in recorded} == {"ok"}
    assert set(result["pilot"]) <= {run.key for run in prepared.runs[:6]}   # drawn from the runs given
    sessions = rows(db, "SELECT executor, runs FROM sessions")
    assert sessions == [{"executor": "one network", "runs": 3}]
    serial.record(result)   # the calibration with the campaign, even if no run is left to do
    host = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])
    assert host["jobs_calibration"]["pilot"] == result["pilot"] and host["hostname"]
