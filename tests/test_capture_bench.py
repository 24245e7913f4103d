"""The capture benchmark's arithmetic (fecbench.runners.capture_bench): runs paired by key, the median
ratio and its seeded bootstrap interval."""

from __future__ import annotations

import numpy as np

from fecbench.runners.capture_bench import median_interval, paired_ratios


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
