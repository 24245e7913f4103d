"""Means as means (issue 69, item 3; pure logic): a claim that an average is *above* a threshold is judged on the
average by a betting lower bound for a nonnegative mean, which needs no bound on the values; one that it is *below*
a threshold on a restricted mean (each value capped at a bound the pack fixes), bounded both ways. Each decides where
the median says the opposite, and covers its mean on skewed, heavy-tailed data."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench.inputs.errors import SpecError
from fecbench.verdicts import mean_bound, statistics
from fecbench.verdicts import sequential as sq
from fecbench.verdicts.pack import load_pack
from tests.test_reproduce import CLAIM, _pack

LEVEL = 0.05 / 33          # networking2019's per-claim level


def test_the_lower_bound_covers_a_heavy_tailed_mean_at_every_look() -> None:
    # log-normal with σ = 1 (a few draws 10× the median), mean exactly 1: looked at after 10, 30, 100 and 300 draws.
    rng = np.random.default_rng(69)
    replays, alpha = 300, 0.05
    misses = sum(any(mean_bound.mean_lower(x[:n], alpha) > 1.0 for n in (10, 30, 100, 300))
                 for x in (rng.lognormal(-0.5, 1.0, size=300) for _ in range(replays)))
    assert misses / replays <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / replays), misses


def test_an_above_average_claim_decides_where_the_median_says_the_opposite() -> None:
    # Two blocks in three at 0.9, one at 3.0: the median is 0.9 (below 1), the mean 1.6 (above).
    claim = next(c for c in load_pack("networking2019").claims if c.id == "fig10-long-bursts-worse")
    assert claim.statistic == "mean_block_ratio" and claim.compare == ">"
    values = np.tile([0.9, 0.9, 3.0], 60)
    blocks = pd.DataFrame({"draw": range(values.size), "cell": 0, "low": values, "high": values, "factor": 0.0})
    mean = claim.stat.over_blocks(blocks, claim.params, LEVEL)
    assert math.isinf(mean.high) and mean.low > 1.0
    assert sq.decide(mean.low, mean.high, ">", 1.0, claim.tolerance) == "holds"
    median = statistics.get("median_block_ratio").over_blocks(blocks, claim.params, LEVEL)
    assert median.high < 1.0                                   # the median claims the opposite
    assert claim.stat.fewest_observations(claim.params, ">", 1.0, 0.0, LEVEL) < values.size


def test_it_can_show_a_mean_above_a_threshold_never_below_one() -> None:
    low = mean_bound.mean_above(np.full(200, 0.2), LEVEL)
    assert low.low < 0.2 and math.isinf(low.high)
    assert sq.decide(low.low, low.high, "<", 1.0, 0.0) == "inconclusive"      # never holds "below"
    censored = mean_bound.mean_above(np.array([]), LEVEL)
    assert censored.n == 0 and math.isnan(censored.low)


def _blocks(values: np.ndarray, high: np.ndarray | None = None) -> pd.DataFrame:
    return pd.DataFrame({"draw": range(values.size), "cell": 0, "low": values,
                         "high": values if high is None else high, "factor": 0.0})


def test_a_restricted_mean_covers_a_heavy_tailed_capped_mean_from_both_sides_at_every_look() -> None:
    # log-normal with σ = 1, median 0.8, capped at 1.5 (about 27 % of the draws above the cap): the truth
    # E[min(X, 1.5)] from a million draws; each side may miss at most α/2, looked at after 10, 30, 100 and 300 draws.
    rng = np.random.default_rng(691)
    cap, alpha, replays = 1.5, 0.05, 300
    truth = float(np.mean(np.minimum(rng.lognormal(math.log(0.8), 1.0, size=1_000_000), cap)))
    below = above = 0
    for _ in range(replays):
        x = rng.lognormal(math.log(0.8), 1.0, size=300)
        looks = [mean_bound.restricted_mean(x[:n], x[:n], cap, alpha) for n in (10, 30, 100, 300)]
        below += any(s.high < truth for s in looks)
        above += any(s.low > truth for s in looks)
    slack = 3 * math.sqrt(alpha / 2 * (1 - alpha / 2) / replays)
    assert below / replays <= alpha / 2 + slack and above / replays <= alpha / 2 + slack, (below, above)


def test_a_below_average_claim_decides_on_the_restricted_mean() -> None:
    claim = next(c for c in load_pack("networking2019").claims if c.id == "fig10-short-bursts-better")
    assert claim.statistic == "restricted_mean_block_ratio" and claim.compare == "<" and not claim.average_proxy
    cap = claim.params["mean_cap"]
    # Blocks at 0.85 ± 0.05: the mean of the capped ratios is shown below 1 in a finite budget, where an unrestricted
    # mean below a threshold needs ~19,000 runs per side (reproduce/README.md, Averages).
    values = np.tile([0.8, 0.85, 0.9], 40)
    mean = claim.stat.over_blocks(_blocks(values), claim.params, LEVEL)
    assert mean.high < 1.0 and mean.low > 0.0
    assert sq.decide(mean.low, mean.high, "<", 1.0, claim.tolerance) == "holds"
    # Two blocks in three at 0.9, one at three times QUIC's time: the median says "below 1", the capped mean
    # ((0.9 + 0.9 + 1.5) ÷ 3 = 1.1) says the opposite and the claim fails.
    skewed = np.tile([0.9, 0.9, 3.0], 60)
    mean = claim.stat.over_blocks(_blocks(skewed), claim.params, LEVEL)
    assert mean.low >= 1.0 and mean.high <= cap
    assert sq.decide(mean.low, mean.high, "<", 1.0, claim.tolerance) == "fails"
    median = statistics.get("median_block_ratio").over_blocks(_blocks(skewed), claim.params, LEVEL)
    assert median.high < 1.0
    assert claim.stat.fewest_observations(claim.params, "<", 1.0, claim.tolerance, LEVEL) <= values.size


def test_a_censored_block_counts_from_its_low_end_to_the_cap_and_the_page_counts_the_capped() -> None:
    stat, params = statistics.get("restricted_mean_block_ratio"), {"mean_cap": 1.5, "min_seeds": 1}
    values = np.full(40, 0.8)
    known = stat.over_blocks(_blocks(values), params, LEVEL)
    high = values.copy()
    high[:10] = math.inf                            # ten blocks whose FEC runs reached the time limit
    censored = stat.over_blocks(_blocks(values, high), params, LEVEL)
    assert censored.high > known.high and censored.low == pytest.approx(known.low)
    sample = pd.DataFrame({"draw": range(4), "cell": 0, "factor": 0.0, "value": [1.0, 2.0, 0.5, 3.0],
                           "base": 1.0, "value_lo": [1.0, 2.0, 0.5, 3.0], "value_hi": [1.0, 2.0, 0.5, 3.0],
                           "base_lo": 1.0, "base_hi": 1.0})
    assert stat.estimand(sample, params) == pytest.approx((1.0 + 1.5 + 0.5 + 1.5) / 4)
    assert "2 of 4 blocks at or above the cap 1.5" in stat.estimate(sample, params, n_boot=0).note


@pytest.mark.parametrize(("keys", "problem"), [
    ('mean_cap = 1.5', "mean_cap_source"),
    ('mean_cap_source = "the design"', "mean_cap"),
    ('mean_cap = 1.01\nmean_cap_source = "x"', "never be above the threshold"),
    ('mean_cap = 1.5\nmean_cap_source = " "', "needs its source"),
])
def test_a_restricted_mean_states_its_cap_with_its_source_above_the_threshold(tmp_path: Path, keys: str,
                                                                               problem: str) -> None:
    claim = CLAIM.format(more=keys).replace('"ratio_of_medians"', '"restricted_mean_block_ratio"')
    claim = claim.replace('threshold = 1.0', 'threshold = 1.0\n    tolerance = 0.02\n    tolerance_source = "t"')
    with pytest.raises(SpecError, match=problem):
        load_pack(_pack(tmp_path, claim))
