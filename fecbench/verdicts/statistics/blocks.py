"""Statistics over blocks of seeds: each draw of the claim is a uniformly random cell (point and size) measured on a
block of ``min_seeds`` fresh seeds, and its observation is the block's ratio of medians (``per_point =
"difference"``: difference of medians, for metrics that are often 0). The block is the unit a paper's figure
plots when it shows one ratio per configuration from a fixed number of runs (networking2019: "each configuration
is run 9 times and the median download completion time from these 9 runs is considered"): the estimand keeps the
block's seed noise, as the figure did. A claim about a design point's *own* ratio (unlimited seeds) is a point
statistic (``points``).

Estimands (``B`` the ratio of medians of a block of ``min_seeds`` seeds at a uniformly random cell of the claim):

- ``median_block_ratio``: the median of B;  ``mean_block_ratio``: its mean (judged from below only);
- ``restricted_mean_block_ratio``: E[min(B, c)], the mean of B restricted to a cap c the claim fixes (both ways);
- ``share_blocks_below``: P(B < 1);
- ``trend``: Kendall's τ = E[sign(B₁ − B₂) · sign(f₁ − f₂)] for two blocks at cells drawn with different values
  of the factor f (> 0: the ratio grows with the factor).

One function per statistic (``estimand``) gives the page's number from a sample and the bench's truth from a
large one (``validation.worlds``). Interval: the draws (blocks) resampled. Anytime-valid: the draws are
independent draws of B (``draws``), so the CS is that of B's median, share below 1 or concordance (each block's
bounds from its censored runs: ``block_bounds``).
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np
import pandas as pd

from fecbench.analysis.stats import ratio_bounds
from fecbench.verdicts import mean_bound
from fecbench.verdicts import sequential as sq
from fecbench.verdicts.statistics import ties
from fecbench.verdicts.statistics.base import FACTORS, ClaimStatistic, Estimate, Param
from fecbench.verdicts.statistics.bootstrap import MIN_POINTS, MIN_TREND_POINTS, N_BOOT, divide, interval, with_wilson

PER_POINT = Param("per_point", str, "ratio", choices=("ratio", "difference"))
FACTOR = Param("factor", str, required=True, choices=FACTORS)
#: A trend within each value of another factor (e.g. each technology's bandwidth): a draw's two cells share it.
WITHIN = Param("within", str, None, choices=FACTORS)
#: A restricted mean's cap on each block's ratio, fixed by the pack before any run, and where it comes from.
MEAN_CAP = Param("mean_cap", float, required=True, min=0.0)
MEAN_CAP_SOURCE = Param("mean_cap_source", str, required=True)


def group_ratio(value: np.ndarray, base: np.ndarray, per_point: str = "ratio") -> np.ndarray:
    """A group of seeds' ratio of medians (or, ``per_point = "difference"``, their difference: for metrics that
    are often 0, such as re-buffering)."""
    top, bottom = np.median(value, axis=-1), np.median(base, axis=-1)
    if per_point == "difference":
        with np.errstate(invalid="ignore"):
            return top - bottom
    return divide(top, bottom)


def _blocks(sample: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of ``sample`` ordered by (draw, cell) as ``groupby(sort=True)`` orders them, where each block starts
    in that order and its size. Grouped with numpy, not pandas: the bench's truths group ~10⁵ blocks."""
    draw, cell = sample["draw"].to_numpy(), sample["cell"].to_numpy()
    order = np.lexsort((cell, draw))
    draw, cell = draw[order], cell[order]
    starts = np.flatnonzero(np.r_[True, (draw[1:] != draw[:-1]) | (cell[1:] != cell[:-1])])
    return order, starts, np.diff(np.r_[starts, len(order)])


def _keys(sample: pd.DataFrame, order: np.ndarray, starts: np.ndarray) -> dict[str, np.ndarray]:
    """Each block's draw and cell."""
    return {key: sample[key].to_numpy()[order][starts] for key in ("draw", "cell")}


def _per_block(columns: list[np.ndarray], starts: np.ndarray, sizes: np.ndarray, reduce) -> np.ndarray:
    """``reduce(*columns)`` over the last axis of each block's values (one 2-D call when the blocks are one size)."""
    if (sizes == sizes[0]).all():
        return np.asarray(reduce(*(c.reshape(-1, sizes[0]) for c in columns)), float).reshape(-1)
    parts = [np.split(c, starts[1:]) for c in columns]
    return np.array([reduce(*block) for block in zip(*parts, strict=True)], float)


def block_bounds(sample: pd.DataFrame, per_point: str = "ratio") -> pd.DataFrame:
    """One row per (draw, cell): the block's ratio of medians (``per_point = "difference"``: difference) with its
    bounds from its runs' bounds, its factor, in drawn order."""
    if sample.empty:
        return pd.DataFrame(columns=["draw", "cell", "value", "low", "high", "factor"])
    order, starts, sizes = _blocks(sample)
    med = {c: _per_block([sample[c].to_numpy(float)[order]], starts, sizes, lambda x: np.median(x, axis=-1))
           for c in ("value", "base", "value_lo", "value_hi", "base_lo", "base_hi")}
    low, value, high = zip(*(seed_bounds({c: float(m[i]) for c, m in med.items()}, per_point)
                             for i in range(len(starts))), strict=True)
    return pd.DataFrame({**_keys(sample, order, starts), "value": value, "low": low, "high": high,
                         "factor": sample["factor"].to_numpy(float)[order][starts]})


def block_values(sample: pd.DataFrame, per_point: str = "ratio") -> pd.DataFrame:
    """One row per (draw, cell): the block's ratio (difference) of medians of its values, its factor."""
    if sample.empty:
        return pd.DataFrame(columns=["draw", "cell", "value", "factor"])
    order, starts, sizes = _blocks(sample)
    ratios = _per_block([sample["value"].to_numpy(float)[order], sample["base"].to_numpy(float)[order]], starts, sizes,
                        lambda v, b: group_ratio(v, b, per_point))
    return pd.DataFrame({**_keys(sample, order, starts), "factor": sample["factor"].to_numpy(float)[order][starts],
                         "value": ratios})


def seed_bounds(med: dict[str, float], per_point: str = "ratio") -> tuple[float, float, float]:
    """(low, value, high) of a group of seeds' ratio (difference) of medians, from the medians of its runs' values
    and bounds (``value``, ``base``, ``value_lo``, ``value_hi``, ``base_lo``, ``base_hi``)."""
    if per_point == "difference":
        value = med["value"] - med["base"] if not (math.isinf(med["value"]) and math.isinf(med["base"])) \
            else math.nan
        low, high = med["value_lo"] - med["base_hi"], med["value_hi"] - med["base_lo"]
    else:   # the report's ratio of medians and its bounds (fecbench.analysis.stats): one definition
        value = float(divide(med["value"], med["base"]))
        low, high = ratio_bounds((max(med["value_lo"], 0.0), med["value_hi"]), (med["base_lo"], med["base_hi"]))
        low = 0.0 if math.isnan(low) else low
    return -math.inf if math.isnan(low) else low, value, math.inf if math.isnan(high) else high


def concordance_values(blocks: pd.DataFrame) -> np.ndarray:
    """Per trend draw: sign(B₁ − B₂) · sign(f₁ − f₂) from the blocks' values (NaN where a value is unknown)."""
    first, second = blocks[blocks["cell"] == 0], blocks[blocks["cell"] == 1]
    both = first.merge(second, on="draw", suffixes=("_1", "_2"))
    with np.errstate(invalid="ignore"):
        return (np.sign(both["value_1"].to_numpy(float) - both["value_2"].to_numpy(float))
                * np.sign(both["factor_1"].to_numpy(float) - both["factor_2"].to_numpy(float)))


class BlockStatistic(ClaimStatistic):
    """A statistic over the blocks' ratios: ``over_blocks_values`` over their last axis (NaN ratios left out)."""

    unit = "blocks"
    sequence_unit = "blocks of seeds"
    params = (PER_POINT,)
    needs_points = True
    min_for_interval = MIN_POINTS

    @abstractmethod
    def over_values(self, ratios: np.ndarray, params: dict) -> np.ndarray:
        """The statistic over the last axis of block ratios (NaN ratios left out)."""

    @abstractmethod
    def over_blocks(self, blocks: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        """The confidence sequence over the blocks (``block_bounds``: bounds per block, in drawn order)."""

    def observations(self, sample: pd.DataFrame, params: dict) -> np.ndarray:
        """What the estimand averages over: one value per draw (its block's ratio; a trend's concordance)."""
        return block_values(sample, params.get("per_point", "ratio"))["value"].to_numpy(float)

    def estimand(self, sample: pd.DataFrame, params: dict) -> float:
        values = self.observations(sample, params)
        return float(self.over_values(values[None, :], params)[0]) if values.size else math.nan

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        return low, high

    def estimate(self, sample: pd.DataFrame, params: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> Estimate:
        values = self.observations(sample, params) if not sample.empty else np.array([])
        shown = block_values(sample, params.get("per_point", "ratio"))
        samples = {"block_ratio": shown["value"].to_numpy(float)}
        if self.points_per_observation == 2:     # a trend's figure: each block's ratio against its factor
            samples["factor"] = shown["factor"].to_numpy(float)
        if values.size == 0:
            return Estimate(math.nan, math.nan, math.nan, 0, self.unit, "no blocks", samples)
        value = self.estimand(sample, params)
        need = self.min_for_interval
        if values.size < need:
            return Estimate(value, math.nan, math.nan, values.size, self.unit,
                            f"{values.size} {self.unit}: too few for an interval (≥ {need})", samples)
        rng = np.random.default_rng(seed)
        boots = values[rng.integers(0, values.size, size=(n_boot, values.size))]
        low, high = interval(np.asarray(self.over_values(boots, params), dtype=float))
        if not math.isnan(low):
            low, high = self.widen(low, high, value, values.size)
        return Estimate(value, low, high, values.size, self.unit, "", samples)

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence | None:
        if sample.empty:
            return sq.Sequence(math.nan, math.nan, math.nan, 0)
        return self.over_blocks(block_bounds(sample, params.get("per_point", "ratio")), params, alpha)


class MedianBlockRatio(BlockStatistic):
    name = "median_block_ratio"
    text = "median over draws of a cell of the ratio of medians of a block of {seeds} seeds"
    estimand_text = "median of B, B = med(label) ÷ med(baseline) over a block of min_seeds seeds at a uniform cell"

    def over_values(self, ratios: np.ndarray, params: dict) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmedian(ratios, axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        return sq.quantile_censored(blocks["low"].to_numpy(float), blocks["high"].to_numpy(float), 0.5, alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_quantile(0.5, alpha)

    def figure_line(self, params: dict) -> float | None:
        return 1.0


class MeanBlockRatio(BlockStatistic):
    """The mean of the block ratios, judged from below only: B ≥ 0 with no upper bound but the time limit's, so its
    confidence sequence is one-sided (``mean_bound.mean_above``, a betting lower bound needing no upper bound): it can
    show the mean above a threshold (a claim "> t" holds, "< t" fails) and never below one, which no valid bound
    could within a budget (reproduce/README.md, "Averages")."""
    name = "mean_block_ratio"
    means = True
    text = ("mean over draws of a cell of the ratio of medians of a block of {seeds} seeds (judged from below: it can "
            "show the mean above a threshold, never below)")
    estimand_text = "mean of B (as median_block_ratio)"

    def over_values(self, ratios: np.ndarray, params: dict) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmean(ratios, axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        return mean_bound.mean_above(np.maximum(blocks["low"].to_numpy(float), 0.0), alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # every block at twice the threshold: the fewest that show the mean above it (a lower bound on what it takes)
        if compare == "approx" or threshold <= 0:
            return math.inf
        clear = threshold * (1 + tolerance)
        return sq.fewest(lambda n: mean_bound.mean_lower(np.full(n, 2 * threshold), alpha) > clear, most=4096)

    def figure_line(self, params: dict) -> float | None:
        return 1.0


class RestrictedMeanBlockRatio(BlockStatistic):
    """The mean of the block ratios restricted to a cap c fixed before any run, E[min(B, c)]: bounded in [0, c], so
    its confidence sequence has both sides (``mean_bound.restricted_mean``) and a claim that an average is *below* (or
    about) a threshold can be decided, which the unrestricted mean cannot within a budget (reproduce/README.md,
    "Averages"). It is the average the passage states as long as no block reaches the cap: the estimate's note
    says how many did."""
    name = "restricted_mean_block_ratio"
    means = True
    params = (PER_POINT, MEAN_CAP, MEAN_CAP_SOURCE)
    text = ("mean over draws of a cell of min(B, {cap}), B the ratio of medians of a block of {seeds} seeds (a "
            "restricted mean: a block above the cap counts as the cap)")
    estimand_text = "E[min(B, c)], B as median_block_ratio, c the claim's mean_cap (fixed before any run)"

    def describe(self, params: dict, label: str, baseline: str) -> str:
        return self.text.format(cap=f"{params['mean_cap']:g}", seeds=params.get("min_seeds", 3))

    def over_values(self, ratios: np.ndarray, params: dict) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmean(np.minimum(ratios, params["mean_cap"]), axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        return mean_bound.restricted_mean(blocks["low"].to_numpy(float), blocks["high"].to_numpy(float),
                                          params["mean_cap"], alpha)

    def estimate(self, sample: pd.DataFrame, params: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> Estimate:
        found = super().estimate(sample, params, seed=seed, n_boot=n_boot)
        ratios = found.samples["block_ratio"]
        capped = int(np.sum(ratios >= params["mean_cap"]))
        note = f"{capped} of {ratios.size} blocks at or above the cap {params['mean_cap']:g} (counted as the cap)"
        found.note = "; ".join(filter(None, [found.note, note])) if ratios.size else found.note
        return found

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # every block at the claim's extreme (0 for "<", the cap for ">", the threshold for "≈"): a lower bound
        cap = params["mean_cap"]
        extreme = {"<": 0.0, ">": cap}.get(compare, threshold)

        def decides(n: int) -> bool:
            s = mean_bound.restricted_mean(np.full(n, extreme), np.full(n, extreme), cap, alpha)
            return sq.decide(s.low, s.high, compare, threshold, tolerance) != "inconclusive"
        return sq.fewest(decides, most=4096)

    def figure_line(self, params: dict) -> float | None:
        return 1.0


class ShareBlocksBelow(BlockStatistic):
    name = "share_blocks_below"
    text = "share of draws of a cell whose ratio of medians over a block of {seeds} seeds is below 1"
    estimand_text = "P(B < 1 − m) (B as median_block_ratio; within the tie margin m of 1: a tie, not below)"
    shares = True

    def cut(self, params: dict) -> float:
        """1, moved out of the tie band (``ties``)."""
        return ties.below(1.0, ties.margin_of(params))

    def over_values(self, ratios: np.ndarray, params: dict) -> np.ndarray:
        cut = self.cut(params)
        with np.errstate(invalid="ignore"):
            known = ~np.isnan(ratios)
            return np.sum((ratios < cut) & known, axis=-1) / np.sum(known, axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        low, high = blocks["low"].to_numpy(float), blocks["high"].to_numpy(float)
        cut = self.cut(params)
        return sq.share_censored(high < cut, low < cut, alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_share(compare, threshold, tolerance, alpha)

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        return with_wilson(low, high, value, n)


class Trend(BlockStatistic):
    name = "trend"
    text = "Kendall's τ between {factor} and the ratio of medians of blocks of {seeds} seeds (pairs of cells)"
    estimand_text = ("E[sign(B₁ − B₂) · sign(f₁ − f₂)], two blocks (as median_block_ratio) at cells drawn with "
                     "different values of the factor f, of one size (and the same value of `within`, where set)")
    params = (PER_POINT, FACTOR, WITHIN)
    unit = "pairs of blocks"
    sequence_unit = "pairs of blocks"
    min_for_interval = MIN_TREND_POINTS
    points_per_observation = 2

    def observations(self, sample: pd.DataFrame, params: dict) -> np.ndarray:
        return concordance_values(block_values(sample, params.get("per_point", "ratio")))

    def over_values(self, ratios: np.ndarray, params: dict) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmean(ratios, axis=-1)

    def over_blocks(self, blocks: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
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
