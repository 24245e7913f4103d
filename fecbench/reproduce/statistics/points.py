"""Statistics over design points: per group (point and size) the ratio of medians of its seeds (groups with
fewer than ``min_seeds`` seeds left out); ``per_point = "difference"`` takes each point's difference of
medians instead (re-buffering is often 0). The sample is that of ``pairs`` (one row per pair, with the
trend's ``factor``).

- ``median_point_ratio``, ``mean_point_ratio``: the median, the mean of the point ratios;
- ``share_points_below``: the share of points whose ratio is below 1 (at least its Wilson interval);
- ``trend``: Spearman's rank correlation of the point ratios with a factor (< 0: decreases).

Interval: the points are resampled, then the seeds of each.

Anytime-valid: a point's observation is the ratio of medians (or difference) of a block of ``min_seeds``
of its seeds, in the order they came (``point_blocks``); a point with more seeds gives a block per
``min_seeds`` seeds (the extra seeds of ``plan``), so the observations are draws of "a point of the
claim, measured on ``min_seeds`` seeds". ``median_point_ratio``: their median; ``share_points_below``:
the share below 1; ``trend``: Kendall's τ from disjoint pairs of them (Spearman's ρ is no mean of
independent terms; τ has the same sign for a monotone relation and the packs' trend thresholds are 0);
``mean_point_ratio``: none (a mean of unbounded ratios has no nonparametric confidence sequence): its
claims say so and stay inconclusive.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np
import pandas as pd

from fecbench.reproduce import sequential as sq
from fecbench.reproduce.statistics.base import FACTORS, ClaimStatistic, Estimate, Param, ordered
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


def spearman(ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
    """Spearman's rank correlation per row (average ranks for ties), over the points whose ratio is
    known (not NaN); NaN for fewer than 3 of them or a constant side."""
    assert factor is not None
    x = np.atleast_2d(ratios)
    f = np.atleast_2d(np.broadcast_to(factor, x.shape))
    out = np.full(x.shape[0], math.nan)
    for i in range(x.shape[0]):
        known = ~np.isnan(x[i])
        if known.sum() < 3:
            continue
        ra, rb = pd.Series(x[i][known]).rank().to_numpy(), pd.Series(f[i][known]).rank().to_numpy()
        if ra.std() == 0 or rb.std() == 0:
            continue
        out[i] = float(np.corrcoef(ra, rb)[0, 1])
    return out if np.ndim(ratios) > 1 else out[:1]


def point_blocks(sample: pd.DataFrame, min_seeds: int, per_point: str = "ratio") -> pd.DataFrame:
    """One row per block of ``min_seeds`` seeds of a point (in the order they came): its value, the
    factor, and when it was complete (the last of its pairs)."""
    rows = []
    sample = ordered(sample)
    values, bases = sample["value"].to_numpy(float), sample["base"].to_numpy(float)
    factors = sample["factor"].to_numpy(float) if "factor" in sample else None
    orders = sample["order"].to_numpy(object) if "order" in sample else None
    by_group: dict[str, list[int]] = {}     # each group's rows, groups in the order they first came
    for row, group in enumerate(sample["group"].tolist()):
        by_group.setdefault(group, []).append(row)
    for members in by_group.values():
        for start in range(0, len(members) - min_seeds + 1, min_seeds):
            block = members[start:start + min_seeds]
            top, bottom = float(np.median(values[block])), float(np.median(bases[block]))
            if per_point == "difference":
                value = top - bottom if not (math.isinf(top) and math.isinf(bottom)) else math.nan
            else:
                value = math.nan if bottom == 0 or (math.isinf(top) and math.isinf(bottom)) else top / bottom
            rows.append({"value": value, "factor": float(factors[block[0]]) if factors is not None else math.nan,
                         "order": orders[block[-1]] if orders is not None else None, "position": len(rows)})
    if not rows:
        return pd.DataFrame(columns=["value", "factor", "order", "position"])
    blocks = pd.DataFrame(rows)
    if "order" in sample:
        blocks = blocks.sort_values(["order", "position"], na_position="last", kind="stable")
    return blocks.reset_index(drop=True)


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
    def over_blocks(self, values: np.ndarray, factor: np.ndarray, alpha: float) -> sq.Sequence:
        """The confidence sequence over the blocks' values (known ones, in the order they came)."""

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
        blocks = point_blocks(sample, int(params.get("min_seeds", 3)), params.get("per_point", "ratio"))
        values = blocks["value"].to_numpy(float)
        known = ~np.isnan(values)
        return self.over_blocks(values[known], blocks["factor"].to_numpy(float)[known], alpha)


class MedianPointRatio(PointStatistic):
    name = "median_point_ratio"
    text = "median over design points of each point's ratio of medians"

    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmedian(ratios, axis=-1)

    def over_blocks(self, values: np.ndarray, factor: np.ndarray, alpha: float) -> sq.Sequence:
        return sq.quantile(values, 0.5, alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_quantile(0.5, alpha)


class MeanPointRatio(PointStatistic):
    name = "mean_point_ratio"
    text = "mean over design points of each point's ratio of medians"
    no_sequence = "a mean of unbounded ratios has no nonparametric confidence sequence (the median over points has one)"

    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmean(ratios, axis=-1)

    def over_blocks(self, values: np.ndarray, factor: np.ndarray, alpha: float) -> sq.Sequence:
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

    def over_blocks(self, values: np.ndarray, factor: np.ndarray, alpha: float) -> sq.Sequence:
        return sq.share(values < 1, alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_share(compare, threshold, tolerance, alpha)

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        return with_wilson(low, high, value, n)


class Trend(PointStatistic):
    name = "trend"
    text = "Spearman correlation of each point's ratio of medians with {factor}"
    params = (PER_POINT, FACTOR)
    sequence_unit = "pairs of points"
    min_for_interval = MIN_TREND_POINTS
    points_per_observation = 2
    judged_on = "Kendall's τ over disjoint pairs of points"
    uses_factor = True

    def over_points(self, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return spearman(ratios, factor)

    def resampled(self, boots: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
        assert factor is not None
        return np.array([spearman(boots[b], factor[b])[0] for b in range(len(boots))])

    def over_blocks(self, values: np.ndarray, factor: np.ndarray, alpha: float) -> sq.Sequence:
        return sq.kendall(values, factor, alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # τ is the concordant share p as 2p − 1: its threshold and band in p
        return sq.fewest_for_share(compare, (1 + threshold) / 2, tolerance / 2, alpha)
