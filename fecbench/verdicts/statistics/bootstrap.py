"""What the claim statistics share for their fixed-sample estimates: the percentile bootstrap interval
(order statistics, as ``fecbench.analysis.stats``), the ratio that is undefined where the denominator is
0 or both sides are censored, a share's Wilson floor, the censored quantile, and the verdict rule of a
fixed-sample interval (pure numpy)."""

from __future__ import annotations

import math

import numpy as np

N_BOOT = 1000
LEVEL = 0.95
#: Observations a fixed-sample interval needs: pairs (or runs per side); points; points for a trend.
MIN_PAIRS = 3
MIN_POINTS = 3
MIN_TREND_POINTS = 4


def interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of bootstrap values (NaN, NaN when too many resamples have no value)."""
    finite = values[~np.isnan(values)]
    if finite.size < level * values.size or finite.size == 0:
        return math.nan, math.nan
    alpha = (1 - level) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha], method="inverted_cdf")
    return float(low), float(high)


def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a ÷ b, NaN where b is 0 or both are infinite (both sides timed out)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(a, dtype=float) / np.asarray(b, dtype=float)
    return np.where((np.asarray(b) == 0) | (np.isinf(a) & np.isinf(b)), np.nan, out)


def with_wilson(low: float, high: float, share: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """A share's bootstrap interval widened to at least its Wilson score interval: with few pairs, or a
    share of 0 or 1, every resample gives the same share and the bootstrap alone says [1, 1]."""
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return min(low, max(0.0, centre - half)), max(high, min(1.0, centre + half))


def quantile(values: np.ndarray, q: float, axis: int = -1) -> np.ndarray:
    """An order-statistic quantile where +inf (timed out) keeps its rank."""
    return np.quantile(values, q, axis=axis, method="inverted_cdf")


def verdict(value: float, low: float, high: float, compare: str, threshold: float, tolerance: float
            ) -> str:
    """holds / fails / inconclusive: the interval entirely on the claim's side of the threshold (for
    ``approx``: inside threshold ± tolerance), entirely on the other side (outside), or across it."""
    if any(math.isnan(v) for v in (value, low, high)):
        return "inconclusive"
    if compare == "<":
        return "holds" if high < threshold else "fails" if low >= threshold else "inconclusive"
    if compare == ">":
        return "holds" if low > threshold else "fails" if high <= threshold else "inconclusive"
    lo, hi = threshold - tolerance, threshold + tolerance
    if lo <= low and high <= hi:
        return "holds"
    return "fails" if high < lo or low > hi else "inconclusive"
