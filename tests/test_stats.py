"""fecbench.analysis.stats: censored medians, ratio bounds and the seeded bootstrap, on hand-made numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fecbench.analysis import stats

INF = math.inf


@pytest.mark.parametrize("values, censored, expected", [
    ([1, 2, 3], [0, 0, 0], (2.0, 2.0)),                   # nothing censored: the plain median
    ([1, 2, 3, 4], [0, 0, 0, 0], (2.5, 2.5)),
    ([1, 2, 3, None, None], [0, 0, 0, 1, 1], (3.0, 3.0)),  # 2 of 5 censored: still exact
    ([1, 2, None], [0, 0, 1], (2.0, 2.0)),                 # 1 of 3
    ([1, 2, 3, None], [0, 0, 0, 1], (2.5, 2.5)),           # 1 of 4: both middle values finished
    ([1, 2, None, None], [0, 0, 1, 1], (6.0, INF)),        # half censored: (2 + T) / 2 <= median
    ([1, None, None], [0, 1, 1], (10.0, INF)),             # most censored: >= T
    ([None, None], [1, 1], (10.0, INF)),
])
def test_median_bounds_censored_at_the_limit(values, censored, expected):
    values = [math.nan if v is None else v for v in values]
    assert stats.median_bounds(values, censored, 10.0) == expected


def test_median_bounds_edge_cases():
    assert all(math.isnan(v) for v in stats.median_bounds([], [], 10.0))
    # An unknown limit still gives a valid lower bound (a duration is >= 0).
    assert stats.median_bounds([1.0, math.nan, math.nan], [False, True, True], math.nan) == (0.0, INF)
    # Per-value limits (runs of two campaigns with different timeouts).
    assert stats.median_bounds([math.nan, math.nan, 1.0], [True, True, False], [5.0, 7.0, 0.0]) == (5.0, INF)


@pytest.mark.parametrize("num, den, bounds, state, text", [
    ((3.0, 3.0), (6.0, 6.0), (0.5, 0.5), "exact", "0.5"),
    ((10.0, INF), (4.0, 4.0), (2.5, INF), "at least", "≥ 2.5"),
    ((3.0, 3.0), (10.0, INF), (0.0, 0.3), "at most", "≤ 0.3"),
    ((10.0, INF), (10.0, INF), (0.0, INF), "undefined", "undefined"),
    ((2.0, 3.0), (4.0, 5.0), (0.4, 0.75), "between", "0.4–0.75"),
])
def test_ratio_bounds_state_and_text(num, den, bounds, state, text):
    got = stats.ratio_bounds(num, den)
    assert got == pytest.approx(bounds)
    assert stats.state(got) == state and stats.describe(got) == text
    assert stats.exact(got) == (bounds[0] if state == "exact" else pytest.approx(math.nan, nan_ok=True))


def test_divide_conventions():
    assert stats.divide(1.0, INF) == 0.0 and stats.divide(INF, 2.0) == INF
    for a, b in ((INF, INF), (1.0, 0.0), (math.nan, 1.0)):
        assert math.isnan(stats.divide(a, b))
    assert stats.state((math.nan, math.nan)) == "no data" and stats.describe((math.nan, math.nan)) == "–"


def test_share_below_bounds():
    lows = [0.5, 2.0, 0.0, 0.0]   # exact 0.5, at least 2, at most 0.8, undefined
    highs = [0.5, INF, 0.8, INF]
    assert stats.share_below_bounds(lows, highs) == (0.5, 0.75)
    assert stats.share_below_bounds([0.5, math.nan], [0.5, math.nan]) == (1.0, 1.0)  # no-data rows left out
    assert all(math.isnan(v) for v in stats.share_below_bounds([], []))


def test_bootstrap_is_seeded_and_reproducible():
    rng = np.random.default_rng(5)
    base = rng.uniform(100, 200, 9)
    label = base * rng.uniform(0.6, 1.2, 9)
    first = stats.bootstrap_ratio_of_medians(label, base, n_boot=500, seed=42)
    assert stats.bootstrap_ratio_of_medians(label, base, n_boot=500, seed=42) == first
    # The documented algorithm: resample seeds (pairs) with numpy's Generator, order-statistic quantiles.
    picks = np.random.default_rng(42).integers(0, 9, size=(500, 9))
    resampled = np.median(label[picks], axis=1) / np.median(base[picks], axis=1)
    assert first == tuple(np.quantile(resampled, [0.025, 0.975], method="inverted_cdf"))
    point = np.median(label) / np.median(base)
    assert first[0] <= point <= first[1]
    # The bounds are ratios of medians of actual resamples: between the extreme per-seed values' ratios.
    assert label.min() / base.max() <= first[0] and first[1] <= label.max() / base.min()


def test_bootstrap_degenerate_and_censored_cases():
    base = np.array([100.0, 150.0, 200.0, 250.0, 300.0])
    # The label is always half the baseline: every resample's ratio of medians is 0.5.
    assert stats.bootstrap_ratio_of_medians(base / 2, base, n_boot=200, seed=1) == (0.5, 0.5)
    # All label runs timed out: every resampled ratio is +inf.
    assert stats.bootstrap_ratio_of_medians(np.full(5, INF), base, n_boot=200, seed=1) == (INF, INF)
    # Both sides always censored: no defined resample, no interval.
    assert all(math.isnan(v) for v in stats.bootstrap_ratio_of_medians(np.full(3, INF), np.full(3, INF)))
    assert all(math.isnan(v) for v in stats.bootstrap_ratio_of_medians([], []))
    # One or two seeds: no interval (a single seed would give a zero-width one).
    assert all(math.isnan(v) for v in stats.bootstrap_ratio_of_medians([1.0, 2.0], [2.0, 2.0]))
    assert stats.bootstrap_ratio_of_medians([1.0], [2.0], min_pairs=1) == (0.5, 0.5)


def test_group_seed_depends_on_key_not_on_order():
    assert stats.group_seed(0, ["h", "download", "fec", "3", "1000"]) == \
        stats.group_seed(0, ["h", "download", "fec", "3", "1000"])
    assert stats.group_seed(0, ["a"]) != stats.group_seed(1, ["a"]) != stats.group_seed(0, ["b"])


def test_a_medians_order_statistic_interval_needs_its_n_and_covers() -> None:
    """Issue 62 (2): no interval from fewer values than the method needs; coverage ≥ 95 % on a skewed law."""
    assert stats.fewest_for_median_interval(0.95) == 6 and stats.fewest_for_median_interval(0.975) == 7
    assert all(math.isnan(v) for v in stats.median_order_interval([1, 2, 3, 4, 5]))
    assert stats.median_order_interval(np.arange(1, 7)) == (1.0, 6.0)       # six values: the extremes
    assert stats.median_order_interval(np.arange(1, 101)) == (40.0, 61.0)   # the textbook pair for n = 100
    assert stats.median_order_interval([1, 2, 3, INF, INF, INF, INF]) == (1.0, INF)   # censored keep their rank
    rng = np.random.default_rng(62)
    true = float(np.exp(0.0))   # the lognormal(0, 1) median
    hits = [low <= true <= high for low, high in (stats.median_order_interval(rng.lognormal(0, 1, 9))
                                                   for _ in range(2000))]
    assert np.mean(hits) >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 2000)
    # the per-point bootstrap from its minimum of seeds on: coverage on skewed, paired data
    hits = 0
    for i in range(300):
        z, e = rng.normal(size=(2, stats.MIN_SEEDS_FOR_INTERVAL))
        low, high = stats.bootstrap_ratio_of_medians(0.8 * np.exp(0.5 * z), np.exp(0.5 * (0.9 * z + 0.44 * e)),
                                                     n_boot=500, seed=i, min_pairs=stats.MIN_SEEDS_FOR_INTERVAL)
        hits += low <= 0.8 <= high
    assert hits / 300 >= 0.93, hits
