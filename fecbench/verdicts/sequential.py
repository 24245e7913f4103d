"""Anytime-valid intervals: confidence sequences for a claim's statistic (pure numpy/scipy; no database).

A confidence sequence (CS) at level 1 − α is a sequence of intervals that contain the true value at
every sample size *at once* with probability ≥ 1 − α, so it may be looked at after every run, and a
verdict taken whenever its interval first clears the threshold (optional stopping and continuation
do not inflate the error). Everything here reduces a claim's statistic to indicators:

- a share (the mean of indicators, or of any values in [0, 1]), each side at α/2: the lower bound is
  ``{m : A_t(m) < 2/α}``'s, A_t(m) the capital of a portfolio betting that the mean is above m, ¾ of it on
  (a) Robbins' (1970) beta-binomial mixture, ``M_t(m) = B(a + k, b + t − k) / B(a, b) / (m^k (1 − m)^(t − k))``
  after k successes in t, a = b = ½ (Jeffreys; Howard, Ramdas, McAuliffe & Sekhon, Ann. Statist. 2021, §3), and
  ¼ (``BET_SHARE``) on (b) Waudby-Smith & Ramdas's betting strategy (JRSSB 2024; their hedged capital process
  keeps the two sides apart as here): ``K⁺_t(m) = ∏ (1 + min(λ̇_i, c_i/m) (x_i − m))``, λ̇ their predictable
  plug-in bet, c_i the truncation: the larger of ½ and the Krichevsky–Trofimov mean of the earlier draws.
  Each is a nonnegative supermartingale at the true mean (M for values in [0, 1] by convexity; K⁺ since its bets
  are ≥ 0 and known before x_i), so is the portfolio, and by Ville's inequality it ever reaches 2/α with
  probability ≤ α/2. Both fall as m rises to the prefix's mean, so the bound is found on nested grids
  (``share_lower``); the upper bound is the same on 1 − x. Why the portfolio: the mixture, near the best for
  shares away from 0 and 1, pays about ½ log(πn) for not knowing p, so agreeing draws decide late (at
  thesis2018's level α/42: 14 all-agreeing draws against ½, 208 no-hit draws for "< 0.05"); the bets nearly
  double their capital per agreeing draw (13 and 172 with the portfolio; at networking2019's α/33 and rquic2021's
  α/32, 14 → 13 and 204 → 168, 203 → 167). Alone they are too timid for a
  threshold far from the draws' mean (up to 60 % more draws than the mixture for shares between 0.1 and 0.75), and
  two CSs intersected at α/4 each cost the mixture up to 20 % more there; the portfolio's price is log(4/3) of
  evidence, a few % (reproduce/README.md, "Verdicts you can stop on");
- the q quantile of a distribution: for a fixed q, the indicators ``x_i ≤ Q(q)`` are Bernoulli(q)
  (continuous values), so the counts k with ``M_n(q) < 1/α`` (the mixture) bound how many observations lie below
  Q(q), hence Q(q) between two order statistics (Howard & Ramdas, Bernoulli 2022, "Sequential
  estimation of quantiles", the fixed-quantile CS). Ties (timeouts at +∞, ratios of exactly 1) keep it
  conservative: the lower bound uses ``≤``, the upper ``<``, and a path that dominates a Bernoulli(q)
  one crosses the lower boundary less often;
- two quantiles (ratio or difference of medians, quantile ratio): each at α/2, combined by interval
  arithmetic (Bonferroni);
- a trend: pairs of blocks whose factor differs, each concordant or not (the ratio moves with the factor or
  against it; ``concordance_censored``), a share with mean (1 + τ)/2, τ Kendall's rank correlation: the CS for τ
  is the share's, doubled and shifted.

Censored observations (a run that reached its time limit) are intervals, never dropped: each bound of a
CS comes from the observations' least favourable side (the lower bound from their lower ends, the upper
from their upper ends), and each side at α/2, so that the two sides together miss with probability ≤ α
whatever the censoring (``share_censored``, ``quantile_censored``). For a quantile without censoring this is
the CS at α/2: a little wider than at α, the price of one rule for every sample.

Every CS is intersected over all prefixes (the running intersection of a CS is a CS), so an interval
never widens as data grow and a verdict taken stays taken. An intersection that becomes empty is a
coverage failure (probability ≤ α) or, far likelier, data whose distribution changed while they came
(drift, a machine that became busy): ``Sequence.empty_at`` says after which observation, and ``evaluate``
judges no such claim. Assumptions (reproduce/README.md): the observations of a claim are independent
draws from the claim's population (``draws``: a uniformly random cell of the claim, fresh seeds), in an
order that does not depend on their values.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import betaln

#: Family-wise error of a pack's verdicts (per profile), split evenly over its claims.
ALPHA = 0.05
#: The mixture's Beta(a, b) prior.
PRIOR = 0.5
#: The betting CS's smallest truncation c (Waudby-Smith & Ramdas's ½): a bet that the mean is above m stakes at most
#: c/m of the capital (below: c/(1 − m)); c rises towards 1 while the draws agree (``truncations``).
BET_FLOOR = 0.5
#: The share of a side's capital on the betting strategy; the rest follows the mixture's (a portfolio of the two).
BET_SHARE = 0.25
_GRID, _GRID_WIDTH = 33, 1e-6   # a share bound's nested grids: their points, and the width where they stop


@dataclass
class Sequence:
    """A confidence sequence's state at the last observation."""
    value: float          # the statistic on every observation so far
    low: float            # the running intersection's bounds
    high: float
    n: int                # observations (pairs, points, runs, pairs of points)
    empty: bool = False   # the running intersection became empty (a coverage failure: probability ≤ α)
    empty_at: int = 0     # the observation after which it was empty (1-based; 0: never)


def log_mixture(k: np.ndarray, n: np.ndarray, p: np.ndarray, prior: float = PRIOR) -> np.ndarray:
    """log M_n(p): the beta-binomial mixture martingale after k successes in n (vectorised)."""
    k, n, p = np.broadcast_arrays(np.asarray(k, float), np.asarray(n, float), np.asarray(p, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lik = np.where(k > 0, k * np.log(p), 0.0) + np.where(n - k > 0, (n - k) * np.log1p(-p), 0.0)
    return betaln(prior + k, prior + n - k) - betaln(prior, prior) - log_lik


def plug_in_bets(x: np.ndarray, level: float) -> np.ndarray:
    """Waudby-Smith & Ramdas's predictable plug-in bet before each draw t = 1, 2, …: √(2 log(1/level) ÷ (σ̂²ₜ₋₁ t
    log(1 + t))), σ̂² the running variance of the draws about their running mean, each with a prior draw (¼, ½);
    ``level`` is one side's (their log(2/α): two sides at α/2 each)."""
    t = np.arange(1, x.size + 1)
    mean = (0.5 + np.cumsum(x)) / (t + 1)
    variance = (0.25 + np.cumsum((x - mean) ** 2)) / (t + 1)
    before = np.r_[0.25, variance[:-1]]
    return np.sqrt(2 * math.log(1 / level) / (before * t * np.log1p(t)))


def truncations(x: np.ndarray) -> np.ndarray:
    """The truncation c before each draw (a bet that the mean is above m stakes at most c/m): the larger of
    ``BET_FLOOR`` and the Krichevsky–Trofimov estimate of the mean from the earlier draws, (½ + their sum) ÷ (their
    number + 1). While every draw agrees it nears 1 (a unanimous sample is bet on almost in full); it stays below 1,
    so no factor of the capital reaches 0; it depends on the earlier draws only (predictable), never on m."""
    t = np.arange(1, x.size + 1)
    before = np.r_[0.0, np.cumsum(x)[:-1]]
    return np.maximum(BET_FLOOR, (0.5 + before) / t)


def log_capital(x: np.ndarray, grid: np.ndarray, bets: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """log K⁺ₜ(m) for every prefix t (rows) and m of ``grid`` (columns), the capital of bets that the mean is above m:
    Σ_{i ≤ t} log(1 + min(λ̇ᵢ, cᵢ/m) (xᵢ − m)), ``bets`` λ̇ and ``caps`` c. Every factor is > 0, nonincreasing in m."""
    with np.errstate(divide="ignore"):
        stake = np.minimum(bets[:, None], caps[:, None] / grid[None, :])
    return np.cumsum(np.log1p(stake * (x[:, None] - grid[None, :])), axis=0)


def side_capital(x: np.ndarray, grid: np.ndarray, bets: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """log Aₜ(m) for every prefix t (rows) and m of ``grid`` (columns): the capital of a portfolio betting that the mean
    is above m, ``BET_SHARE`` of it on the betting strategy (``log_capital``), the rest on the mixture's, Mₜ(m)."""
    t, k = np.arange(1, x.size + 1)[:, None], np.cumsum(x)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(k > 0, k * np.log(grid), 0.0) + np.where(t > k, (t - k) * np.log1p(-grid), 0.0)
    mixture = betaln(PRIOR + k, PRIOR + t - k) - betaln(PRIOR, PRIOR) - fit
    return np.logaddexp(math.log1p(-BET_SHARE) + mixture, math.log(BET_SHARE) + log_capital(x, grid, bets, caps))


def share_lower(x: np.ndarray, level: float) -> float:
    """The running maximum over the prefixes of the lower bound inf{m : Aₜ(m) < 1/level} (draws in [0, 1], in order;
    0 with none). Both strategies' capital falls as m rises to the prefix's mean x̄ₜ, so each prefix excludes a
    grid's first values up to x̄ₜ (all of them if it excludes x̄ₜ: x̄ₜ is then its bound, below the exact one):
    nested grids close in on the largest m some prefix excludes (never above the exact bound, within 1e-6)."""
    x = np.asarray(x, float)
    bets, caps, mean = plug_in_bets(x, level), truncations(x), np.cumsum(x) / np.arange(1, x.size + 1)
    below, above, limit = 0.0, 1.0, math.log(1 / level)
    while x.size and above - below > _GRID_WIDTH:
        grid = np.linspace(below, above, _GRID)
        excluded = (side_capital(x, grid, bets, caps) >= limit) & (grid[None, :] <= mean[:, None])
        leading = np.where(excluded.all(axis=1), _GRID, np.argmin(excluded, axis=1))    # per prefix
        deepest = int(leading.max())
        if deepest in (0, _GRID):   # none excluded (the first grid: the bound is 0) or, by rounding, every one
            return below
        below, above = float(grid[deepest - 1]), float(grid[deepest])
    return below


def share_interval(lo: np.ndarray, hi: np.ndarray, alpha: float) -> tuple[float, float]:
    """A share's running intersection after the last draw, its values known between ``lo`` and ``hi``: the lower
    bound from the portfolio on ``lo``, the upper from the same on 1 − ``hi`` (turned back), each side at α/2."""
    return share_lower(lo, alpha / 2), 1 - share_lower(1 - hi, alpha / 2)


def running(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The running intersection of a CS given per prefix."""
    return np.maximum.accumulate(low), np.minimum.accumulate(high)


def share(hits: np.ndarray, alpha: float) -> Sequence:
    """A share (mean of 0/1 observations, in order): ``share_censored`` with every indicator known."""
    return share_censored(hits, hits, alpha)


@functools.lru_cache(maxsize=65536)
def count_region(n: int, q: float, alpha: float) -> tuple[int, int]:
    """The counts k in 0..n with M_n(q) < 1/α: [k_low, k_high] (an interval: log M is convex in k)."""
    k = np.arange(n + 1)
    inside = np.flatnonzero(log_mixture(k, np.full(n + 1, n), np.full(n + 1, q)) < math.log(1 / alpha))
    if inside.size == 0:  # cannot happen (the mixture at k = nq is ≤ 1), kept total
        centre = int(round(n * q))
        return centre, centre
    return int(inside[0]), int(inside[-1])


def quantile_bounds(values: np.ndarray, q: float, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The fixed-quantile CS per prefix of ``values`` (in order): [x_(k_low), x_(k_high + 1)], ±∞ beyond."""
    values = np.asarray(values, float)
    n = values.size
    lows, highs = np.full(n, -math.inf), np.full(n, math.inf)
    ordered: list[float] = []
    for t, value in enumerate(values.tolist(), start=1):
        bisect.insort(ordered, value)   # the order statistics of the first t values
        k_low, k_high = count_region(t, q, alpha)
        if k_low >= 1:
            lows[t - 1] = ordered[k_low - 1]
        if k_high + 1 <= t:
            highs[t - 1] = ordered[k_high]
    return lows, highs


def sample_quantile(values: np.ndarray, q: float) -> float:
    return float(np.quantile(values, q, method="inverted_cdf")) if len(values) else math.nan


def divide(a: float, b: float) -> float:
    """a ÷ b for bounds: +∞ for a positive over 0, NaN where undefined (0 ÷ 0, ∞ ÷ ∞, a NaN)."""
    if b == 0 or (math.isinf(a) and math.isinf(b)) or math.isnan(a) or math.isnan(b):
        return math.nan if not (b == 0 and a > 0) else math.inf
    return a / b


def _censored_state(value: float, lows: np.ndarray, highs: np.ndarray) -> Sequence:
    """The running intersection of per-prefix bounds, and where it first became empty."""
    low, high = running(lows, highs)
    return prefix_sequence(value, len(lows), lambda k: (float(low[k - 1]), float(high[k - 1])))


def share_censored(lo: np.ndarray, hi: np.ndarray, alpha: float) -> Sequence:
    """A share from indicators known only between ``lo`` and ``hi`` (0/1 each, lo ≤ hi; equal where known): the
    lower bound from the lower indicators, the upper from the upper, each side at α/2 (``share_interval``). An
    empty running intersection says after which observation it emptied (by bisection: once empty it stays so)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if lo.size == 0:
        return Sequence(math.nan, math.nan, math.nan, 0)
    value = float((lo.sum() + hi.sum()) / (2 * lo.size))
    return prefix_sequence(value, lo.size, lambda n: share_interval(lo[:n], hi[:n], alpha))


def prefix_sequence(value: float, n: int, interval) -> Sequence:
    """The state after ``n`` observations of a CS whose ``interval(k)`` is already the running intersection over the
    first k (bounds that are running extremes over the prefixes); an empty one says after which observation it
    emptied (by bisection: once empty it stays so)."""
    low, high = interval(n)
    if low <= high:
        return Sequence(value, low, high, n)
    full, empty = 0, n      # not empty after ``full`` observations, empty after ``empty``
    while empty - full > 1:
        mid = (full + empty) // 2
        low, high = interval(mid)
        full, empty = (mid, empty) if low <= high else (full, mid)
    return Sequence(value, value, value, n, empty=True, empty_at=empty)


def quantile_censored(lo: np.ndarray, hi: np.ndarray, q: float, alpha: float) -> Sequence:
    """The q quantile of observations known only between ``lo`` and ``hi`` (equal where known; ±∞ allowed), in
    order: the lower bound from the lower ends, the upper from the upper ends, each side at α/2. The value is
    the sample quantile of the upper ends (a censored duration counts as +∞, as in the report)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if lo.size == 0:
        return Sequence(math.nan, math.nan, math.nan, 0)
    lows = quantile_bounds(lo, q, alpha / 2)[0]
    highs = quantile_bounds(hi, q, alpha / 2)[1]
    return _censored_state(sample_quantile(hi, q), lows, highs)


def two_quantiles_censored(top: tuple[np.ndarray, np.ndarray], bottom: tuple[np.ndarray, np.ndarray], q: float,
                           alpha: float, how: str) -> Sequence:
    """The q quantile of one side's values ÷ (or −) the other's, each side's CS at α/2 (``quantile_censored``),
    combined by interval arithmetic: the two-sample statistic as named (a ratio of medians, not the median of
    ratios)."""
    a, b = quantile_censored(*top, q, alpha / 2), quantile_censored(*bottom, q, alpha / 2)
    n = min(a.n, b.n)
    if n == 0:
        return Sequence(math.nan, math.nan, math.nan, 0)
    empty_at = max(a.empty_at, b.empty_at)
    if how == "ratio":
        value = divide(a.value, b.value)
        low = divide(max(a.low, 0.0), b.high) if b.high > 0 else math.nan
        high = divide(a.high, max(b.low, 0.0)) if not math.isinf(b.high) or b.low > 0 else math.inf
        low = 0.0 if math.isnan(low) else low
        high = math.inf if math.isnan(high) else high
    else:
        value = a.value - b.value if not (math.isinf(a.value) and math.isinf(b.value)) else math.nan
        low, high = a.low - b.high, a.high - b.low
        low = -math.inf if math.isnan(low) else low
        high = math.inf if math.isnan(high) else high
    return Sequence(value, low, high, n, a.empty or b.empty, empty_at)


def concordance_censored(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray],
                         factor_first: np.ndarray, factor_second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair of points (a trend's draw): whether the ratio moves with the factor, as (lo, hi) indicators:
    known where the two values' intervals do not meet, else 0 below and 1 above (ties, censored sides)."""
    (lo1, hi1), (lo2, hi2) = first, second
    direction = np.sign(np.asarray(factor_first, float) - np.asarray(factor_second, float))
    up = lo1 > hi2          # the first is surely above the second
    down = hi1 < lo2        # surely below
    agree = np.where(direction > 0, up, down)
    disagree = np.where(direction > 0, down, up)
    return agree.astype(float), (~disagree).astype(float)


def decide(low: float, high: float, compare: str, threshold: float, tolerance: float) -> str:
    """holds / fails / at the threshold / inconclusive from an anytime-valid interval.

    ``<`` (``>``): **at the threshold** when the interval lies inside threshold ± tolerance (tolerance > 0:
    the claim's margin of practical equality; no budget would move it out of the band, whichever side of
    the threshold it is on), else holds when it lies below (above) the threshold, fails when it lies at
    or above (below) it. ``approx``: holds inside threshold ± tolerance, fails entirely outside it."""
    if math.isnan(low) or math.isnan(high):
        return "inconclusive"
    band_low, band_high = threshold - tolerance, threshold + tolerance
    inside = band_low <= low and high <= band_high
    if compare == "approx":
        if inside:
            return "holds"
        return "fails" if high < band_low or low > band_high else "inconclusive"
    if tolerance > 0 and inside:
        return "at the threshold"
    if compare == "<":
        if high < threshold:
            return "holds"
        if low >= threshold:
            return "fails"
    else:
        if low > threshold:
            return "holds"
        if high <= threshold:
            return "fails"
    return "inconclusive"


def contradicts(verdict: str, low: float, high: float, compare: str, threshold: float, tolerance: float) -> bool:
    """Whether an interval [low, high] lies wholly outside the values a verdict says the statistic has (an audit's
    interval against the verdict it audits): ``holds`` of ``<`` says below the threshold, ``fails`` at or above
    it, ``at the threshold`` inside the band; ``approx`` holds inside the band, fails outside it."""
    if math.isnan(low) or math.isnan(high):
        return False
    band_low, band_high = threshold - tolerance, threshold + tolerance
    if verdict == "at the threshold" or (compare == "approx" and verdict == "holds"):
        return high < band_low or low > band_high
    if compare == "approx":       # fails: outside the band
        return band_low <= low and high <= band_high
    if compare == "<":    # holds: below the threshold; fails: at or above it
        return low >= threshold if verdict == "holds" else high < threshold
    return high <= threshold if verdict == "holds" else low > threshold    # ">"


def decisive_half_width(value: float, compare: str, threshold: float, tolerance: float) -> float:
    """The widest half-width of an interval around ``value`` that ``decide`` gives a verdict (0: none).

    Asked of ``decide`` itself, so the allocation's distances cannot drift from the verdict rule: the
    verdicts' boundaries are the threshold and the band's edges, and the widest such interval reaches
    (just short of) one of them."""
    edges = {threshold, threshold - tolerance, threshold + tolerance}
    rounding = 1e-9 * max(1.0, abs(threshold) + tolerance)    # a value this close sits on the edge
    for width in sorted((w for w in {abs(value - edge) for edge in edges} if w > rounding), reverse=True):
        half = width * (1 - 1e-9)
        if decide(value - half, value + half, compare, threshold, tolerance) != "inconclusive":
            return width
    return 0.0


def fewest(decides, most: int = 1 << 16) -> float:
    """The smallest n ≥ 1 with ``decides(n)`` (once decided, decided with more observations); inf if none
    up to ``most``."""
    high = 1
    while not decides(high):
        if high >= most:
            return math.inf
        high = min(2 * high, most)
    low = high // 2          # not deciding (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return float(high)


def fewest_for_quantile(q: float, alpha: float, both_sides: bool = False) -> float:
    """The fewest observations that can decide a claim on the q quantile: its CS gets a finite side (two,
    ``both_sides``) once some counts k are outside the region ``M_n(q) < 1/α``; then, every observation
    agreeing, the interval is their common value on that side. A lower bound: it needs unanimity."""
    def bounded(n: int) -> bool:
        k_low, k_high = count_region(n, q, alpha / 2)     # each side at α/2 (``quantile_censored``)
        below, above = k_low >= 1, k_high + 1 <= n
        return below and above if both_sides else below or above
    return fewest(bounded)


def fewest_for_bounded_mean(limit: float, mean: float, margin: float, alpha: float) -> float:
    """The fewest observations with which *any* confidence bound valid for every distribution on [0, ``limit``]
    (its only bound on a run: the time limit) can, more often than not, put a mean ``mean`` a relative ``margin``
    below the value it must exclude: mass p = margin·mean ÷ (limit − mean) moved to the limit raises the mean by that
    margin, and goes unseen in t observations with probability (1 − p)^t, so the bound must keep covering unless
    (1 − p)^t ≤ 2α: t ≥ log(1 / 2α) ÷ −log(1 − p) (reproduce/README.md, "Averages")."""
    p = margin * mean / (limit - mean)
    return float(math.ceil(math.log(1 / (2 * alpha)) / -math.log1p(-p)))


@functools.lru_cache(maxsize=1024)
def fewest_for_share(compare: str, threshold: float, tolerance: float, alpha: float) -> float:
    """The fewest observations that can decide a claim on a share: all of them hits, none, or hits at the
    threshold's rate (in order), whichever ``decide`` answers first on ``share_censored`` itself (a lower bound, as
    for a quantile)."""
    def decides(n: int) -> bool:
        patterns = (np.zeros(n), np.ones(n), np.diff(np.floor(np.arange(n + 1) * threshold)))
        return any(decide(s.low, s.high, compare, threshold, tolerance) != "inconclusive"
                   for s in (share_censored(hits, hits, alpha) for hits in patterns))
    return fewest(decides)


def runs_to_decide(value: float, low: float, high: float, n: int, compare: str, threshold: float,
                   tolerance: float) -> float:
    """Observations a claim may still need: the interval's half-width shrinks about as 1/√n, and a
    verdict needs it below ``decisive_half_width``. As many again as it has while a side is still
    unbounded; inf when nothing is known yet or the value sits on a boundary."""
    if n == 0 or any(math.isnan(v) for v in (value, low, high)) or math.isinf(value):
        return math.inf
    if math.isinf(low) or math.isinf(high):
        return float(max(n, 3))
    half = (high - low) / 2
    gap = decisive_half_width(value, compare, threshold, tolerance)
    if gap <= 0 or half <= 0:
        return math.inf
    return max(1.0, n * ((half / gap) ** 2 - 1))
