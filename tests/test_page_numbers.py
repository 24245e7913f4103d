"""The page's number from the same runs as its interval, never NaN (issue 69, item 6; pure logic): a pair whose two
runs both reached the time limit stays in the number as it stays in the interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fecbench.verdicts import statistics

INF = math.inf


def _pairs(value: list[float], base: list[float]) -> pd.DataFrame:
    v, b = np.asarray(value, float), np.asarray(base, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = v / b
    finite = np.isfinite(v) & np.isfinite(b)
    return pd.DataFrame({"draw": range(len(v)), "group": 0, "value": v, "base": b, "ratio": ratio,
                         "value_lo": np.where(np.isinf(v), 240.0, v), "value_hi": v,
                         "base_lo": np.where(np.isinf(b), 240.0, b), "base_hi": b,
                         "ratio_lo": np.where(finite, ratio, 0.0), "ratio_hi": np.where(finite, ratio, INF)})


def test_a_pair_timed_out_on_both_sides_does_not_make_the_median_ratio_nan() -> None:
    # Before: NaN as soon as one pair timed out on both sides, and the allocator then asked for 800 more draws.
    stat = statistics.get("median_pair_ratio")
    sample = _pairs([50, 60, INF, 70, 80], [100, 100, INF, 100, 100])
    number = stat.estimand(sample, {})
    assert number == 0.7                       # 0.5, 0.6, 0.7, 0.8 and the tie (1): the median is 0.7
    estimate = stat.estimate(sample, {}, seed=1)
    assert estimate.value == number and estimate.n == 5
    sequence = stat.sequence(sample, {}, 0.05)
    assert sequence.n == 5                      # the interval reads the same five pairs


def test_two_medians_read_the_pairs_timed_out_on_both_sides_like_their_interval() -> None:
    # Before: the number left those pairs out (median 60 ÷ 100 here) while the interval kept them.
    stat = statistics.get("ratio_of_medians")
    sample = _pairs([50, 60, INF, INF, 70], [100, 100, INF, INF, 100])
    assert stat.estimand(sample, {}) == 70 / 100
    assert stat.estimate(sample, {}, seed=1).n == 5 and stat.sequence(sample, {}, 0.05).n == 5
