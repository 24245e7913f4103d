"""How a page's verdicts share its error level: family-wise (every verdict at α / m, Bonferroni: the probability
that *any* verdict is false ≤ α) or false-discovery (the expected share of false verdicts among those shown ≤ α).

The false-discovery rule works on each claim's **anytime p-value**: the smallest level at which its confidence
sequence decides it (holds, fails or at the threshold). The sequences are nested in their level (a smaller level,
a wider interval) and each covers the truth at every look with probability ≥ 1 − level, so a decision at a level
that is wrong happens with probability ≤ that level, whenever the session stopped: the p-value is valid under
optional stopping. The claims share runs, so their p-values are dependent in unknown ways; Benjamini–Yekutieli's
step-up (Ann. Stat. 2001) controls the false-discovery rate under any dependence: with m verdicts and the p-values
sorted, the k smallest are decided when p₍ₖ₎ ≤ k α / (m H_m), H_m = 1 + ½ + … + 1/m. e-BH (Wang & Ramdas 2022)
would need each claim's e-process; ours are intervals built by interval arithmetic over cells and running
intersections, whose level-α decisions give p-values, not e-values (1/p is not an e-value), so the step-up is BY's.
It helps a page where many claims decide (k > H_m: a 42-claim page gains from its fifth decision on); the
family-wise rule is the default and the page names the one it used."""

from __future__ import annotations

import math
from collections.abc import Callable

#: The page's error rules: the option's values.
FAMILY_WISE, FALSE_DISCOVERY = "fwer", "fdr"
RULES = (FAMILY_WISE, FALSE_DISCOVERY)
#: Bisection steps on log(level) between the smallest and the largest level a claim could be judged at.
_STEPS = 12


def harmonic(m: int) -> float:
    return sum(1 / i for i in range(1, m + 1))


def smallest_level(m: int, alpha: float) -> float:
    """The false-discovery rule's level with one decision: α / (m H_m), the least any verdict is judged at."""
    return alpha / (max(1, m) * harmonic(max(1, m)))


def anytime_p(decides: Callable[[float], bool], floor: float, ceiling: float) -> float:
    """The smallest level in [floor, ceiling] at which ``decides(level)`` (a confidence sequence at that level
    decides the claim), by bisection on log(level): ``floor`` when it decides there already (no finer value is
    needed), 1 when it does not decide even at ``ceiling``. Monotone because the sequences are nested."""
    if not decides(ceiling):
        return 1.0
    if decides(floor):
        return floor
    low, high = math.log(floor), math.log(ceiling)
    for _ in range(_STEPS):
        mid = (low + high) / 2
        low, high = (low, mid) if decides(math.exp(mid)) else (mid, high)
    return math.exp(high)


def step_up(p_values: list[float], m: int, alpha: float) -> tuple[int, float]:
    """Benjamini–Yekutieli over ``m`` verdicts (``p_values`` of those with data; the others count in m at 1): the
    number decided and the level each verdict is judged at, k α / (m H_m) with k that number (at least one:
    with none decided, the level of a first decision)."""
    ordered = sorted(p_values)
    level = smallest_level(m, alpha)
    decided = max((k for k, p in enumerate(ordered, start=1) if p <= k * level), default=0)
    return decided, max(1, decided) * level


def level_text(rule: str, alpha: float, m: int, level: float, decided: int = 0) -> str:
    """The page's one statement of its error level, for the rule it used."""
    if rule == FALSE_DISCOVERY:
        return (f"The expected share of false verdicts among those this page shows (holds, fails or at the threshold "
                f"against the truth) is at most {100 * alpha:g} % (false-discovery rate, Benjamini–Yekutieli over "
                f"the {m} verdict(s) it can show, valid whatever their dependence): each claim's anytime p-value, the "
                f"smallest level at which its confidence sequence decides it, against k·α / (m·H_m); {decided} "
                f"decided, so each "
                f"interval at level {100 * (1 - level):.4g} %.")
    return (f"The probability that any verdict on this page is false (holds or fails against the truth), at any "
            f"look, is at most {100 * alpha:g} %: α = {alpha:g} split evenly over the {m} verdict(s) it can show (a "
            f"claim not runnable here shows none), each interval at level {100 * (1 - level):.3g} %.")
