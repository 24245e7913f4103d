"""Pure statistics for comparing labels as the seed papers do, with timeouts kept as censored values.

Censored values. A run stopped by the time limit (status ``timeout``) has no completion time: it is
only known to be at least the limit ``T`` (the design's ``timeout_s``, up to the client's start-up
time). Dropping such runs biases every slow point towards whichever side finished, so each
statistic here is computed on *bounds* instead: once with every censored value at its lower bound
``T`` (the ``low`` placement) and once at ``+inf`` (``high``). The statistics below are monotone in
each value, so the true statistic lies in ``[low, high]``; when both agree it is exact, whatever
the censored runs would have measured.

- ``median_bounds``: the sample median with censored values placed at ``T`` and at ``+inf`` (a
  simple order-statistic median). With ``c`` of ``n`` values censored at a ``T`` above every
  finished value, it is exact when ``c < n/2`` (the middle order statistics are finished values),
  and otherwise only known to be ``>= low``.
- ``ratio_bounds``: a ratio ``a / b`` of two bounded values is in ``[a_low / b_high, a_high / b_low]``
  (``x / inf = 0``, ``inf / x = inf``). ``state`` names the four cases: ``exact``; ``at least``
  (only the numerator is censored: the label was slower than the bound); ``at most`` (only the
  denominator: the baseline was slower); ``undefined`` (``[0, inf]``: both censored).
- ``share_below_bounds``: the share of values below a threshold (e.g. ratios < 1: the label won).
- ``bootstrap_ratio_of_medians``: a percentile bootstrap confidence interval of ``median(a) /
  median(b)`` over paired samples (the loss seeds of one design point: both sides of a seed are
  resampled together, since they saw the same loss pattern). Censored values are at ``+inf``;
  quantiles are order statistics (no interpolation), so an infinite or zero resampled ratio keeps
  its rank; resamples where both medians are censored (ratio undefined) are left out. Seeded with
  ``numpy.random.default_rng``: the same inputs and seed give the same interval. No interval for
  fewer than ``min_pairs`` pairs (the report's per-point intervals: ``MIN_SEEDS_FOR_INTERVAL``).
- ``median_order_interval``: a distribution-free interval for a median from two order statistics (the
  binomial law of how many values fall below the median): valid for any continuous law whatever n, exact in
  its coverage bound, and none at all below the n it needs (6 values at 95 %: with 5, even the two extremes
  cover a median with probability 1 − 2 / 32 < 95 %). Censored values at ``+inf`` keep their rank. The
  report's interval over design points (issue 62: a bootstrap of 5 points' median claimed 95 %).
- ``bootstrap_ratio_of_ratios``: the same for two ratios of medians compared on the same seeds (e.g.
  two stacks' FEC ÷ no FEC, ``fecbench.analysis.studies.cross_stack``), the four values of a seed resampled together;
  finished values only.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
from numpy.typing import ArrayLike

#: (low, high): the statistic lies between; equal when exact; NaN when there is no data.
Bounds = tuple[float, float]
NAN_BOUNDS: Bounds = (math.nan, math.nan)


def placements(values: ArrayLike, censored: ArrayLike, limit: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The values with each censored one at its limit (low) and at +inf (high).

    An unknown limit (NaN) gives a low placement of 0: always a valid lower bound of a duration.
    """
    values = np.asarray(values, dtype=float)
    censored = np.asarray(censored, dtype=bool)
    limit = np.broadcast_to(np.asarray(limit, dtype=float), values.shape)
    low = np.where(censored, np.nan_to_num(limit, nan=0.0), values)
    high = np.where(censored, np.inf, values)
    return low, high


def median_bounds(values: ArrayLike, censored: ArrayLike, limit: ArrayLike) -> Bounds:
    """Bounds of the median of ``values`` where ``censored`` ones are only known to be >= ``limit``."""
    low, high = placements(values, censored, limit)
    if low.size == 0:
        return NAN_BOUNDS
    return float(np.median(low)), float(np.median(high))


def divide(a: float, b: float) -> float:
    """``a / b`` with the conventions of bounds: x / inf = 0, inf / x = inf; 0 or NaN divisors give NaN."""
    if math.isnan(a) or math.isnan(b) or b == 0 or (math.isinf(a) and math.isinf(b)):
        return math.nan
    return a / b


def ratio_bounds(numerator: Bounds, denominator: Bounds) -> Bounds:
    """Bounds of ``numerator / denominator`` for positive bounded values."""
    return divide(numerator[0], denominator[1]), divide(numerator[1], denominator[0])


def exact(bounds: Bounds) -> float:
    """The value when the bounds agree, else NaN."""
    low, high = bounds
    return low if low == high else math.nan


def state(bounds: Bounds) -> str:
    """``exact``, ``at least`` (upper bound infinite), ``at most`` (lower bound 0 with a finite upper
    bound), ``undefined`` (``[0, inf]``), ``between`` (a finite interval) or ``no data`` (NaN)."""
    low, high = bounds
    if math.isnan(low) or math.isnan(high):
        return "no data"
    if low == high:
        return "exact"
    if math.isinf(high):
        return "undefined" if low == 0 else "at least"
    return "at most" if low == 0 else "between"


def describe(bounds: Bounds, digits: int = 3) -> str:
    """Bounds as text for tables: ``0.853``, ``≥ 12.5``, ``≤ 0.04``, ``0.8–0.95``, ``undefined``."""
    low, high = bounds
    text = {"exact": f"{low:.{digits}g}", "at least": f"≥ {low:.{digits}g}", "at most": f"≤ {high:.{digits}g}",
            "between": f"{low:.{digits}g}–{high:.{digits}g}", "undefined": "undefined", "no data": "–"}
    return text[state(bounds)]


def share_below_bounds(lows: ArrayLike, highs: ArrayLike, threshold: float = 1.0) -> Bounds:
    """Bounds of the share of values below ``threshold``, from each value's bounds (NaN: none)."""
    lows, highs = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
    known = ~(np.isnan(lows) | np.isnan(highs))
    if not known.any():
        return NAN_BOUNDS
    return float(np.mean(highs[known] < threshold)), float(np.mean(lows[known] < threshold))


#: Two sides' runs were excluded at different rates when their shares differ by more than EXCLUSION_GAP and
#: Fisher's exact test rejects equal rates at EXCLUSION_P: then what survived is not a sample of the comparison's
#: population (one rule for the report and for reproduce's verdicts).
EXCLUSION_GAP = 0.05
EXCLUSION_P = 0.05


def exclusions_differ(label_excluded: int, label_n: int, base_excluded: int, base_n: int) -> float | None:
    """Fisher's exact p-value when the two sides' exclusion shares differ by more than EXCLUSION_GAP and
    significantly (p < EXCLUSION_P), else None (the same rates, as far as the data tell)."""
    from scipy.stats import fisher_exact

    if label_n <= 0 or base_n <= 0 or abs(label_excluded / label_n - base_excluded / base_n) <= EXCLUSION_GAP:
        return None
    p = float(fisher_exact([[label_excluded, label_n - label_excluded], [base_excluded, base_n - base_excluded]])
              .pvalue)
    return p if p < EXCLUSION_P else None


def group_seed(seed: int, key: object) -> int:
    """A seed for one group (e.g. one design point) from the analysis seed and the group's key, so
    that a group's interval does not depend on which other groups are analysed, nor on their order."""
    digest = hashlib.sha256(json.dumps([seed, key], default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big")


#: The fewest seeds of a point for its percentile-bootstrap interval of a ratio of medians in the report: below,
#: the resampled medians take so few values that the estimate sits at the interval's edge (issue 62: "1.36 [1.26,
#: 1.36]" from 4 seeds); from 10 on, its coverage on skewed paired data is ≥ 95 % (tests/test_stats.py measures it).
MIN_SEEDS_FOR_INTERVAL = 10


def fewest_for_median_interval(level: float = 0.95) -> int:
    """The fewest values whose two extremes cover a median with probability ≥ ``level``: 2 · 2⁻ⁿ ≤ 1 − level."""
    return max(1, math.ceil(math.log2(2 / (1 - level))))


def median_order_interval(values: ArrayLike, level: float = 0.95) -> Bounds:
    """(x₍ₖ₎, x₍ₙ₋ₖ₊₁₎) with the largest k such that P(Binomial(n, ½) < k) ≤ (1 − level)/2: it covers the
    median with probability ≥ ``level`` for any continuous law; NaN bounds below ``fewest_for_median_interval``."""
    from scipy.stats import binom

    data = np.sort(np.asarray(values, dtype=float))
    data = data[~np.isnan(data)]
    n = data.size
    if n < fewest_for_median_interval(level):
        return NAN_BOUNDS
    tail = (1 - level) / 2
    k = int(np.searchsorted(binom.cdf(np.arange(n), n, 0.5), tail, side="right"))   # P(B ≤ k − 1) ≤ tail
    if k < 1:
        return NAN_BOUNDS
    return float(data[k - 1]), float(data[n - k])


def bootstrap_ratio_of_medians(numerator: ArrayLike, denominator: ArrayLike, *, n_boot: int = 2000,
                               level: float = 0.95, seed: int = 0, min_pairs: int = 3) -> Bounds:
    """Percentile bootstrap interval of ``median(numerator) / median(denominator)`` over pairs.

    ``numerator[i]`` and ``denominator[i]`` are one pair (one loss seed); censored values are
    ``+inf``. Returns NaN bounds with fewer than ``min_pairs`` pairs (one or two seeds say nothing
    about the spread: a single seed would give a zero-width interval), or when more than
    ``1 - level`` of the resamples have an undefined ratio (both medians censored).
    """
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    if num.size < max(min_pairs, 1) or num.size != den.size:
        return NAN_BOUNDS
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, num.size, size=(n_boot, num.size))
    top, bottom = np.median(num[picks], axis=1), np.median(den[picks], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(bottom > 0, top / bottom, np.nan)
    ratios = ratios[~np.isnan(ratios)]  # inf / inf: both medians censored in that resample
    if ratios.size < level * n_boot:
        return NAN_BOUNDS
    alpha = (1.0 - level) / 2
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha], method="inverted_cdf")
    return float(low), float(high)


def bootstrap_median(values: ArrayLike, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0,
                     min_values: int = 3) -> Bounds:
    """Percentile bootstrap interval of one sample's median (censored values at ``+inf``, as above);
    NaN bounds with fewer than ``min_values`` values."""
    data = np.asarray(values, dtype=float)
    if data.size < max(min_values, 1):
        return NAN_BOUNDS
    rng = np.random.default_rng(seed)
    medians = np.median(data[rng.integers(0, data.size, size=(n_boot, data.size))], axis=1)
    alpha = (1.0 - level) / 2
    low, high = np.quantile(medians, [alpha, 1.0 - alpha], method="inverted_cdf")
    return float(low), float(high)


def jain_index(values: ArrayLike) -> float:
    """Jain's fairness index (Σx)² / (n Σx²) of non-negative shares: 1 when all are equal, 1/n when one
    takes everything; NaN for no value or all zero."""
    data = np.asarray(values, dtype=float)
    total = float(np.sum(data ** 2))
    return float(np.sum(data) ** 2 / (data.size * total)) if data.size and total > 0 else math.nan


def bootstrap_ratio_of_ratios(a_num: ArrayLike, a_den: ArrayLike, b_num: ArrayLike, b_den: ArrayLike, *,
                              n_boot: int = 2000, level: float = 0.95, seed: int = 0,
                              min_pairs: int = 3) -> Bounds:
    """Percentile bootstrap interval of ``(median(a_num) / median(a_den)) / (median(b_num) / median(b_den))``:
    two ratios of medians (e.g. two stacks' FEC ÷ no FEC) compared on the same seeds, the four values of
    a seed resampled together. Finished values only (no censoring); NaN bounds with fewer than
    ``min_pairs`` seeds."""
    values = [np.asarray(v, dtype=float) for v in (a_num, a_den, b_num, b_den)]
    n = values[0].size
    if n < max(min_pairs, 1) or any(v.size != n for v in values):
        return NAN_BOUNDS
    picks = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    an, ad, bn, bd = (np.median(v[picks], axis=1) for v in values)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = (an / ad) / (bn / bd)
    stat = stat[np.isfinite(stat)]
    if stat.size < level * n_boot:
        return NAN_BOUNDS
    alpha = (1.0 - level) / 2
    low, high = np.quantile(stat, [alpha, 1.0 - alpha], method="inverted_cdf")
    return float(low), float(high)
