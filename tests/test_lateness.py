"""fecbench.timekeeping.lateness: quantiles of the delay element's lateness histogram and the per-run flag (pure)."""

from __future__ import annotations

import pytest

from fecbench.timekeeping import lateness

EDGES = [5, 10, 20, 50, 100, 200, 300, 500, 750, 1000]


def counts(**by_bucket: int) -> list[int]:
    """A histogram over EDGES (+ the open last bucket) from {"b<i>": count}."""
    hist = [0] * (len(EDGES) + 1)
    for name, n in by_bucket.items():
        hist[int(name[1:])] = n
    return hist


def test_quantile_is_the_upper_edge_of_its_bucket_capped_by_the_max() -> None:
    hist = counts(b0=50, b2=49, b6=1)  # 50 ≤ 5 µs, 49 in (10, 20], 1 in (200, 300]
    assert lateness.quantile_us(hist, EDGES, 250.0, 0.5) == 5.0
    assert lateness.quantile_us(hist, EDGES, 250.0, 0.51) == 20.0
    assert lateness.quantile_us(hist, EDGES, 250.0, 0.99) == 20.0  # rank 99 of 100
    assert lateness.quantile_us(hist, EDGES, 250.0, 1.0) == 250.0  # edge 300 capped by the max seen
    assert lateness.quantile_us(counts(b10=3), EDGES, 4200.0, 0.5) == 4200.0  # the open bucket: the max
    assert lateness.quantile_us(counts(), EDGES, 0.0, 0.5) is None


def test_summary_flags_a_p99_above_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FECBENCH_LATENESS_BOUND_MS")  # the default bound (the suite sets a generous one)
    direction = {"late_hist": counts(b0=980, b8=20), "late_max_us": 700.0, "late_sum_us": 980 * 2.0 + 20 * 600.0}
    late = lateness.summary(direction, EDGES)
    assert late["frames"] == 1000 and late["p50_us"] == 5.0 and late["p99_us"] == 700.0  # (500, 750] capped
    assert late["mean_us"] == pytest.approx(13.96) and late["ok"] is False and late["bound_ms"] == 0.5
    monkeypatch.setenv("FECBENCH_LATENESS_BOUND_MS", "1")
    assert lateness.summary(direction, EDGES)["ok"] is True
    good = lateness.summary({"late_hist": counts(b0=995, b7=5), "late_max_us": 400.0, "late_sum_us": 1.0}, EDGES)
    assert good["p99_us"] == 5.0 and good["ok"] is True


def test_few_frames_are_judged_by_what_the_latest_could_add_to_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under 1000 frames the p99 is one of the largest few: not judged; the latest frame's lateness beyond the bound
    is, against the run's wall time (1 %)."""
    monkeypatch.delenv("FECBENCH_LATENESS_BOUND_MS")
    monkeypatch.delenv("FECBENCH_EXCESS_SHARE", raising=False)
    few = {"late_hist": counts(b0=95, b8=5), "late_max_us": 700.0, "late_sum_us": 3700.0}
    assert lateness.summary(few, EDGES)["p99_us"] == 700.0 and lateness.summary(few, EDGES)["ok"] is True
    assert lateness.summary(few, EDGES, wall_ms=100.0)["ok"] is True      # 0.2 ms beyond: 0.2 % of 100 ms
    short = lateness.summary(few, EDGES, wall_ms=10.0)                     # 2 % of 10 ms
    assert short["ok"] is False and short["worst_excess_ms"] == pytest.approx(0.2)
    assert lateness.reason(short) == ("delay element's latest frame 0.7 ms late, 0.2 ms beyond 0.5 ms: 2 % of the "
                                      "run's 10 ms > 1 %")
    many = {"late_hist": counts(b0=980, b8=20), "late_max_us": 700.0, "late_sum_us": 980 * 2.0 + 20 * 600.0}
    assert lateness.summary(many, EDGES, wall_ms=10_000.0)["ok"] is False   # 1000 frames: the p99 is judged


def test_summary_without_counts_is_none() -> None:
    assert lateness.summary(None, EDGES) is None
    assert lateness.summary({"rx": 3, "tx": 3}, EDGES) is None  # a build without the histogram
    assert lateness.summary({"late_hist": counts(b0=1)}, None) is None
    empty = lateness.summary({"late_hist": counts(), "late_max_us": 0.0, "late_sum_us": 0.0}, EDGES)
    assert empty["frames"] == 0 and empty["p99_us"] is None and empty["ok"] is None


def test_status_and_loader_flag_runs_above_the_bound(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose recorded lateness broke the bound is counted by `fecbench status` and the loader."""
    monkeypatch.delenv("FECBENCH_LATENESS_BOUND_MS")
    import json
    import subprocess
    import sys

    from fecbench.analysis import tables
    from fecbench.records import db as dbmod
    from tests.helpers.analysis_db import make_table_db

    db = make_table_db(tmp_path / "late.sqlite", [(0, "quic", 1000, rep, "ok", 10.0) for rep in range(3)])

    def record(lateness_of: dict) -> None:
        con = dbmod.connect(db)
        with dbmod.transaction(con):
            for key, late in lateness_of.items():
                con.execute("UPDATE link_stats SET delay_json = ? WHERE run_key = ? AND direction = 'forward'",
                            (json.dumps({"backend": "delayline", "lateness": late}), key))
        con.close()

    def warnings() -> dict:
        out = subprocess.run([sys.executable, "-m", "fecbench", "status", str(db), "--json"], capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout)["lateness_warnings"]

    con = dbmod.connect(db)
    keys = [k for (k,) in con.execute("SELECT key FROM runs ORDER BY repetition")]
    con.close()
    bad = lateness.summary({"late_hist": counts(b0=90, b9=10), "late_max_us": 1500.0, "late_sum_us": 15000.0}, EDGES,
                           wall_ms=50.0)   # its latest frame 1 ms beyond the bound: 2 % of the run
    good = lateness.summary({"late_hist": counts(b0=100), "late_max_us": 4.0, "late_sum_us": 300.0}, EDGES)
    record(dict(zip(keys, (bad, good, None), strict=True)))
    frame = tables.lateness(db)
    assert dict(zip(frame["run_key"], frame["ok"], strict=True)) == {keys[0]: False, keys[1]: True}
    found = warnings()
    assert {k: found[k] for k in ("runs", "worst_p99_ms", "max_p99_ms", "bound_ms")} == {
        "runs": 1, "worst_p99_ms": 1.0, "max_p99_ms": 1.0, "bound_ms": 0.5}

    def text() -> str:
        return subprocess.run([sys.executable, "-m", "fecbench", "status", str(db)], capture_output=True, text=True,
                              check=True, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"}).stdout

    # flagged by its latest frame (100 frames: too few for the p99), and said so
    assert found["criterion"] == lateness.criterion_text(lateness.judge([(keys[0], bad), (keys[1], good)]))
    assert "delay elements: 1 of 2 run(s) flagged" in found["criterion"]
    assert "1 by the latest frame" in found["criterion"]
    assert found["criterion"] in " ".join(text().split())
    # No run above the bound: still the bound the runs were judged by, how close they came, and by which criterion.
    record({keys[0]: good})
    found = warnings()
    assert {k: found[k] for k in ("runs", "worst_p99_ms", "max_p99_ms", "bound_ms")} == {
        "runs": 0, "worst_p99_ms": 0.0, "max_p99_ms": good["p99_us"] / 1000, "bound_ms": 0.5}
    assert "timekeeping: " + lateness.criterion_text(lateness.judge([(k, good) for k in keys[:2]])) in " ".join(
        text().split())


def test_every_accuracy_line_says_the_criterion_that_cleared_or_flagged_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 62 item 3: a run with 16 ms p99 lateness over 500 frames is not flagged (too few frames for the p99:
    judged by its latest frame, 15.5 ms beyond the bound in a 20 s run); its accuracy line says so, with the
    criterion's n and bound. One function gives the words to `status`, the report and --jobs auto's calibration."""
    monkeypatch.delenv("FECBENCH_LATENESS_BOUND_MS")
    monkeypatch.delenv("FECBENCH_EXCESS_SHARE", raising=False)
    few = lateness.summary({"late_hist": counts(b0=490, b10=10), "late_max_us": 16000.0, "late_sum_us": 1.7e5},
                           EDGES, wall_ms=20_000.0)
    assert few["frames"] == 500 and few["p99_us"] == 16000.0 and few["ok"] is True
    text = lateness.criterion_text(lateness.judge([("a", few)]))
    assert text == ("delay elements: 0 of 1 run(s) flagged (p99 lateness ≤ 0.5 ms where a direction sent n ≥ 1,000 "
                    "frames; latest frame ≤ 1 % of the run's wall time beyond 0.5 ms); 1 run(s) with a direction of "
                    "too few frames for the p99 criterion (n < 1,000; judged by its latest frame alone): p99 up to "
                    "16 ms (n = 500)")
    many = lateness.summary({"late_hist": counts(b0=980, b8=20), "late_max_us": 700.0, "late_sum_us": 1.4e4},
                            EDGES, wall_ms=20_000.0)
    assert many["ok"] is False
    both = lateness.judge([("a", few), ("b", many), ("b", few)])
    assert lateness.criterion_text(both) == (
        "delay elements: 1 of 2 run(s) flagged (p99 lateness ≤ 0.5 ms where a direction sent n ≥ 1,000 frames; "
        "latest frame ≤ 1 % of the run's wall time beyond 0.5 ms); 1 by the p99 (worst 0.7 ms, n = 1,000); p99 at "
        "most 0.7 ms where judged (n ≥ 1,000); 2 run(s) with a direction of too few frames for the p99 criterion "
        "(n < 1,000; judged by its latest frame alone): p99 up to 16 ms (n = 500)")
    # a record from before the frame criterion (issue 48) was judged by its p99 alone: said without an n
    old = {"frames": 300, "p99_us": 900.0, "bound_ms": 0.5, "ok": False}
    assert lateness.criterion_text(lateness.judge([("c", old)])) == (
        "delay elements: 1 of 1 run(s) flagged (p99 lateness ≤ 0.5 ms); 1 by the p99 (worst 0.9 ms, n = 300); p99 at "
        "most 0.9 ms")
    assert lateness.criterion_text(lateness.judge([])) == "delay elements: no lateness measured (netem counts none)"

    # the report's accuracy table and the calibration line: the same words
    import json

    import pandas as pd

    from fecbench.analysis.report.accuracy import judge_frame
    from fecbench.runners.executors import calibrate
    from fecbench.runners.executors.calibrations import row_text

    frame = pd.DataFrame([{"run_key": key, **late} for key, late in (("a", few), ("b", many), ("b", few))])
    assert judge_frame(frame) == both
    results = {key: {"key": key, "status": "ok", "value": 1.0, "endpoint_p99_ms": 0.2, "endpoint_ok": True,
                     "lateness_p99_ms": max(x["p99_us"] for x in late) / 1000,
                     "lateness_ok": all(x["ok"] for x in late), "lateness": late}
               for key, late in (("a", [few]), ("b", [many, few]))}
    row = json.loads(json.dumps(calibrate.summarise(1, results, None, 0.0)))   # as a kept calibration reads it
    assert lateness.criterion_text(both) in row_text(row)


def test_the_recorded_summary_is_read_back_or_none() -> None:
    assert lateness.from_delay_json('{"ab": {}, "lateness": {"p99_us": 120.0, "ok": true}}') == {
        "p99_us": 120.0, "ok": True}
    for text in (None, "", "not json", "[1, 2]", '{"ab": {}}', '{"lateness": null}'):
        assert lateness.from_delay_json(text) is None, text


@pytest.mark.parametrize("variable", ["FECBENCH_LATENESS_BOUND_MS", "FECBENCH_ENDPOINT_BOUND_MS"])
@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf"])
def test_a_bound_that_is_not_a_positive_number_is_bad_input(variable: str, value: str, tmp_path) -> None:
    """Never silently replaced by the default: the CLI names the variable and exits 2 before doing anything."""
    import os
    import subprocess
    import sys

    env = {**os.environ, variable: value}
    out = subprocess.run([sys.executable, "-m", "fecbench", "status", str(tmp_path / "none.sqlite")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{variable}='{value}'" in out.stderr and "positive number" in out.stderr and "Traceback" not in out.stderr
