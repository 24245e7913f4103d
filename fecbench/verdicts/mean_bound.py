"""Means: judged from below with no upper bound (``mean_above``), or restricted to a cap and judged both ways
(``restricted_mean``).

A claim that an average is *above* a threshold needs only a lower bound, and a lower bound for a nonnegative mean
needs no bound on the values (a claim that it is below one does: reproduce/README.md, "Averages"). The capital of bets
that the mean is above m, Kₜ(m) = ∏ (1 + λᵢ(xᵢ − m)) with a predictable stake 0 ≤ λᵢ ≤ MEAN_STAKE ÷ m, is a nonnegative
supermartingale whenever the true mean is ≤ m (each factor ≥ 1 − MEAN_STAKE > 0 for xᵢ ≥ 0), so by Ville's inequality
it ever reaches 1/α with probability ≤ α: the means it excludes are a lower confidence bound valid at every look
(Waudby-Smith & Ramdas, JRSSB 2024, the betting CS, here one-sided and for unbounded nonnegative draws).

A mean *below* a threshold has no such bound within a budget (a few runs at the time limit can carry it), so a claim
on one judges a **restricted mean**, E[min(X, c)] with a cap c the pack fixes before any run: its values lie in
[0, c], and a betting CS for a bounded mean bounds it from both sides (the same capital on min(X, c) ÷ c and on its
complement, each side at α/2). What it costs is the cap's distance: a bet that the mean is below m risks the draws
at c, so its stake is at most ~1 ÷ (c − m), and a cap far above the data decides slowly (reproduce/README.md,
"Averages", measured there).
"""

from __future__ import annotations

import math

import numpy as np

from fecbench.verdicts import sequential as sq
from fecbench.verdicts.sequential import Sequence

#: A bet that a nonnegative mean is above m stakes at most this share of the capital (``mean_lower``).
MEAN_STAKE = 0.5
_MEAN_STEPS = 40    # bisection steps of ``mean_lower``


def mean_capital(x: np.ndarray, m: float, level: float) -> float:
    """max over prefixes t of log Kₜ(m), Kₜ(m) = ∏_{i ≤ t} (1 + min(λ̇ᵢ, MEAN_STAKE/m)(xᵢ − m)) for draws xᵢ ≥ 0: bets
    that their mean is above m. λ̇ᵢ is Waudby-Smith & Ramdas's plug-in bet (``sequential.plug_in_bets``' form) on the
    scale of the earlier draws only (variance about their running mean, with a prior variance of the earlier mean
    squared: no unit assumed); no bet before the second draw. Every factor is ≥ 1 − MEAN_STAKE > 0 and nonincreasing
    in m (for x ≥ 0), so Kₜ is a nonnegative supermartingale when the mean is ≤ m (no upper bound on the draws
    needed)."""
    t = np.arange(1, x.size + 1)
    total = np.cumsum(x)
    mean_before = np.r_[0.0, total[:-1] / t[:-1]]
    squares = np.cumsum((x - mean_before) ** 2)
    variance_before = np.r_[0.0, (mean_before[1:] ** 2 + squares[:-1]) / t[:-1]]
    with np.errstate(divide="ignore", invalid="ignore"):
        bets = np.where(variance_before > 0, np.sqrt(2 * math.log(1 / level)
                                                     / (variance_before * t * np.log1p(t))), 0.0)
        stake = np.minimum(bets, MEAN_STAKE / m) if m > 0 else bets
    return float(np.max(np.cumsum(np.log1p(stake * (x - m))))) if x.size else 0.0


def mean_lower(x: np.ndarray, level: float) -> float:
    """A lower confidence bound for the mean of nonnegative draws, valid at every prefix at once (``mean_capital``:
    the capital is nonincreasing in m, so the excluded means are [0, L): L by bisection, its lower end kept). No
    upper bound on the draws is needed, as a bound on a mean *above* a threshold never needs one (an upper bound
    does: reproduce/README.md, "Averages"). 0 with no draws."""
    x = np.asarray(x, float)
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0):
        return 0.0
    limit = math.log(1 / level)
    high = float(np.max(x))
    if mean_capital(x, high, level) >= limit:
        return high
    return _largest_excluded(lambda m: mean_capital(x, m, level) >= limit, high)


def _largest_excluded(excluded, high: float) -> float:
    """The lower end of the boundary between the means a capital excludes ([0, L): ``excluded`` is true below L,
    the capital being nonincreasing in m) and those it keeps, by bisection of [0, ``high``]."""
    low = 0.0
    for _ in range(_MEAN_STEPS):
        mid = (low + high) / 2
        low, high = (mid, high) if excluded(mid) else (low, mid)
    return low


def mean_above(lo: np.ndarray, alpha: float) -> Sequence:
    """A one-sided confidence sequence for a mean of nonnegative values known from below by ``lo`` (a censored value's
    lower end): the lower bound at level α (``mean_lower``), no upper bound (+∞). It can show a mean above a threshold
    and never below one."""
    lo = np.asarray(lo, float)
    if lo.size == 0:
        return Sequence(math.nan, math.nan, math.nan, 0)
    return Sequence(float(np.mean(lo)), mean_lower(lo, alpha), math.inf, int(lo.size))


def bounded_lower(x: np.ndarray, level: float) -> float:
    """A lower confidence bound for the mean of draws in [0, 1], valid at every prefix at once: the largest m whose
    betting capital (``sequential.log_capital``: Waudby-Smith & Ramdas's plug-in bets truncated at c/m, c from
    ``sequential.truncations``, all the capital on them) reached 1/level at some prefix. The capital is nonincreasing
    in m, so the excluded means are [0, L): L by bisection. 0 with no draws."""
    x = np.asarray(x, float)
    if x.size == 0:
        return 0.0
    bets, caps, limit = sq.plug_in_bets(x, level), sq.truncations(x), math.log(1 / level)
    return _largest_excluded(lambda m: float(np.max(sq.log_capital(x, np.array([m]), bets, caps))) >= limit, 1.0)


def restricted_mean(lo: np.ndarray, hi: np.ndarray, cap: float, alpha: float) -> Sequence:
    """A confidence sequence for the restricted mean E[min(X, cap)] of values known between ``lo`` and ``hi`` (a
    censored value's ends; ±∞ allowed): the lower bound from min(lo, cap) ÷ cap, the upper from the complement of
    min(hi, cap) ÷ cap, each side at α/2 (``bounded_lower``), scaled back. Its value is the mean of the capped
    midpoints (a value unbounded above counts as the cap)."""
    lo = np.clip(np.asarray(lo, float), 0.0, cap) / cap
    hi = np.clip(np.asarray(hi, float), 0.0, cap) / cap
    if lo.size == 0:
        return Sequence(math.nan, math.nan, math.nan, 0)
    value = float(cap * np.mean((lo + hi) / 2))
    return sq.prefix_sequence(value, lo.size, lambda n: (cap * bounded_lower(lo[:n], alpha / 2),
                                                         cap * (1 - bounded_lower(1 - hi[:n], alpha / 2))))
