"""A claim's statistic and its 95 % bootstrap interval over seeds (pure numpy; no database).

Inputs are *samples*: for a pair statistic, one row per pair of runs on the same point, seed and
size (``group`` = the point and size, ``value`` and ``base`` the two sides' metric, ``ratio`` the
per-run ratio); censored values (a run that reached the time limit) are +inf, so a pair whose label
timed out has ratio +inf and one whose baseline timed out ratio 0, as in ``fecbench.analysis.ratios``
(pairs where both timed out have no ratio and are left out). For a group statistic, one row per run
with its ``side`` (label or baseline).

Statistics (``pack.STATISTICS``):

- ``share_pairs_below`` / ``share_pairs_above``: the share of pairs whose ratio is below / above
  ``ratio_threshold`` (default 1); ``ties = "exclude"`` leaves out pairs with a ratio of exactly 1
  (data received often ties); a share's interval is at least its Wilson score interval (5 of 5 pairs
  would otherwise give a bootstrap interval of [1, 1]);
- ``median_pair_ratio``: the median per-run ratio; ``ratio_of_medians``: median of the label's values
  ÷ median of the baseline's over the same pairs; ``difference_of_medians``: their difference;
- per point (a group's ratio of medians over its seeds, groups with fewer than ``min_seeds`` seeds
  left out): ``median_point_ratio``, ``mean_point_ratio``, ``share_points_below`` (ratio < 1) and
  ``trend`` (Spearman's rank correlation of the point ratios with a factor: < 0 decreases);
  ``per_point = "difference"`` takes each point's difference of medians instead (re-buffering is often 0);
- ``quantile_ratio``: the ``q`` quantile of the label's runs ÷ the baseline's (unpaired).

Intervals: a percentile bootstrap (order statistics, as ``fecbench.analysis.stats``). Pairs are
resampled within their point (the seeds of a point: both sides of a seed together), the points with a
single seed together as one stratum (one seed cannot vary within its point); statistics over points
resample the points too, then the seeds of each; a group statistic resamples each side's runs.
Seeded: the same sample and seed give the same interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

N_BOOT = 1000
LEVEL = 0.95
MIN_PAIRS = 3
MIN_POINTS = 3
MIN_TREND_POINTS = 4


@dataclass
class Estimate:
    value: float
    low: float
    high: float
    n: int                    # pairs, points or runs used
    unit: str                 # "pairs", "points" or "runs"
    note: str = ""            # what was left out, why no interval
    samples: dict[str, np.ndarray] = field(default_factory=dict)   # what the claim's figure draws

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


def _interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    finite = values[~np.isnan(values)]
    if finite.size < level * values.size or finite.size == 0:
        return math.nan, math.nan
    alpha = (1 - level) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha], method="inverted_cdf")
    return float(low), float(high)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(a, dtype=float) / np.asarray(b, dtype=float)
    return np.where((np.asarray(b) == 0) | (np.isinf(a) & np.isinf(b)), np.nan, out)


def _pair_value(statistic: str, value: np.ndarray, base: np.ndarray, ratio: np.ndarray, params: dict) -> np.ndarray:
    """The statistic over the last axis of resampled pairs (1-D or 2-D arrays)."""
    threshold = params.get("ratio_threshold", 1.0)
    if statistic in ("share_pairs_below", "share_pairs_above"):
        hit = ratio < threshold if statistic == "share_pairs_below" else ratio > threshold
        if params.get("ties") == "exclude":
            counted = ~np.isclose(ratio, 1.0, rtol=0, atol=1e-12)
            with np.errstate(invalid="ignore"):
                return np.sum(hit & counted, axis=-1) / np.sum(counted, axis=-1)
        return np.mean(hit, axis=-1)
    if statistic == "median_pair_ratio":
        return np.median(ratio, axis=-1)
    top, bottom = np.median(value, axis=-1), np.median(base, axis=-1)
    if statistic == "ratio_of_medians":
        return _divide(top, bottom)
    with np.errstate(invalid="ignore"):
        return top - bottom  # difference_of_medians


def pair_estimate(statistic: str, sample: pd.DataFrame, params: dict, *, seed: int = 0,
                  n_boot: int = N_BOOT) -> Estimate:
    """A statistic over pairs (columns group, value, base, ratio), resampled within groups."""
    if statistic == "ratio_of_medians" or statistic == "difference_of_medians":
        sample = sample[~(np.isinf(sample["value"]) & np.isinf(sample["base"]))]
    if statistic.startswith("share_pairs") and params.get("ties") == "exclude":
        kept = int((~np.isclose(sample["ratio"], 1.0, rtol=0, atol=1e-12)).sum())
    else:
        kept = len(sample)
    samples = {"ratio": sample["ratio"].to_numpy(float)}
    if len(sample) == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, "pairs", "no pairs", samples)
    value, base, ratio = (sample[c].to_numpy(float) for c in ("value", "base", "ratio"))
    point = float(_pair_value(statistic, value, base, ratio, params))
    if kept < MIN_PAIRS:
        return Estimate(point, math.nan, math.nan, kept, "pairs", f"{kept} pairs: too few for an interval "
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
    boots = _pair_value(statistic, value[picks], base[picks], ratio[picks], params)
    low, high = _interval(np.asarray(boots, dtype=float))
    if statistic.startswith("share_pairs") and not math.isnan(low):
        low, high = _with_wilson(low, high, point, kept)
    note = "" if not math.isnan(low) else "the resamples give no interval"
    return Estimate(point, low, high, kept, "pairs", note, samples)


def _with_wilson(low: float, high: float, share: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """A share's bootstrap interval widened to at least its Wilson score interval: with few pairs, or a
    share of 0 or 1, every resample gives the same share and the bootstrap alone says [1, 1]."""
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return min(low, max(0.0, centre - half)), max(high, min(1.0, centre + half))


def _group_ratio(value: np.ndarray, base: np.ndarray, per_point: str = "ratio") -> np.ndarray:
    """A point's ratio of medians (or, ``per_point = "difference"``, their difference: for metrics that
    are often 0, such as re-buffering)."""
    top, bottom = np.median(value, axis=-1), np.median(base, axis=-1)
    if per_point == "difference":
        with np.errstate(invalid="ignore"):
            return top - bottom
    return _divide(top, bottom)


def _over_points(statistic: str, ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
    """The statistic over the last axis of per-point ratios (NaN ratios left out)."""
    with np.errstate(invalid="ignore"):
        if statistic == "median_point_ratio":
            return np.nanmedian(ratios, axis=-1)
        if statistic == "mean_point_ratio":
            return np.nanmean(ratios, axis=-1)
        if statistic == "share_points_below":
            known = ~np.isnan(ratios)
            return np.sum((ratios < 1) & known, axis=-1) / np.sum(known, axis=-1)
    return _spearman(ratios, factor)


def _spearman(ratios: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
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


def point_estimate(statistic: str, sample: pd.DataFrame, params: dict, *, seed: int = 0,
                   n_boot: int = N_BOOT) -> Estimate:
    """A statistic over points: per group (point and size) the ratio of medians of its seeds; the
    points are resampled, then each point's seeds."""
    min_seeds = int(params.get("min_seeds", 3))
    per_point = params.get("per_point", "ratio")
    groups = [(key, g) for key, g in sample.groupby("group", sort=True)]
    kept = [(key, g) for key, g in groups if len(g) >= min_seeds]
    left_out = len(groups) - len(kept)
    note = f"{left_out} point(s) with fewer than {min_seeds} seeds left out" if left_out else ""
    ratios = np.array([float(_group_ratio(g["value"].to_numpy(float), g["base"].to_numpy(float), per_point))
                       for _, g in kept])
    factor = np.array([float(g["factor"].iloc[0]) for _, g in kept]) if statistic == "trend" else None
    samples = {"point_ratio": ratios}
    if factor is not None:
        samples["factor"] = factor
    need = MIN_TREND_POINTS if statistic == "trend" else MIN_POINTS
    if not kept:
        return Estimate(math.nan, math.nan, math.nan, 0, "points", note or "no points", samples)
    value = float(_over_points(statistic, ratios[None, :], factor)[0])
    if len(kept) < need:
        return Estimate(value, math.nan, math.nan, len(kept), "points",
                        "; ".join(filter(None, [note, f"{len(kept)} points: too few for an interval (≥ {need})"])),
                        samples)
    rng = np.random.default_rng(seed)
    boot_points = np.empty((len(kept), n_boot))
    for i, (_, g) in enumerate(kept):
        idx = rng.integers(0, len(g), size=(n_boot, len(g)))
        boot_points[i] = _group_ratio(g["value"].to_numpy(float)[idx], g["base"].to_numpy(float)[idx], per_point)
    chosen = rng.integers(0, len(kept), size=(n_boot, len(kept)))
    boots = boot_points[chosen, np.arange(n_boot)[:, None]]
    boot_factor = factor[chosen] if factor is not None else None
    values = (_over_points(statistic, boots, boot_factor) if statistic != "trend"
              else np.array([_spearman(boots[b], boot_factor[b])[0] for b in range(n_boot)]))
    low, high = _interval(np.asarray(values, dtype=float))
    if statistic == "share_points_below" and not math.isnan(low):
        low, high = _with_wilson(low, high, value, len(kept))
    return Estimate(value, low, high, len(kept), "points", note, samples)


def quantile(values: np.ndarray, q: float, axis: int = -1) -> np.ndarray:
    """An order-statistic quantile where +inf (timed out) keeps its rank."""
    return np.quantile(values, q, axis=axis, method="inverted_cdf")


def group_estimate(statistic: str, label: np.ndarray, base: np.ndarray, params: dict, *, seed: int = 0,
                   n_boot: int = N_BOOT) -> Estimate:
    """The ``q`` quantile of the label's runs ÷ the baseline's, each side resampled on its own."""
    q = float(params["q"])
    samples = {"label": label, "baseline": base}
    n = min(len(label), len(base))
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, "runs", "no runs on one side", samples)
    value = float(_divide(quantile(label, q), quantile(base, q)))
    if n < MIN_PAIRS:
        return Estimate(value, math.nan, math.nan, n, "runs", f"{n} runs on a side: too few for an interval",
                        samples)
    rng = np.random.default_rng(seed)
    top = quantile(label[rng.integers(0, len(label), (n_boot, len(label)))], q)
    bottom = quantile(base[rng.integers(0, len(base), (n_boot, len(base)))], q)
    low, high = _interval(_divide(top, bottom))
    return Estimate(value, low, high, n, "runs", "", samples)


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
