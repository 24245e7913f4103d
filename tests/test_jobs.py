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
from rich.console import Console

from fecbench import cleanup
from fecbench.errors import UserError
from fecbench.runners.engine import Engine
from fecbench.runners.jobs import JobsExecutor, parse_jobs
from fecbench.runners.prepare import prepare
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


def test_every_run_once_on_three_networks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    design = fake_design(tmp_path / "j.toml", {"ok": {}, "fail": {"behave": "fail"}, "slow": {"behave": "slow"}},
                         points=4)
    prepared = prepare(design)
    db = tmp_path / "j.sqlite"
    testbeds: list[FakeTestbed] = []

    def factory(topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        testbeds.append(FakeTestbed(topology, values, backend))
        return testbeds[-1]

    executor = JobsExecutor(prepared, db, 3, link_backend=None, testbed_factory=factory)
    summary = Engine(prepared, db, executor, Console(quiet=True)).run(set())
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
    # The campaign's own processes stayed off the CPU left to the delay elements (fecbench.affinity).
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


def test_auto_takes_the_largest_n_before_the_first_that_breaks_the_bound() -> None:
    from fecbench.runners.calibrate import choose

    row = lambda jobs, p99: {"jobs": jobs, "worst_p99_ms": p99, "frames": 100}  # noqa: E731
    assert choose([row(1, 0.1), row(2, 0.2), row(4, 0.45), row(8, 0.7)], 0.5) == 4
    assert choose([row(1, 0.1), row(2, 0.6), row(4, 0.3)], 0.5) == 1  # stops at the first break
    assert choose([row(1, 0.9)], 0.5) == 1
    assert choose([row(1, 0.1), row(2, None)], 0.5) == 1  # no frames counted: no evidence for 2


def test_auto_measures_no_more_networks_than_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5-run campaign never builds 8 networks, so calibration stops measuring at 4."""
    from types import SimpleNamespace

    from fecbench.runners import calibrate

    measured: list[int] = []

    def measure(prepared: Any, jobs: int, backend: Any, factory: Any) -> dict[str, Any]:
        measured.append(jobs)
        return {"jobs": jobs, "worst_p99_ms": 0.1, "frames": 100}

    monkeypatch.setattr(calibrate, "measure", measure)
    result = calibrate.calibrate(SimpleNamespace(runs=[None] * 5), None)
    assert measured == [1, 2, 4] and result["chosen"] == 4
    measured.clear()
    assert calibrate.calibrate(SimpleNamespace(runs=[None]), None)["chosen"] == 1 and measured == [1]


def test_auto_measures_a_broken_bound_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """One late reading does not condemn an N (measured again); three in a row do."""
    from types import SimpleNamespace

    from fecbench.runners import calibrate

    readings = {1: [0.2], 2: [0.9, 0.3], 4: [0.8, 0.7, 0.6]}
    seen: list[int] = []

    def measure(prepared: Any, jobs: int, backend: Any, factory: Any) -> dict[str, Any]:
        seen.append(jobs)
        return {"jobs": jobs, "worst_p99_ms": readings[jobs].pop(0), "frames": 100}

    monkeypatch.setattr(calibrate, "measure", measure)
    result = calibrate.calibrate(SimpleNamespace(runs=[None] * 40), None)
    assert seen == [1, 2, 2, 4, 4, 4] and result["chosen"] == 2
    rows = [(r["jobs"], r["worst_p99_ms"], r["tries"]) for r in result["rows"]]
    assert rows == [(1, 0.2, 1), (2, 0.3, 2), (4, 0.6, 3)]


@pytest.mark.parametrize("workload, chosen, warned", [("messages", 4, True), ("messages", 1, False),
                                                    ("download", 4, False)])
def test_auto_warns_that_deadlines_are_not_calibrated(monkeypatch: pytest.MonkeyPatch, workload: str,
                                                      chosen: int, warned: bool) -> None:
    """Lateness sees the emulation only: a messages campaign on N > 1 networks is told to check its endpoints."""
    from types import SimpleNamespace

    from fecbench.runners import calibrate, cli

    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=out, width=200))
    monkeypatch.setattr(calibrate, "calibrate", lambda *a, **k: {"chosen": chosen, "bound_ms": 0.5, "rows": []})
    cli._calibrate_jobs(SimpleNamespace(runs=[SimpleNamespace(workload=workload)]), None)
    assert ("checked the emulation only" in out.getvalue()) == warned


@pytest.mark.require_root
@pytest.mark.slow
def test_jobs_auto_calibrates_records_and_runs_everything(tmp_path: Path) -> None:
    """--jobs auto on real networks: the calibration's rows and choice are recorded with the campaign,
    the choice follows its rule, and every run ends ok."""
    from fecbench.runners.calibrate import CANDIDATES, choose

    design = smoke_copy(tmp_path)
    db = tmp_path / "auto.sqlite"
    out = fecbench("run", str(design), "--db", str(db), "--jobs", "auto")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "--jobs auto: 1 network(s) at once: worst p99 lateness" in out.stdout
    host = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])
    calibration = host["jobs_calibration"]
    measured = calibration["rows"]
    assert [r["jobs"] for r in measured] == list(CANDIDATES)[:len(measured)] and all(r["frames"] > 0 for r in measured)
    assert calibration["chosen"] == choose(measured, calibration["bound_ms"]) == host["jobs"]
    assert {r["status"] for r in rows(db, "SELECT status FROM runs")} == {"ok"}
    assert f"--jobs auto: {host['jobs']} network(s)" in out.stdout
