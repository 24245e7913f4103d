"""Statistics over design points' own ratios: a census of the claim's cells (points × sizes), each judged on as many
seeds as it takes.

A cell's value is its ratio of medians R_c = median(X_c) ÷ median(Y_c) over an unlimited supply of seeds (X, Y
the label's and the baseline's metric at cell c; ``per_point = "difference"``: median(X_c) − median(Y_c)).
Estimands over the claim's K cells, equal weights:

- ``share_points_below``: #{c : R_c < t} ÷ K (t = ``ratio_threshold``, default 1);
- ``median_point_ratio``: the median of the K values R_c;  ``mean_point_ratio``: their mean;
- ``median_point_level``, ``lowest_point_level``: the median (the lowest) over the K cells of L_c = median(X_c), the
  label's own level (``one_label``: no baseline; e.g. its coding overhead);
- ``median_point_spread_ratio``: the median over the K cells of S_c = spread(X_c) ÷ spread(Y_c), a cell's spread its
  interquartile ratio Q₇₅ ÷ Q₂₅ (``spread = "relative"``: scale-free, a label twice as fast with the same relative
  scatter has the same spread) or range Q₇₅ − Q₂₅ (``"absolute"``, a box plot's box height).

``estimand`` evaluates these on a sample (each cell's ratio of medians over the seeds it has: consistent as its
seeds grow), so the page's number and the bench's truth (every cell on 20 000 seeds) are one function.

Anytime-valid, by a census rather than random draws (``draws``: rounds over every cell in a seeded order, a
block of ``min_seeds`` seeds each): each cell's ratio of medians has its own confidence sequence
(``sequential.two_quantiles_censored``, its seeds in order) at level α/K, so with probability ≥ 1 − α every
cell's interval [L_c, U_c] covers its R_c at every look at once (a union bound). The statistics are monotone in
each R_c, so interval arithmetic gives their bounds: a share between #{U_c < t}/K and #{L_c < t}/K, a median
between the median of the L_c and that of the U_c, a mean between their means (bounded once every cell is).
Seeds go to the cells still undecided (``settled``: no verdict boundary inside the cell's interval), so a claim
can be decided before every cell is. Why not a block's ratio: a block of a few seeds is noisier than the cell,
and its share below 1 is another number whenever the seed noise is comparable to the distance from 1 (every
cell at 0.97: "share of points below 1" is 1, the share of 3-seed blocks below 1 about 0.55). A claim about the
block a paper's figure plotted says so (``blocks``).
"""

from __future__ import annotations

import math
import warnings
from abc import abstractmethod

import numpy as np
import pandas as pd

from fecbench.verdicts import sequential as sq
from fecbench.verdicts.statistics import ties
from fecbench.verdicts.statistics.base import ClaimStatistic, Estimate, Param
from fecbench.verdicts.statistics.blocks import PER_POINT, group_ratio
from fecbench.verdicts.statistics.bootstrap import MIN_POINTS, N_BOOT, interval

#: (L_c, U_c) of a cell's value, by its group (``point|size``).
CellBounds = dict[str, tuple[float, float]]


def cells_of(sample: pd.DataFrame) -> int:
    """The claim's number of cells K (``samples`` keeps it with the sample; else the cells measured)."""
    return int(sample.attrs.get("cells") or (sample["group"].nunique() if len(sample) else 0))


def cell_bounds(sample: pd.DataFrame, per_point: str, alpha: float) -> CellBounds:
    """Each measured cell's confidence sequence for its own value at level 1 − α/K, its seeds in drawn order."""
    k = max(1, cells_of(sample))
    how = "difference" if per_point == "difference" else "ratio"
    out: CellBounds = {}
    for group, g in sample.sort_values("draw", kind="stable").groupby("group", sort=True):
        s = sq.two_quantiles_censored((g["value_lo"].to_numpy(float), g["value_hi"].to_numpy(float)),
                                      (g["base_lo"].to_numpy(float), g["base_hi"].to_numpy(float)), 0.5, alpha / k, how)
        out[str(group)] = (math.nan, math.nan) if s.empty else (s.low, s.high)
    return out


def settled(bounds: CellBounds, cuts: list[float]) -> frozenset[str]:
    """The cells whose interval holds no verdict boundary (``cuts``): more seeds would not change what they say."""
    return frozenset(group for group, (low, high) in bounds.items()
                     if not math.isnan(low) and not any(low <= cut <= high for cut in cuts))


def over_known(reduce, values: np.ndarray) -> np.ndarray:
    """``reduce`` (a NaN-skipping numpy reduction) over the last axis: a draw whose cells have no value yet gives NaN
    (counted as undecided), not a warning on the user's screen."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return reduce(values, axis=-1)


class PointStatistic(ClaimStatistic):
    """A statistic over the cells' own values (see the module): ``over_cells`` over their last axis."""

    unit = "points"
    sequence_unit = "blocks of seeds over the cells"
    params = (PER_POINT,)
    needs_points = True
    census = True
    min_for_interval = MIN_POINTS

    @abstractmethod
    def over_cells(self, values: np.ndarray, params: dict) -> np.ndarray:
        """The statistic over the last axis of the cells' values (NaN: a cell not measured, left out)."""

    @abstractmethod
    def bounds(self, lows: np.ndarray, highs: np.ndarray, k: int, params: dict) -> tuple[float, float]:
        """The statistic's bounds from every cell's (L_c, U_c), the unmeasured cells at ±∞."""

    def cuts(self, params: dict, compare: str, threshold: float, tolerance: float) -> list[float]:
        """Where a cell's value changes the verdict: the claim's threshold and band edges."""
        return sorted({threshold, threshold - tolerance, threshold + tolerance})

    def settled_cells(self, sample: pd.DataFrame, params: dict, alpha: float, compare: str, threshold: float,
                      tolerance: float) -> frozenset[str]:
        """The cells that need no more seeds (``settled``)."""
        if sample.empty:
            return frozenset()
        return settled(self.cell_bounds(sample, params, alpha), self.cuts(params, compare, threshold, tolerance))

    def cell_value(self, value: np.ndarray, base: np.ndarray, params: dict) -> np.ndarray:
        """A cell's value from its seeds' values (the last axis): its ratio (difference) of medians."""
        return group_ratio(value, base, params.get("per_point", "ratio"))

    def cell_bounds(self, sample: pd.DataFrame, params: dict, alpha: float) -> CellBounds:
        """Each measured cell's confidence sequence at level 1 − α/K (``cell_bounds``)."""
        return cell_bounds(sample, params.get("per_point", "ratio"), alpha)

    def cell_values(self, sample: pd.DataFrame, params: dict) -> np.ndarray:
        return np.array([float(self.cell_value(g["value"].to_numpy(float), g["base"].to_numpy(float), params))
                         for _, g in sample.groupby("group", sort=True)])

    def estimand(self, sample: pd.DataFrame, params: dict) -> float:
        if sample.empty:
            return math.nan
        return float(self.over_cells(self.cell_values(sample, params)[None, :], params)[0])

    def estimate(self, sample: pd.DataFrame, params: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> Estimate:
        groups = [g for _, g in sample.groupby("group", sort=True)] if len(sample) else []
        values = self.cell_values(sample, params) if groups else np.array([])
        k = cells_of(sample)
        note = f"{len(groups)} of {k} cells measured" if len(groups) < k else ""
        samples = {"point_ratio": values}
        if not groups:
            return Estimate(math.nan, math.nan, math.nan, 0, self.unit, note or "no points", samples)
        value = self.estimand(sample, params)
        if len(groups) < self.min_for_interval:
            return Estimate(value, math.nan, math.nan, len(groups), self.unit, note, samples)
        rng = np.random.default_rng(seed)
        boots = np.empty((len(groups), n_boot))
        for i, g in enumerate(groups):   # a census: the cells stay, each one's seeds are resampled
            idx = rng.integers(0, len(g), size=(n_boot, len(g)))
            boots[i] = self.cell_value(g["value"].to_numpy(float)[idx], g["base"].to_numpy(float)[idx], params)
        low, high = interval(np.asarray(self.over_cells(boots.T, params), dtype=float))
        return Estimate(value, low, high, len(groups), self.unit, note, samples)

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence | None:
        if sample.empty:
            return sq.Sequence(math.nan, math.nan, math.nan, 0)
        bounds = self.cell_bounds(sample, params, alpha)
        empty = [group for group, (low, _) in bounds.items() if math.isnan(low)]
        k = max(cells_of(sample), len(bounds))
        unknown = k - len(bounds)
        known = [b for b in bounds.values() if not math.isnan(b[0])]
        lows = np.array([b[0] for b in known] + [-math.inf] * (unknown + len(empty)))
        highs = np.array([b[1] for b in known] + [math.inf] * (unknown + len(empty)))
        low, high = self.bounds(lows, highs, k, params)
        n = int(sample["draw"].nunique())
        return sq.Sequence(self.estimand(sample, params), low, high, n, bool(empty), n if empty else 0)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # a lower bound: one cell's ratio bounded on both sides (each median at α/2), in blocks of min_seeds seeds
        seeds = sq.fewest_for_quantile(0.5, alpha / 2, both_sides=True)
        return math.ceil(seeds / max(1, int(params.get("min_seeds", 3))))


class MedianPointRatio(PointStatistic):
    name = "median_point_ratio"
    text = "median over the design points of each point's own ratio of medians (every point, its seeds until decided)"
    estimand_text = "median over the K cells of R_c = median(X_c) ÷ median(Y_c), each over unlimited seeds"

    def over_cells(self, values: np.ndarray, params: dict) -> np.ndarray:
        return over_known(np.nanmedian, values)

    def bounds(self, lows: np.ndarray, highs: np.ndarray, k: int, params: dict) -> tuple[float, float]:
        return float(np.median(lows)), float(np.median(highs))

    def figure_line(self, params: dict) -> float | None:
        return 1.0


class MeanPointRatio(PointStatistic):
    name = "mean_point_ratio"
    means = True
    text = "mean over the design points of each point's own ratio of medians (every point, its seeds until decided)"
    estimand_text = "mean over the K cells of R_c (as median_point_ratio)"

    def settled_cells(self, sample: pd.DataFrame, params: dict, alpha: float, compare: str, threshold: float,
                      tolerance: float) -> frozenset[str]:
        return frozenset()    # every cell's width counts toward a mean: none is settled before the claim is

    def over_cells(self, values: np.ndarray, params: dict) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmean(values, axis=-1)

    def bounds(self, lows: np.ndarray, highs: np.ndarray, k: int, params: dict) -> tuple[float, float]:
        return float(np.mean(lows)), float(np.mean(highs))

    def figure_line(self, params: dict) -> float | None:
        return 1.0


class SharePointsBelow(PointStatistic):
    name = "share_points_below"
    text = "share of design points whose own ratio of medians is below {t:g} (every point, its seeds until decided)"
    estimand_text = ("#{c : R_c < t'} ÷ K over the K cells (R_c as median_point_ratio; t' the threshold out of the "
                     "tie band |R_c − 1| ≤ m)")
    params = (PER_POINT,)
    shares = True

    def cuts(self, params: dict, compare: str, threshold: float, tolerance: float) -> list[float]:
        return [self.cut(params)]

    def cut(self, params: dict) -> float:
        return ties.below(float(params.get("ratio_threshold", 1.0)), ties.margin_of(params))

    def over_cells(self, values: np.ndarray, params: dict) -> np.ndarray:
        t = self.cut(params)
        with np.errstate(invalid="ignore"):
            known = ~np.isnan(values)
            return np.sum((values < t) & known, axis=-1) / np.sum(known, axis=-1)

    def bounds(self, lows: np.ndarray, highs: np.ndarray, k: int, params: dict) -> tuple[float, float]:
        t = self.cut(params)
        return float(np.sum(highs < t) / k), float(np.sum(lows < t) / k)


#: How a spread statistic measures a cell's scatter (``median_point_spread_ratio``).
SPREAD = Param("spread", str, required=True, choices=("relative", "absolute"))
_QUARTILES = (0.25, 0.75)


def spread_of(values: np.ndarray, how: str) -> np.ndarray:
    """The spread of the last axis: Q₇₅ ÷ Q₂₅ (relative) or Q₇₅ − Q₂₅ (absolute)."""
    low, high = np.quantile(values, _QUARTILES, axis=-1)
    if how == "absolute":
        with np.errstate(invalid="ignore"):
            return high - low
    with np.errstate(divide="ignore", invalid="ignore"):
        return high / low


class MedianPointSpreadRatio(MedianPointRatio):
    """The median over the cells of each cell's spread ratio S_c (see the module). A cell's confidence sequence: each
    side's two quartiles (``sequential.quantile_censored``), the four at α/(4K) each, combined by interval arithmetic
    (a censored run counts at its least favourable end, as for a median)."""
    name = "median_point_spread_ratio"
    params = (SPREAD,)
    text = ("median over the design points of each point's spread ratio, the label's interquartile spread ÷ the "
            "baseline's (every point, its seeds until decided)")
    estimand_text = ("median over the K cells of S_c = spread(X_c) ÷ spread(Y_c), spread Q₇₅ ÷ Q₂₅ (relative) or "
                     "Q₇₅ − Q₂₅ (absolute), each over unlimited seeds")

    def cell_value(self, value: np.ndarray, base: np.ndarray, params: dict) -> np.ndarray:
        how = params["spread"]
        with np.errstate(divide="ignore", invalid="ignore"):
            return spread_of(value, how) / spread_of(base, how)

    def cell_bounds(self, sample: pd.DataFrame, params: dict, alpha: float) -> CellBounds:
        level = alpha / (4 * max(1, cells_of(sample)))
        out: CellBounds = {}
        for group, g in sample.sort_values("draw", kind="stable").groupby("group", sort=True):
            sides = [_spread_bounds(g[f"{side}_lo"].to_numpy(float), g[f"{side}_hi"].to_numpy(float), params["spread"],
                                    level) for side in ("value", "base")]
            (top_low, top_high), (bottom_low, bottom_high) = sides
            with np.errstate(divide="ignore", invalid="ignore"):
                low = top_low / bottom_high if bottom_high > 0 else 0.0
                high = top_high / bottom_low if bottom_low > 0 else math.inf
            out[str(group)] = (math.nan, math.nan) if math.isnan(low) or math.isnan(high) else (float(low), float(high))
        return out

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # a lower bound: a cell's four quartiles bounded on both sides, in blocks of min_seeds seeds
        seeds = sq.fewest_for_quantile(0.25, alpha / 4, both_sides=True)
        return math.ceil(seeds / max(1, int(params.get("min_seeds", 3))))


def _spread_bounds(lo: np.ndarray, hi: np.ndarray, how: str, level: float) -> tuple[float, float]:
    """(low, high) of one side's spread from its two quartiles' confidence sequences (``level`` each): the narrowest
    scatter the quartiles allow (upper quartile at its lowest, lower at its highest; never below 0 or 1) and the
    widest."""
    q25, q75 = (sq.quantile_censored(lo, hi, q, level) for q in _QUARTILES)
    if q25.empty or q75.empty:
        return math.nan, math.nan
    if how == "absolute":
        return max(0.0, q75.low - q25.high), q75.high - q25.low
    narrow = q75.low / q25.high if q25.high > 0 and math.isfinite(q25.high) else 1.0
    wide = q75.high / q25.low if q25.low > 0 else math.inf
    return max(1.0, narrow), wide


class MedianPointLevel(MedianPointRatio):
    """The median over the cells of the label's own median L_c (see the module): a claim about one label's level
    (its coding overhead), its baseline the label itself. A cell's confidence sequence is its median's
    (``sequential.quantile_censored`` at α/K)."""
    name = "median_point_level"
    one_label = True
    params = ()
    text = "median over the design points of the label's own median (every point, its seeds until decided)"
    estimand_text = "median over the K cells of L_c = median(X_c), the label's own, over unlimited seeds"

    def cell_value(self, value: np.ndarray, base: np.ndarray, params: dict) -> np.ndarray:
        return np.median(value, axis=-1)

    def cell_bounds(self, sample: pd.DataFrame, params: dict, alpha: float) -> CellBounds:
        level = alpha / max(1, cells_of(sample))
        out: CellBounds = {}
        for group, g in sample.sort_values("draw", kind="stable").groupby("group", sort=True):
            s = sq.quantile_censored(g["value_lo"].to_numpy(float), g["value_hi"].to_numpy(float), 0.5, level)
            out[str(group)] = (math.nan, math.nan) if s.empty else (s.low, s.high)
        return out

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # a lower bound: one cell's median bounded on the claim's side, in blocks of min_seeds seeds
        return math.ceil(sq.fewest_for_quantile(0.5, alpha) / max(1, int(params.get("min_seeds", 3))))

    def figure_line(self, params: dict) -> float | None:
        return None


class LowestPointLevel(MedianPointLevel):
    """The lowest over the cells of the label's own median: "above t on every network" holds once every cell's lower
    bound clears t, and fails once one cell's upper bound is below it."""
    name = "lowest_point_level"
    text = "lowest over the design points of the label's own median (every point, its seeds until decided)"
    estimand_text = "min over the K cells of L_c (as median_point_level)"

    def over_cells(self, values: np.ndarray, params: dict) -> np.ndarray:
        return over_known(np.nanmin, values)

    def bounds(self, lows: np.ndarray, highs: np.ndarray, k: int, params: dict) -> tuple[float, float]:
        return float(np.min(lows)), float(np.min(highs))
