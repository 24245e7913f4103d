"""Means as means, from below (issue 69, item 3; pure logic): a claim that an average is *above* a threshold is judged
on the average by a betting lower bound for a nonnegative mean, which needs no bound on the values; it decides
where the median says the opposite, and covers its mean on skewed, heavy-tailed data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fecbench.verdicts import mean_bound, statistics
from fecbench.verdicts import sequential as sq
from fecbench.verdicts.pack import load_pack

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
