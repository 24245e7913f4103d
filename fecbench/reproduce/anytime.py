"""A claim's observations in the order they came, and the confidence sequence of its statistic.

The samples are those of ``statistics`` (pairs: group, value, base, ratio; runs per side) with an
``order`` column: when the observation became available (the later start of a pair's two runs; a
run's start), a value planned before the run, not its outcome. Per statistic (``sequential`` for the
sequences themselves):

- ``share_pairs_below`` / ``above``: the share of the pairs' indicators (ratio below / above
  ``ratio_threshold``; ``ties = "exclude"`` leaves ratios of exactly 1 out);
- ``median_pair_ratio``: the 0.5 quantile of the ratios; ``ratio_of_medians`` and
  ``difference_of_medians``: judged on the median of the per-pair ratios (differences), the paired
  version of the same comparison. The two sides' own medians (each at α/2, interval arithmetic:
  ``sequential.two_quantiles``) ignore the common random numbers, and on a design whose points differ
  their interval is one or two orders of magnitude wider (measured on the A/A design: [0.34, 2.9]
  against [0.97, 1.03] from the same 30 pairs). Equal for symmetric ratios; the page names the
  statistic judged;
- statistics over points: a point's observation is the ratio of medians (or difference) of a block
  of ``min_seeds`` of its seeds, in the order they came; a point with more seeds gives a block per
  ``min_seeds`` seeds (the extra seeds of ``plan``), so the observations are draws of "a point of the
  claim, measured on ``min_seeds`` seeds". ``median_point_ratio``: their median;
  ``share_points_below``: the share below 1; ``trend``: Kendall's τ from disjoint pairs of them
  (Spearman's ρ is no mean of independent terms; τ has the same sign for a monotone relation and the
  packs' trend thresholds are 0); ``mean_point_ratio``: none (a mean of unbounded ratios has no
  nonparametric confidence sequence): its claims say so and stay inconclusive;
- ``quantile_ratio`` (and a flows claim's medians): the q quantile of each side's runs, at α/2 each.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fecbench.reproduce import sequential as sq

#: What the anytime-valid interval is about, where it is not the claim's statistic itself.
JUDGED_ON = {"ratio_of_medians": "median of the per-pair ratios", "difference_of_medians":
             "median of the per-pair differences", "trend": "Kendall's τ over disjoint pairs of points"}
#: Statistics without an anytime-valid interval here (see the module).
NO_SEQUENCE = {"mean_point_ratio": "a mean of unbounded ratios has no nonparametric confidence sequence "
                                   "(the median over points has one)"}


def ordered(sample: pd.DataFrame) -> pd.DataFrame:
    """The sample sorted by availability (rows without an order last, in their given order)."""
    if "order" not in sample or sample.empty:
        return sample.reset_index(drop=True)
    rank = sample["order"].fillna("\uffff").astype(str)
    return sample.assign(_rank=rank, _row=np.arange(len(sample))).sort_values(["_rank", "_row"]) \
        .drop(columns=["_rank", "_row"]).reset_index(drop=True)


def pair_sequence(statistic: str, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
    sample = ordered(sample)
    ratio = sample["ratio"].to_numpy(float) if len(sample) else np.array([])
    if statistic in ("share_pairs_below", "share_pairs_above"):
        threshold = float(params.get("ratio_threshold", 1.0))
        if params.get("ties") == "exclude":
            ratio = ratio[~np.isclose(ratio, 1.0, rtol=0, atol=1e-12)]
        hits = ratio < threshold if statistic == "share_pairs_below" else ratio > threshold
        return sq.share(hits, alpha)
    if statistic in ("median_pair_ratio", "ratio_of_medians"):
        return sq.quantile(ratio[~np.isnan(ratio)], 0.5, alpha)
    value, base = (sample[c].to_numpy(float) if len(sample) else np.array([]) for c in ("value", "base"))
    with np.errstate(invalid="ignore"):
        difference = value - base  # both sides timed out: NaN, left out
    return sq.quantile(difference[~np.isnan(difference)], 0.5, alpha)


def point_blocks(sample: pd.DataFrame, min_seeds: int, per_point: str = "ratio") -> pd.DataFrame:
    """One row per block of ``min_seeds`` seeds of a point (in the order they came): its value, the
    factor, and when it was complete (the last of its pairs)."""
    rows = []
    for _, group in ordered(sample).groupby("group", sort=False):
        for start in range(0, len(group) - min_seeds + 1, min_seeds):
            block = group.iloc[start:start + min_seeds]
            top, bottom = np.median(block["value"].to_numpy(float)), np.median(block["base"].to_numpy(float))
            if per_point == "difference":
                value = top - bottom if not (math.isinf(top) and math.isinf(bottom)) else math.nan
            else:
                value = math.nan if bottom == 0 or (math.isinf(top) and math.isinf(bottom)) else top / bottom
            rows.append({"value": value, "factor": float(block["factor"].iloc[0]) if "factor" in block else math.nan,
                         "order": block["order"].iloc[-1] if "order" in block else None,
                         "position": len(rows)})
    if not rows:
        return pd.DataFrame(columns=["value", "factor", "order", "position"])
    blocks = pd.DataFrame(rows)
    if "order" in sample:
        blocks = blocks.sort_values(["order", "position"], na_position="last", kind="stable")
    return blocks.reset_index(drop=True)


def point_sequence(statistic: str, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence | None:
    if statistic in NO_SEQUENCE:
        return None
    if sample.empty:
        return sq.Sequence(math.nan, math.nan, math.nan, 0)
    blocks = point_blocks(sample, int(params.get("min_seeds", 3)), params.get("per_point", "ratio"))
    values = blocks["value"].to_numpy(float)
    known = ~np.isnan(values)
    if statistic == "median_point_ratio":
        return sq.quantile(values[known], 0.5, alpha)
    if statistic == "share_points_below":
        return sq.share(values[known] < 1, alpha)
    return sq.kendall(values[known], blocks["factor"].to_numpy(float)[known], alpha)  # trend


def group_sequence(label: np.ndarray, base: np.ndarray, q: float, alpha: float) -> sq.Sequence:
    """q quantile of the label's runs ÷ the baseline's (each in the order they came)."""
    return sq.two_quantiles(np.asarray(label, float), np.asarray(base, float), q, alpha, "ratio")
