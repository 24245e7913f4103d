"""Statistics over pairs of runs: the label's and the baseline's run on the same point, seed and size.

The sample has one row per pair (``group`` = the point and size, ``value`` and ``base`` the two sides'
metric, ``ratio`` the per-run ratio); censored values (a run that reached the time limit) are +inf, so
a pair whose label timed out has ratio +inf and one whose baseline timed out ratio 0, as in
``fecbench.analysis.ratios``. A pair whose two sides timed out has no ratio, but it is never left out: every
statistic's number reads the same pairs as its interval (a median of ratios counts it as a tie, 1; two medians
count it on both sides at +inf; a share as no hit, its interval as possibly one).

- ``share_pairs_below`` / ``share_pairs_above``: the share of pairs whose ratio is below / above
  ``ratio_threshold`` (default 1); a ratio within the claim's tie margin of 1 is a tie, never a hit
  (``ties``), and ``ties = "exclude"`` leaves the ties out (data received often ties); a share's interval
  is at least its Wilson score interval (5 of 5 pairs would otherwise give a bootstrap interval of [1, 1]).
  Anytime-valid: the share of the pairs' indicators;
- ``median_pair_ratio``: the median per-run ratio; anytime-valid: the 0.5 quantile of the ratios;
- ``ratio_of_medians``: median of the label's values ÷ median of the baseline's over the same draws;
  ``difference_of_medians``: their difference. Judged as named: each side's median has its own confidence
  sequence at α/2, combined by interval arithmetic (``sequential.two_quantiles_censored``). That ignores
  the common random numbers, so it is wider than the median of the per-pair ratios (on the A/A design
  [0.34, 2.9] against [0.97, 1.03] from the same 30 pairs), and it is another quantity unless the ratios
  are symmetric (median(x)/median(y) = 1.66 on a skewed example where the median ratio was below 1): a
  claim about per-run ratios says ``median_pair_ratio``.

Censored pairs (a side that reached its time limit) are intervals (``samples``): a share counts a pair
as a hit on its lower side only when surely below (above) the threshold, on its upper side unless surely
not; a median takes the ratios' lower ends for its lower bound and upper ends for its upper bound.

Interval: pairs are resampled within their point (the seeds of a point: both sides of a seed together),
the points with a single seed together as one stratum (one seed cannot vary within its point).
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np
import pandas as pd

from fecbench.verdicts import sequential as sq
from fecbench.verdicts.statistics import ties
from fecbench.verdicts.statistics.base import ClaimStatistic, Estimate, Param, ordered
from fecbench.verdicts.statistics.bootstrap import MIN_PAIRS, N_BOOT, divide, interval, with_wilson

RATIO_THRESHOLD = Param("ratio_threshold", float, 1.0, min=0.0)
TIES = Param("ties", str, "count", choices=("count", "exclude"))




def _tied(value: np.ndarray, base: np.ndarray, margin: float) -> np.ndarray:
    """Pairs whose two values are equal or within the tie margin of each other."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (value == base) | ties.is_tie(value / base, margin)


def _column(sample: pd.DataFrame, name: str) -> np.ndarray:
    return sample[name].to_numpy(float) if len(sample) else np.array([])


def _bounds(sample: pd.DataFrame, low: str, high: str) -> tuple[np.ndarray, np.ndarray]:
    sample = ordered(sample)
    return _column(sample, low), _column(sample, high)


class PairStatistic(ClaimStatistic):
    """A statistic over pairs: ``value`` over the last axis of (resampled) pairs."""

    @abstractmethod
    def value(self, value: np.ndarray, base: np.ndarray, ratio: np.ndarray, params: dict) -> np.ndarray:
        """The statistic over the last axis of resampled pairs (1-D or 2-D arrays)."""

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_quantile(0.5, alpha)    # the median of per-pair values (the shares: below)

    def counted(self, sample: pd.DataFrame, params: dict) -> int:
        """The pairs the statistic counts."""
        return len(sample)

    def estimand(self, sample: pd.DataFrame, params: dict) -> float:
        if len(sample) == 0:
            return math.nan
        value, base, ratio = (sample[c].to_numpy(float) for c in ("value", "base", "ratio"))
        return float(self.value(value, base, ratio, params))

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        """The bootstrap interval, widened where the bootstrap alone says too little."""
        return low, high

    def estimate(self, sample: pd.DataFrame, params: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> Estimate:
        kept = self.counted(sample, params)
        samples = {"ratio": sample["ratio"].to_numpy(float)}
        if len(sample) == 0:
            return Estimate(math.nan, math.nan, math.nan, 0, self.unit, "no pairs", samples)
        value, base, ratio = (sample[c].to_numpy(float) for c in ("value", "base", "ratio"))
        point = self.estimand(sample, params)
        if kept < MIN_PAIRS:
            return Estimate(point, math.nan, math.nan, kept, self.unit, f"{kept} pairs: too few for an interval "
                            f"(≥ {MIN_PAIRS})", samples)
        rng = np.random.default_rng(seed)
        # Strata: each point (group) with two seeds or more; the points with a single seed together (a seed
        # alone cannot vary within its point: those points are resampled as draws of the design's space).
        counts = sample["group"].map(sample["group"].value_counts())
        strata = sample["group"].where(counts > 1, "\0single").astype("category").cat.codes.to_numpy()
        order = np.argsort(strata, kind="stable")
        sizes = np.bincount(strata)
        starts = np.repeat(np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
        span = np.repeat(sizes, sizes)
        picks = order[starts + np.floor(rng.random((n_boot, len(sample))) * span).astype(int)]
        boots = self.value(value[picks], base[picks], ratio[picks], params)
        low, high = interval(np.asarray(boots, dtype=float))
        if not math.isnan(low):
            low, high = self.widen(low, high, point, kept)
        note = "" if not math.isnan(low) else "the resamples give no interval"
        return Estimate(point, low, high, kept, self.unit, note, samples)


class SharePairs(PairStatistic):
    params = (RATIO_THRESHOLD, TIES)
    shares = True

    @abstractmethod
    def cut(self, params: dict) -> float:
        """The ratio threshold, moved out of the tie band (``ties``)."""

    @abstractmethod
    def hit(self, ratio: np.ndarray, threshold: float) -> np.ndarray:
        """Which ratios count for the share."""

    def value(self, value: np.ndarray, base: np.ndarray, ratio: np.ndarray, params: dict) -> np.ndarray:
        hit = self.hit(ratio, self.cut(params))
        if params.get("ties") == "exclude":
            counted = ~ties.is_tie(ratio, ties.margin_of(params))
            with np.errstate(invalid="ignore"):
                return np.sum(hit & counted, axis=-1) / np.sum(counted, axis=-1)
        return np.mean(hit, axis=-1)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_share(compare, threshold, tolerance, alpha)

    def counted(self, sample: pd.DataFrame, params: dict) -> int:
        if params.get("ties") == "exclude":
            return int((~ties.is_tie(sample["ratio"], ties.margin_of(params))).sum())
        return len(sample)

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        return with_wilson(low, high, value, n)

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        low, high = _bounds(sample, "ratio_lo", "ratio_hi")
        if params.get("ties") == "exclude":
            margin = ties.margin_of(params)
            keep = ~(ties.is_tie(low, margin) & ties.is_tie(high, margin))      # pairs surely tied
            low, high = low[keep], high[keep]
        return sq.share_censored(*self.hits(low, high, self.cut(params)), alpha)

    @abstractmethod
    def hits(self, low: np.ndarray, high: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """A hit for sure (lower indicators) and possibly (upper) from each ratio's bounds."""

    def figure_line(self, params: dict) -> float | None:
        return params.get("ratio_threshold", 1.0)


class SharePairsBelow(SharePairs):
    name = "share_pairs_below"
    estimand_text = ("P(X ÷ Y < t'): X, Y the label's and baseline's value on one seed at a uniform cell, t' the "
                     "threshold out of the tie band |X ÷ Y − 1| ≤ m (ties = \"exclude\": given not a tie)")
    text = "share of pairs (same point, seed, size) whose ratio label ÷ baseline is below {t:g}"

    def cut(self, params: dict) -> float:
        return ties.below(float(params.get("ratio_threshold", 1.0)), ties.margin_of(params))

    def hit(self, ratio: np.ndarray, threshold: float) -> np.ndarray:
        return ratio < threshold

    def hits(self, low: np.ndarray, high: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        return high < threshold, low < threshold


class SharePairsAbove(SharePairs):
    name = "share_pairs_above"
    estimand_text = "P(X ÷ Y > t') (X, Y, t' and ties as share_pairs_below)"
    text = "share of pairs whose ratio label ÷ baseline is above {t:g}"

    def cut(self, params: dict) -> float:
        return ties.above(float(params.get("ratio_threshold", 1.0)), ties.margin_of(params))

    def hit(self, ratio: np.ndarray, threshold: float) -> np.ndarray:
        return ratio > threshold

    def hits(self, low: np.ndarray, high: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        return low > threshold, high > threshold


class MedianPairRatio(PairStatistic):
    name = "median_pair_ratio"
    estimand_text = "median of X ÷ Y (X, Y as share_pairs_below)"
    text = "median of the per-run ratios label ÷ baseline"

    def value(self, value: np.ndarray, base: np.ndarray, ratio: np.ndarray, params: dict) -> np.ndarray:
        # A pair whose two runs both reached the time limit (or both measured 0) has no ratio; both took the same
        # censored value, so its number is a tie, 1 (its interval keeps it anywhere in [0, ∞]): the page's number
        # reads the same pairs as the interval and is never NaN (issue 69, item 6).
        return np.median(np.where(np.isnan(ratio), 1.0, ratio), axis=-1)

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        return sq.quantile_censored(*_bounds(sample, "ratio_lo", "ratio_hi"), 0.5, alpha)

    def figure_line(self, params: dict) -> float | None:
        return params.get("ratio_threshold", 1.0)


class TwoMedians(PairStatistic):
    """Each side's median, judged as two samples (see the module); the pairs whose two sides reached the time limit
    count on both sides (at +∞), in the number as in the interval."""
    how = "ratio"

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        return sq.two_quantiles_censored(_bounds(sample, "value_lo", "value_hi"), _bounds(sample, "base_lo", "base_hi"),
                                         0.5, alpha, self.how)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # each side's median bounded at α/2, one side above and the other below
        return sq.fewest_for_quantile(0.5, alpha / 2, both_sides=True)


class RatioOfMedians(TwoMedians):
    name = "ratio_of_medians"
    estimand_text = "median(X) ÷ median(Y), each over the claim's population (a uniform cell, one seed)"
    text = "median of the label ÷ median of the baseline (each side's median, unpaired)"

    def value(self, value: np.ndarray, base: np.ndarray, ratio: np.ndarray, params: dict) -> np.ndarray:
        return divide(np.median(value, axis=-1), np.median(base, axis=-1))


class DifferenceOfMedians(TwoMedians):
    name = "difference_of_medians"
    estimand_text = "median(X) − median(Y) (as ratio_of_medians)"
    text = "median of the label − median of the baseline (each side's median, unpaired)"
    how = "difference"

    def value(self, value: np.ndarray, base: np.ndarray, ratio: np.ndarray, params: dict) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.median(value, axis=-1) - np.median(base, axis=-1)



class SharePairsLess(PairStatistic):
    """The paired sign: of the pairs whose two values differ, the share where the label's is smaller. For metrics
    that are often 0 on both sides (re-buffering), where both medians are 0 and their difference says nothing of
    the tails the passage is about: it compares the two ECDFs pair by pair."""
    name = "share_pairs_less"
    text = "share of pairs whose values differ (same point, seed, size) in which the label's is the smaller"
    estimand_text = "P(X < Y given X, Y not tied: X = Y or |X ÷ Y − 1| ≤ m) (X, Y as share_pairs_below)"
    shares = True

    def value(self, value: np.ndarray, base: np.ndarray, ratio: np.ndarray, params: dict) -> np.ndarray:
        differ = ~_tied(value, base, ties.margin_of(params))
        with np.errstate(invalid="ignore"):
            return np.sum((value < base) & differ, axis=-1) / np.sum(differ, axis=-1)

    def counted(self, sample: pd.DataFrame, params: dict) -> int:
        value, base = sample["value"].to_numpy(float), sample["base"].to_numpy(float)
        return int((~_tied(value, base, ties.margin_of(params))).sum())

    def widen(self, low: float, high: float, value: float, n: int) -> tuple[float, float]:
        return with_wilson(low, high, value, n)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        return sq.fewest_for_share(compare, threshold, tolerance, alpha)

    def sequence(self, sample: pd.DataFrame, params: dict, alpha: float) -> sq.Sequence:
        sample = ordered(sample)
        v_lo, v_hi, b_lo, b_hi = (_column(sample, c) for c in ("value_lo", "value_hi", "base_lo", "base_hi"))
        margin = ties.margin_of(params)
        keep = 1 - margin                          # smaller by more than the margin
        tied = (v_lo == v_hi) & (b_lo == b_hi) & _tied(v_lo, b_lo, margin)   # surely: not counted
        return sq.share_censored((v_hi < b_lo * keep)[~tied], (v_lo < b_hi * keep)[~tied], alpha)

    def figure_line(self, params: dict) -> float | None:
        return None
