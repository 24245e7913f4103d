"""`fecbench bench campaign`'s arithmetic on recorded runs (fecbench.runners.commands.campaign_bench): the steady
share of network time in runs, the ratio estimator behind the projection, every frame's lateness together."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from fecbench.runners.commands import campaign_bench


def _run(key: str, start: float, end: float, fidelity: float = 0.0, status: str = "ok") -> dict:
    iso = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat().replace("+00:00", "Z")  # noqa: E731
    return {"key": key, "status": status, "duration_s": end - start, "started_at": iso(start), "finished_at": iso(end),
            "phases": {"fidelity": fidelity} if fidelity else {}, "held_s": end - start - fidelity}


def test_steady_use_counts_time_in_runs_until_the_last_start() -> None:
    # Two networks: runs back to back on one, a 1 s gap on the other; the tail after the last start is left out.
    rows = [_run("a", 0, 4), _run("b", 0, 3), _run("c", 4, 8), _run("d", 4, 30)]
    assert campaign_bench.steady_use(rows, 2) == pytest.approx((4 + 3) / (2 * 4))
    assert campaign_bench.steady_use([_run("a", 0, 4)], 1) is None  # one start: no steady window


def test_projection_is_the_ratio_estimator_scaled_to_the_whole_design() -> None:
    # Pilot runs held their network twice what the model says (plus noise); the design's model total is
    # 3600 s over 100 points: projection = (3600 · R + (100 + 2) · f) / (2 · u).
    rows = [_run("a", 0, 2.2, fidelity=0.2), _run("b", 0, 4.0), _run("c", 2.2, 6.2), _run("d", 4.0, 9.9)]
    model = {"a": 1.0, "b": 2.0, "c": 2.0, "d": 3.0, "unrun": 3592.0}
    got = campaign_bench.projection(rows, model, points=100, jobs=2)
    x, m = [2.0, 4.0, 4.0, 5.9], [1.0, 2.0, 2.0, 3.0]
    ratio = sum(x) / sum(m)
    se = math.sqrt(sum((a - ratio * b) ** 2 for a, b in zip(x, m, strict=True)) / 3 / 4) / (sum(m) / 4)
    use = campaign_bench.steady_use(rows, 2)
    assert got["ratio"] == pytest.approx(ratio, abs=1e-4) and got["ratio_se"] == pytest.approx(se, abs=1e-4)
    assert got["fidelity_per_check_s"] == pytest.approx(0.2) and got["steady_use"] == pytest.approx(use, abs=1e-3)
    expected_h = (3600 * ratio + 102 * 0.2) / (2 * use) / 3600
    assert got["projected_h"] == pytest.approx(expected_h, abs=0.01)
    low, high = got["range_h"]
    assert low < got["projected_h"] < high
    assert got["serial_h"] == pytest.approx((3600 * ratio + 100 * 0.2) / 3600, abs=0.01)
    assert got["statuses"] == {"ok": 4} and got["runs"] == 4


def test_frame_lateness_adds_every_histogram_and_counts_frames_above_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FECBENCH_LATENESS_BOUND_MS")  # the default 0.5 ms (the suite sets a generous one)
    edges = [5, 10, 20, 50, 100, 200, 300, 500, 750, 1000, 2000, 5000, 10000, 20000, 50000]
    one = {"late_hist": [0, 0, 10, 80, 8, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0], "late_max_us": 700.0}
    two = {"late_hist": [0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0], "late_max_us": 1500.0}
    got = campaign_bench.frame_lateness([one, two], edges)
    assert got["frames"] == 202 and got["above_bound"] == 3  # buckets above 500 µs: 1 + 2 frames
    assert got["p50_us"] == 50 and got["max_us"] == 1500.0 and got["p99.9_us"] == 1500.0
    assert campaign_bench.frame_lateness([], edges) is None


def test_the_figures_print(capsys: pytest.CaptureFixture[str]) -> None:
    """The table and pilot lines of `fecbench bench campaign` from a result as run_bench returns it."""
    from fecbench.cli import run as cli

    late = {"run_p99_lateness_ms": {"p50": 0.1, "p99": 0.2, "max": 0.3, "runs_above_bound": 0},
            "frame_lateness_us": {"frames": 100, "p50_us": 50.0, "p99_us": 200.0, "p99.9_us": 300.0, "max_us": 400.0,
                                  "above_bound": 0}}
    ends = {"endpoint_p99_ms": {"p50": 0.21, "p99": 0.87, "max": 1.4, "runs_above_bound": 3, "bound_ms": 1.0,
                                "every_p99": 0.3, "every_p99.9": 2.1, "runq_share_p50": 0.02}}
    row = {"jobs": 8, "runs": 128, "wall_s": 50.0, "speedup_wall": 7.1, "span_s": 45.0, "speedup_span": 7.5,
           "in_flight": 7.6, "cpu_busy": [0.5, 0.2], "statuses": {"ok": 128}, "projected_full_design_h": 7.7,
           "dct_vs_serial": {"runs": 128, "p10": 0.97, "p50": 1.0, "p90": 1.04}, **late, **ends}
    pilot = {"jobs": 8, "runs": 64, "runs_in_design": 14040, "statuses": {"ok": 64}, "ratio": 0.93, "ratio_se": 0.07,
             "steady_use": 0.99, "fidelity_per_check_s": 0.9, "projected_h": 7.7, "range_h": [7.0, 8.4],
             "serial_h": 60.1, "model_total_h": 64.7, "cpu_busy": [0.4, 0.2], "metric": "dct_ms",
             "versus_serial": {"median_ratio": 1.01, "wilcoxon_p": 0.4}, "keeps_bounds": True, "why": "",
             **late, **ends}
    cli.console.width = 400
    cli._print_bench({"design": "designs/bench-campaign.toml", "cores": 2, "load_average": [0.1, 0.2, 0.3],
                      "lateness_bound_ms": 0.5, "endpoint_bound_ms": 1.0,
                      "full_design": "designs/networking2019-uniform.toml", "pilots": [pilot], "results": [row],
                      "projection": {"jobs": 8, "projected_h": 7.7, "range_h": [7.0, 8.4], "serial_h": 60.1}})
    out = capsys.readouterr().out
    assert "7.7" in out and "95 %: 7.0–8.4 h" in out and "50% 20%" in out and "0.97/1.0/1.04" in out
    assert "0.21/0.87/1.4 (3)" in out and "0.3/2.1" in out and "dct_ms ÷ serial median 1.01" in out
    assert "7.7 h (95 %: 7.0–8.4 h) with 8 network(s), the largest N that keeps both bounds" in out


def test_a_pilot_keeps_the_bounds_only_within_both_and_matching_serial() -> None:
    serial = {"jobs": 1, "metric": "dct_ms", "epsilon": 0.0,
              "endpoint_p99_ms": {"runs_above_bound": 0}, "run_p99_lateness_ms": {"runs_above_bound": 0},
              "outcome": {f"k{i}": {"status": "ok", "value": 100.0 + i} for i in range(12)}}
    assert campaign_bench.keeps_bounds(serial, serial) == (True, "")
    same = {**serial, "jobs": 4, "outcome": {k: {"status": "ok", "value": v["value"] * (1.01 if i % 2 else 0.99)}
                                              for i, (k, v) in enumerate(serial["outcome"].items())}}
    assert campaign_bench.keeps_bounds(same, serial)[0] and same["versus_serial"]["pairs"] == 12
    slow = {**same, "jobs": 8, "outcome": {k: {"status": "ok", "value": v["value"] * 2} for k, v in
                                            serial["outcome"].items()}}
    ok, why = campaign_bench.keeps_bounds(slow, serial)
    assert not ok and "median dct_ms ratio to serial 2.000" in why
    late = {**same, "jobs": 16, "endpoint_p99_ms": {"runs_above_bound": 2}}
    assert campaign_bench.keeps_bounds(late, serial) == (False, "2 run(s) above the endpoint bound")
    assert campaign_bench.keeps_bounds({**serial, "endpoint_p99_ms": None}, None) == (False, "endpoints not measured")


def test_versus_serial_compares_the_same_runs() -> None:
    serial = {"a": 100.0, "b": 200.0, "c": 50.0}
    got = campaign_bench.versus_serial(serial, {"a": 110.0, "b": 200.0, "c": 45.0, "d": 1.0})
    assert got == {"runs": 3, "p10": 0.9, "p50": 1.0, "p90": 1.1}  # c, b, a: only runs measured both ways
    assert campaign_bench.versus_serial(serial, {"x": 1.0}) is None
