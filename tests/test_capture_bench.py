"""The capture benchmark's arithmetic (fecbench.runners.commands.capture_bench): runs paired by key, the median
ratio and its seeded bootstrap interval."""

from __future__ import annotations

import numpy as np

from fecbench.runners.commands.capture_bench import median_interval, paired_ratios


def test_pairs_only_runs_ok_on_both_sides_by_key() -> None:
    off = [{"key": "a", "status": "ok", "dct_ms": 100.0}, {"key": "b", "status": "ok", "dct_ms": 200.0},
           {"key": "c", "status": "failed", "dct_ms": None}]
    on = [{"key": "a", "status": "ok", "dct_ms": 110.0}, {"key": "b", "status": "timeout", "dct_ms": 300.0},
          {"key": "c", "status": "ok", "dct_ms": 50.0}]
    assert paired_ratios(off, on).tolist() == [1.1]


def test_median_interval_is_seeded_and_covers_the_median() -> None:
    ratios = np.array([0.98, 1.0, 1.01, 1.02, 0.99, 1.03, 1.0, 0.97])
    first, second = median_interval(ratios), median_interval(ratios)
    assert first == second and first[1] <= first[0] <= first[2]


def test_text_prints_the_ratio_endpoint_timing_and_run_time() -> None:
    from fecbench.runners.commands.capture_bench import text

    side = {"wall_s": 5.0, "run_s_p50": 0.31, "kept_bytes": 2_000_000,
            "endpoints": {"p50": 0.6, "p99": 0.9, "max": 0.9, "runs_above_bound": 0, "bound_ms": 2.0}}
    out = text({"design": "d.toml", "jobs": 1, "pairs": 16, "goal": 0.02, "meets_goal": True,
                "dct_ratio": {"median": 0.999, "low": 0.99, "high": 1.01}, "off": side, "all": side})
    assert out.startswith("capture all vs off, 16 runs") and "DCT median ratio (on ÷ off) 0.999" in out
    assert "median run 0.31 s" in out
    assert "endpoint run p99 p50/p99/max 0.6/0.9/0.9 ms (0 runs above 2.0 ms)" in out and "kept 2.00 MB" in out


def test_per_label_ratios_say_which_stack_is_above_the_budget() -> None:
    from fecbench.runners.commands.capture_bench import per_label

    off = [{"key": f"{lab}{i}", "label": lab, "size": 1000, "status": "ok", "dct_ms": 100.0}
           for lab in ("fecq", "tquic") for i in range(6)]
    on = [{**r, "dct_ms": 100.5 if r["label"] == "fecq" else 105.6} for r in off]
    rows = {r["label"]: r for r in per_label(off, on)}
    assert rows["fecq"]["median"] == 1.005 and rows["fecq"]["within_goal"] and rows["fecq"]["pairs"] == 6
    assert rows["tquic"]["median"] == 1.056 and not rows["tquic"]["within_goal"]
