"""Ties in the share statistics: a ratio within a margin of 1 is a tie, never a hit.

A share counts the pairs (blocks, points) whose ratio label ÷ baseline is below (above) a threshold. Two runs of
the same setting never give exactly the same number: without a margin a loss-free pair at 0.999 counts as "FEC
faster", so a claim that FEC always costs without loss cannot hold however true (issue 69, item 2). With a margin
m, a ratio r with |r − 1| ≤ m is a **tie**: a threshold that falls inside the tie band [1 − m, 1 + m] moves to the
band's edge (below: 1 − m; above: 1 + m), so no tie is a hit; a threshold outside it (FEC at most half as slow:
0.5; harmed beyond 5 %: 1.05) is unchanged. `ties = "exclude"` leaves the ties out of the share's denominator.

The margin is never 0. A claim states it with its source (`tie_margin`, `tie_margin_source`): the paper's own
where it states one, or the pack's reading of its figures. Otherwise it is the twins' measured spread
(designs/README.md, "Twins"): on this project's 2-core machine, two loss-free runs of the same key differed by
at most 2.7 % (fecq, 10 Mbit/s, 10 ms, 50 kB and 1 MB, quiet machine), so a ratio within that of 1 cannot be
told from a repeat of the same run. That figure was measured on one design, not at each claim's point.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fecbench.inputs.specs import Section

#: The twins' largest loss-free spread measured here (designs/README.md, "Twins"), the margin a claim that
#: states none is judged with, and where it comes from.
TWINS_MARGIN = 0.027
TWINS_SOURCE = ("the twins' measured spread: two loss-free runs of one key differed by at most 2.7 % "
                "(designs/README.md, \"Twins\")")
#: A margin beyond this would call real differences ties.
MAX_MARGIN = 0.5


def read(entry: Section) -> tuple[float, str]:
    """A share claim's (tie_margin, tie_margin_source): what it states, or the twins' spread."""
    margin = entry.get("tie_margin", float, None, max=MAX_MARGIN)
    source = entry.get("tie_margin_source", str, "")
    if margin is None:
        if source.strip():
            raise entry.error("tie_margin_source", "a source without a tie_margin: state the margin it gives")
        return TWINS_MARGIN, TWINS_SOURCE
    if margin <= 0:
        raise entry.error("tie_margin", "a tie margin is never 0: two runs of the same setting differ by their "
                          "timing; state the paper's own or the twins' measured spread (designs/README.md, Twins)")
    if not source.strip():
        raise entry.error("tie_margin_source", "a tie margin needs its source: the paper's own words, or the "
                          "measured spread it comes from")
    return float(margin), source


def margin_of(params: dict[str, Any]) -> float:
    return float(params.get("tie_margin", TWINS_MARGIN))


def below(threshold: float, margin: float) -> float:
    """The cut a hit must be under: a threshold inside the tie band moves to its lower edge."""
    return min(threshold, 1 - margin) if abs(threshold - 1) <= margin else threshold


def above(threshold: float, margin: float) -> float:
    """The cut a hit must be over: a threshold inside the tie band moves to its upper edge."""
    return max(threshold, 1 + margin) if abs(threshold - 1) <= margin else threshold


def is_tie(ratio: np.ndarray, margin: float) -> np.ndarray:
    """Which ratios lie within the margin of 1 (NaN: not a tie)."""
    with np.errstate(invalid="ignore"):
        return np.abs(np.asarray(ratio, float) - 1) <= margin


def text(params: dict[str, Any]) -> str:
    """The page's words for the claim's ties."""
    return f"; a ratio within {100 * margin_of(params):.3g} % of 1 is a tie, never a hit"
