"""Statistics over design points: per group (point and size) the ratio of medians of its seeds (groups with
fewer than ``min_seeds`` seeds left out); ``per_point = "difference"`` takes each point's difference of
medians instead (re-buffering is often 0). The sample is that of ``pairs`` (one row per pair, with the
trend's ``factor``).

- ``median_point_ratio``: the median over draws of a point of each one's ratio of medians over ``min_seeds``
  seeds; ``mean_point_ratio``: their mean;
- ``share_points_below``: the share of those ratios below 1 (at least its Wilson interval);
- ``trend``: Kendall's τ between a factor and the point ratios, from pairs of points drawn with different
  values of the factor (> 0: the ratio grows with the factor).

Interval: the points are resampled, then the seeds of each.

Anytime-valid: each draw of the claim (``draws``) is a uniformly random point of the claim and a block of
``min_seeds`` fresh seeds; its observation is the block's ratio of medians (or difference; a censored run
makes it an interval: ``block_bounds``). So the observations are independent draws of "a point of the
claim, measured on ``min_seeds`` seeds", and ``median_point_ratio`` and ``share_points_below`` are their
median and share below 1, as named. ``trend``: each draw is two points whose factor differs, concordant
or not, a Bernoulli with mean (1 + τ)/2. ``mean_point_ratio``: none (a mean of unbounded ratios has no
nonparametric confidence sequence): its claims say so and stay inconclusive.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np
import pandas as pd

from fecbench.analysis.stats import ratio_bounds
from fecbench.reproduce import sequential as sq
from fecbench.reproduce.statistics.base import FACTORS, ClaimStatistic, Estimate, Param
from fecbench.reproduce.statistics.bootstrap import MIN_POINTS, MIN_TREND_POINTS, N_BOOT, divide, interval, with_wilson

PER_POINT = Param("per_point", str, "ratio", choices=("ratio", "difference"))
FACTOR = Param("factor", str, required=True, choices=FACTORS)


def group_ratio(value: np.ndarray, base: np.ndarray, per_point: str = "ratio") -> np.ndarray:
    """A point's ratio of medians (or, ``per_point = "difference"``, their difference: for metrics that
    are often 0, such as re-buffering)."""
    top, bottom = np.median(value, axis=-1), np.median(base, axis=-1)
    if per_point == "difference":
        with np.errstate(invalid="ignore"):
            return top - bottom
    return divide(top, bottom)


def kendall_tau(ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
    """Kendall's τ (the share of concordant minus discordant pairs of points with different factor values and
    ratios) per row, over the points whose ratio is known; NaN for fewer than 3 of them."""
    assert factor is not None
    x = np.atleast_2d(ratios)
    f = np.atleast_2d(np.broadcast_to(factor, x.shape))
    out = np.full(x.shape[0], math.nan)
    for i in range(x.shape[0]):
        known = ~np.isnan(x[i])
        if known.sum() < 3:
            continue
        r, g = x[i][known], f[i][known]
        signs = np.sign(r[:, None] - r[None, :]) * np.sign(g[:, None] - g[None, :])
        upper = np.triu(np.ones_like(signs, dtype=bool), 1)
        compared = upper & (np.sign(g[:, None] - g[None, :]) != 0)
        if compared.sum():
            out[i] = float(signs[compared].sum() / compared.sum())
    return out if np.ndim(ratios) > 1 else out[:1]


def block_bounds(sample: pd.DataFrame, per_point: str = "ratio") -> pd.DataFrame:
    """One row per (draw, cell): the block's ratio of medians (``per_point = "difference"``: difference)
    with its bounds from its runs' bounds, its factor, in drawn order."""
    if sample.empty:
        return pd.DataFrame(columns=["draw", "cell", "value", "low", "high", "factor"])
    rows = []
    for (draw, cell), g in sample.groupby(["draw", "cell"], sort=True):
        med = {c: float(np.median(g[c].to_numpy(float))) for c in ("value", "base", "value_lo", "value_hi",
                                                                     "base_lo", "base_hi")}
        if per_point == "difference":
            value = med["value"] - med["base"] if not (math.isinf(med["value"]) and math.isinf(med["base"])) \
                else math.nan
            low, high = med["value_lo"] - med["base_hi"], med["value_hi"] - med["base_lo"]
        else:   # the report's ratio of medians and its bounds (fecbench.analysis.stats): one definition
            value = float(divide(med["value"], med["base"]))
            low, high = ratio_bounds((max(med["value_lo"], 0.0), med["value_hi"]), (med["base_lo"], med["base_hi"]))
            low = 0.0 if math.isnan(low) else low
        rows.append({"draw": draw, "cell": cell, "value": value, "low": -math.inf if math.isnan(low) else low,
                     "high": math.inf if math.isnan(high) else high, "factor": float(g["factor"].iloc[0])})
    return pd.DataFrame(rows)


class PointStatistic(ClaimStatistic):
    """A statistic over the per-point ratios: ``over_points`` over their last axis (NaN ratios left out)."""

    unit = "points"
    sequence_unit = "blocks of seeds"
    params = (PER_POINT,)
    needs_points = True
    min_for_interval = MIN_POINTS
    uses_factor = False            # the points' factor (a trend's) read from the sample

    @abstractmethod
    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        """The statistic over the last axis of per-point ratios (NaN ratios left out)."""

    @abstractmethod
    def over_blocks(self, blocks: pd.DataFrame, alpha: float) -> sq.Sequence:
        """The confidence sequence over the blocks (``block_bounds``: bounds per block, in drawn order)."""

    def resampled(self, boots: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        """The statistic of each bootstrap resample (rows)."""
        return self.over_points(boots, factor)

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        return low, high

    def estimate(self, sample: pd.DataFrame, params: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> Estimate:
        min_seeds = int(params.get("min_seeds", 3))
        per_point = params.get("per_point", "ratio")
        groups = [(key, g) for key, g in sample.groupby("group", sort=True)]
        kept = [(key, g) for key, g in groups if len(g) >= min_seeds]
        left_out = len(groups) - len(kept)
        note = f"{left_out} point(s) with fewer than {min_seeds} seeds left out" if left_out else ""
        ratios = np.array([float(group_ratio(g["value"].to_numpy(float), g["base"].to_numpy(float), per_point))
                           for _, g in kept])
        factor = np.array([float(g["factor"].iloc[0]) for _, g in kept]) if self.uses_factor else None
        samples = {"point_ratio": ratios}
        if factor is not None:
            samples["factor"] = factor
        need = self.min_for_interval
        if not kept:
            return Estimate(math.nan, math.nan, math.nan, 0, self.unit, note or "no points", samples)
        value = float(self.over_points(ratios[None, :], factor)[0])
        if len(kept) < need:
            return Estimate(value, math.nan, math.nan, len(kept), self.unit,
                            "; ".join(filter(None, [note, f"{len(kept)} points: too few for an interval (≥ {need})"])),
                            samples)
        rng = np.random.default_rng(seed)
        boot_points = np.empty((len(kept), n_boot))
        for i, (_, g) in enumerate(kept):
            idx = rng.integers(0, len(g), size=(n_boot, len(g)))
            boot_points[i] = group_ratio(g["value"].to_numpy(float)[idx], g["base"].to_numpy(float)[idx], per_point)
        chosen = rng.integers(0, len(kept), size=(n_boot, len(kept)))
        boots = boot_points[chosen, np.arange(n_boot)[:, None]]
        boot_factor = factor[chosen] if factor is not None else None
        low, high = interval(np.asarray(self.resampled(boots, boot_factor), dtype=float))
        if not math.isnan(low):
            low, high = self.widen(low, high, value, len(kept))
        return Estimate(value, low, high, len(kept), self.unit, note, samples)

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence | None:
        if sample.empty:
            return sq.Sequence(math.nan, math.nan, math.nan, 0)
        return self.over_blocks(block_bounds(sample, params.get("per_point", "ratio")), alpha)


class MedianPointRatio(PointStatistic):
    name = "median_point_ratio"
    text = "median over design points of each point's ratio of medians"

    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmedian(ratios, axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, alpha: float) -> sq.Sequence:
        return sq.quantile_censored(blocks["low"].to_numpy(float), blocks["high"].to_numpy(float), 0.5, alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_quantile(0.5, alpha)

    def figure_line(self, params: dict) -> float | None:
        return 1.0


class MeanPointRatio(PointStatistic):
    name = "mean_point_ratio"
    text = "mean over design points of each point's ratio of medians"
    no_sequence = "a mean of unbounded ratios has no nonparametric confidence sequence (the median over points has one)"

    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmean(ratios, axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, alpha: float) -> sq.Sequence:
        raise AssertionError("no confidence sequence")    # sequence() gives None first

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence | None:
        return None


class SharePointsBelow(PointStatistic):
    name = "share_points_below"
    text = "share of design points whose ratio of medians is below 1"

    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            known = ~np.isnan(ratios)
            return np.sum((ratios < 1) & known, axis=-1) / np.sum(known, axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, alpha: float) -> sq.Sequence:
        low, high = blocks["low"].to_numpy(float), blocks["high"].to_numpy(float)
        return sq.share_censored(high < 1, low < 1, alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_share(compare, threshold, tolerance, alpha)

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        return with_wilson(low, high, value, n)


class Trend(PointStatistic):
    name = "trend"
    text = "Kendall's τ between {factor} and each point's ratio of medians (pairs of points)"
    params = (PER_POINT, FACTOR)
    sequence_unit = "pairs of points"
    min_for_interval = MIN_TREND_POINTS
    points_per_observation = 2
    uses_factor = True

    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return kendall_tau(ratios, factor)

    def resampled(self, boots: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        assert factor is not None
        return np.array([kendall_tau(boots[b], factor[b])[0] for b in range(len(boots))])

    def over_blocks(self, blocks: pd.DataFrame, alpha: float) -> sq.Sequence:
        first, second = blocks[blocks["cell"] == 0], blocks[blocks["cell"] == 1]
        both = first.merge(second, on="draw", suffixes=("_1", "_2"))
        lo, hi = sq.concordance_censored((both["low_1"].to_numpy(float), both["high_1"].to_numpy(float)),
                                         (both["low_2"].to_numpy(float), both["high_2"].to_numpy(float)),
                                         both["factor_1"].to_numpy(float), both["factor_2"].to_numpy(float))
        s = sq.share_censored(lo, hi, alpha)
        if s.n == 0:
            return s
        return sq.Sequence(2 * s.value - 1, 2 * s.low - 1, 2 * s.high - 1, s.n, s.empty, s.empty_at)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # τ is the concordant share p as 2p − 1: its threshold and band in p
        return sq.fewest_for_share(compare, (1 + threshold) / 2, tolerance / 2, alpha)
