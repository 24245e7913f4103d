"""A comparison's statistics judged against its margin (`fecbench compare --margin`, issues 60 and 68): the
margin and its band, each metric's direction, the verdict, a shift inside the margin, a change at the margin, and
the error level the statistics of one comparison share. Pure: ``studies.campaign_change`` computes the numbers.

The band is 1 ± margin for a ratio; for a difference ± margin × the median of A's values (a relative margin) or
± the margin itself (an absolute one, in the metric's unit). A statistic's interval inside the band (edges
included): **same within margin**, and where that interval excludes no change (1, or 0 for a difference) the
shift is said with it ("same within margin, shifted +2.6 % [1.9, 3.3]": inside the margin, yet moved); wholly
above or below the band: **worse** or **better** by the metric's direction, **larger** or **smaller** for a metric
without one; otherwise **at the margin** when the interval, no wider than the band, holds an edge of it and the
change lies within a quarter of the margin of that edge (more pairs would narrow the interval around the edge,
not off it), else **not enough data**; fewer than ``MIN_PAIRS`` pairs: no interval (a class or the tail is then
**too few pairs**, not judged).

Directions. A metric a user feels (a duration, late or corrupt messages) is worse larger; delivered bytes and
recovered packets (on the pair's shared losses) are better larger; what a stack spends or does (repair symbols,
packets and bytes sent, retransmissions, declared losses, congestion events, its window) has no direction: fewer
repair symbols are not better by themselves (a weaker code sends fewer), so such a metric reads larger or smaller.

One error level. Every statistic a comparison judges (each group's median, each class and tail with at least
``MIN_PAIRS`` pairs) shares the error 1 − level: each interval at 1 − (1 − level)/m for m of them (Bonferroni), so
an unchanged build reads "worse" or "better" anywhere with probability at most 1 − level (at the intervals'
nominal levels: a bootstrap's on few pairs is below it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fecbench.analysis import stats
from fecbench.inputs.errors import UserError, did_you_mean
from fecbench.records import db as dbmod

#: The metrics a comparison may use: the typed metric columns; INTEGER ones are counts (a difference).
METRICS = dict(dbmod.METRIC_COLUMNS)
#: Every metric's direction (see above): True, a larger value is worse; False, better; None, no direction.
LARGER_IS_WORSE: dict[str, bool | None] = {
    "dct_ms": True, "handshake_ms": True, "client_wall_ms": True, "rtt_ms": True, "rebuffering_ms": True,
    "messages_late": True, "messages_corrupt": True, "bytes_app": False, "recovered": False,
    "repair_sent": None, "packets_sent": None, "bytes_sent": None, "retransmitted_bytes": None, "lost": None,
    "congestion_events": None, "cwnd_final": None}
#: Fewer pairs (or runs per side) than this give no interval.
MIN_PAIRS = 3
SAME, NOT_ENOUGH, AT_MARGIN, TOO_FEW = "same within margin", "not enough data", "at the margin", "too few pairs"
#: A class or tail whose interval excludes no change without deciding against the margin: it moved, by how much is
#: not known yet. Its group is undecided (exit 3), not left to its median: a regression confined to the lossy runs
#: shows there first (a 10 % slower recovery: 1.10 [1.004, 1.21] with 14 lossy pairs, every run's median 1.00).
MOVED_UNSIZED = "moved, size undecided"
MOVED = ("worse", "better", "larger", "smaller")
ALL = "all runs"                                 # the statistic of all a group's pairs: its median


@dataclass(frozen=True)
class Margin:
    """The margin a change must stay within: relative (``5%``) or absolute (``3``: counts only)."""

    value: float
    relative: bool

    @classmethod
    def parse(cls, text: str) -> Margin:
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(%?)\s*", text or "")
        if not match:
            raise UserError(f"--margin {text!r}: a share such as 5% (or, for a count metric, a number such as 3)")
        value, relative = float(match.group(1)), bool(match.group(2))
        if relative and not 0 < value < 100:
            raise UserError(f"--margin {text!r}: a share between 0 and 100 %")
        return cls(value / 100 if relative else value, relative)

    def __str__(self) -> str:
        return f"{self.value * 100:g} %" if self.relative else f"{self.value:g}"


def kind_of(metric: str) -> str:
    """``ratio`` for a real-valued metric, ``difference`` for a count; a UserError for an unknown metric."""
    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r}{did_you_mean(metric, list(METRICS))} "
                        f"(allowed: {', '.join(METRICS)})")
    return "difference" if METRICS[metric] == "INTEGER" else "ratio"


def direction(metric: str) -> str:
    worse = LARGER_IS_WORSE.get(metric)
    return ("larger is worse" if worse else "larger is better") if worse is not None else "no direction"


def band(kind: str, margin: Margin, reference: float = math.nan) -> tuple[float, float]:
    """The values of the change that count as the same: 1 ± margin for a ratio; for a difference ± margin ×
    |reference| (relative) or ± margin (absolute)."""
    if kind == "ratio":
        if not margin.relative:
            raise UserError(f"--margin {margin}: a ratio's margin is a share, e.g. 5%")
        return 1.0 - margin.value, 1.0 + margin.value
    width = margin.value * abs(reference) if margin.relative else margin.value
    return -width, width


def excludes_no_change(interval: stats.Bounds, kind: str) -> bool:
    """The interval leaves out no change (a ratio of 1, a difference of 0)."""
    none = 1.0 if kind == "ratio" else 0.0
    return not any(math.isnan(x) for x in interval) and (interval[0] > none or interval[1] < none)


def verdict(interval: stats.Bounds, limits: tuple[float, float], metric: str) -> str:
    """same within margin, worse/better (larger/smaller without a direction) or not enough data."""
    low, high = interval
    if any(math.isnan(x) for x in (low, high, *limits)):
        return NOT_ENOUGH
    if limits[0] <= low and high <= limits[1]:
        return SAME
    if low > limits[1] or high < limits[0]:
        larger = low > limits[1]
        worse = LARGER_IS_WORSE.get(metric)
        if worse is None:
            return "larger" if larger else "smaller"
        return "worse" if larger == worse else "better"
    return NOT_ENOUGH


def _scale(log: bool) -> Callable[[float], float]:
    return (lambda x: math.log(x)) if log else (lambda x: x)


def at_margin(change: stats.Bounds, interval: stats.Bounds, limits: tuple[float, float], log: bool) -> bool:
    """The interval, no wider than the band, holds an edge of it, and the (exact) change lies within a quarter of
    the margin of that edge."""
    values = [*change, *interval, *limits]
    if change[0] != change[1] or any(not math.isfinite(x) for x in values) or (log and min(values) <= 0):
        return False
    f = _scale(log)
    mid, low, high, lo_band, hi_band = (f(x) for x in (change[0], *interval, *limits))
    quarter = (hi_band - lo_band) / 8
    narrow = high - low <= hi_band - lo_band      # no wider than the band: more pairs would not move it far
    return narrow and any(low < edge < high and abs(mid - edge) <= quarter for edge in (lo_band, hi_band))


def more_needed(n: int, change: stats.Bounds, interval: stats.Bounds, limits: tuple[float, float],
                log: bool) -> int | None:
    """About how many more pairs (or runs per side) an interval of today's spread needs to fall inside the band
    or wholly outside it (its width shrinks as 1/sqrt(n)); None when no number of them would say (the estimate
    on the band's edge, a censored end)."""
    values = [*interval, change[0], *limits]
    if change[0] != change[1] or any(not math.isfinite(x) for x in values) or (log and min(values) <= 0):
        return None
    f = np.log if log else (lambda x: x)
    low, high, mid, lo_band, hi_band = (float(f(x)) for x in (interval[0], interval[1], change[0], *limits))
    below, above = max(mid - low, 1e-12), max(high - mid, 1e-12)
    if lo_band <= mid <= hi_band:
        shrink = min((mid - lo_band) / below, (hi_band - mid) / above)
    elif mid > hi_band:
        shrink = (mid - hi_band) / below
    else:
        shrink = (lo_band - mid) / above
    if shrink <= 0:
        return None
    return max(1, math.ceil(n / shrink ** 2 - n))


def shift_text(change: stats.Bounds, interval: stats.Bounds, kind: str) -> str:
    """``shifted +2.6 % [1.9, 3.3]`` (a ratio's change in %) or ``shifted +1.5 [0.5, 2.5]`` (a difference) when
    the interval excludes no change; empty otherwise."""
    low, high = interval
    if change[0] != change[1] or any(math.isnan(x) for x in (*change, low, high)):
        return ""
    none = 1.0 if kind == "ratio" else 0.0
    if low <= none <= high:
        return ""
    if kind == "ratio":
        return f"shifted {(change[0] - 1) * 100:+.2g} % [{(low - 1) * 100:.2g}, {(high - 1) * 100:.2g}]"
    return f"shifted {change[0]:+.3g} [{low:.3g}, {high:.3g}]"


def family_level(level: float, judged: int) -> float:
    """Each interval's level when ``judged`` statistics share the error 1 − ``level`` (Bonferroni)."""
    return 1 - (1 - level) / max(judged, 1)


def number(x: float) -> float | str | None:
    """A bound as JSON gives it: None for NaN, "inf" for infinity."""
    return None if math.isnan(x) else ("inf" if math.isinf(x) else float(x))


@dataclass
class Statistic:
    """One statistic of a group (all its pairs, a class of them, its tail) or of a label's groups pooled."""

    name: str                                  # "all runs", a class's title, "tail (worst fifth)"
    estimand: str                              # "median ratio", "geometric-mean ratio", ...
    n: int = 0
    change: stats.Bounds = stats.NAN_BOUNDS
    interval: stats.Bounds = stats.NAN_BOUNDS
    band: tuple[float, float] = (math.nan, math.nan)
    reference: float = math.nan                # A's median over its pairs: a relative margin's scale for a count
    verdict: str = TOO_FEW
    shift: str = ""
    #: Fills ``interval`` (and, where it rests on the level, ``change``) at a level; None: nothing to compute.
    compute: Callable[[float], None] | None = field(default=None, repr=False, compare=False)

    @property
    def judged(self) -> bool:
        return self.n >= MIN_PAIRS and self.compute is not None

    def judge(self, kind: str, margin: Margin, metric: str) -> None:
        """The band, the verdict and any shift, from the interval."""
        self.band = band(kind, margin, self.reference)
        if not self.judged and self.name != ALL:
            self.verdict = TOO_FEW
            return
        self.verdict = verdict(self.interval, self.band, metric)
        if self.verdict == NOT_ENOUGH and at_margin(self.change, self.interval, self.band, log=kind == "ratio"):
            self.verdict = AT_MARGIN
        if self.verdict in (NOT_ENOUGH, AT_MARGIN) and self.name != ALL and excludes_no_change(self.interval, kind):
            self.verdict = MOVED_UNSIZED
        self.shift = shift_text(self.change, self.interval, kind) if self.verdict == SAME else ""

    @property
    def outcome(self) -> str:
        return self.verdict + (f", {self.shift}" if self.shift else "")

    def interval_text(self) -> str:
        if any(math.isnan(x) for x in self.interval):
            return "–"
        return f"[{stats.describe((self.interval[0],) * 2, 4)}, {stats.describe((self.interval[1],) * 2, 4)}]"

    def text(self) -> str:
        """``lossy runs (losses declared): geometric-mean ratio 2 [1.6, 2.4] worse``."""
        return f"{self.name}: {self.estimand} {stats.describe(self.change, 4)} {self.interval_text()} {self.outcome}"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "estimand": self.estimand, "n": self.n, "judged": self.judged,
                "change": [number(x) for x in self.change], "interval": [number(x) for x in self.interval],
                "band": [number(x) for x in self.band], "verdict": self.verdict, "shift": self.shift or None}

