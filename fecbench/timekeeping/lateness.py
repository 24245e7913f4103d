"""Emulation accuracy during a run: the delay element's lateness, summarised and judged.

The delay element counts, per direction, how late each frame left (when it was sent − arrival −
configured delay) in buckets with fixed upper edges (delayline/README.md). The campaign runner
clears the counts when a run starts, so what a link reports at the end of the run is that run's
own accuracy: under load (``--jobs N``, a busy host) it is what tells a trustworthy run from one
whose network was not the configured one. netem keeps no such counts: runs on netem have none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from fecbench.inputs.environment import env_number

#: A frame later than this (ms) was not on the designed network. FECBENCH_LATENESS_BOUND_MS replaces it, e.g.
#: on an emulated machine whose clock is only good to milliseconds.
LATENESS_BOUND_MS = 0.5
#: A direction's p99 is judged only over at least this many frames (then at least 10 lie beyond it); a run with
#: fewer is judged by its worst frame alone: the p99 of a few hundred frames is one of its largest few.
QUANTILE_FRAMES = 1000
#: The most the worst frame's lateness beyond the bound may add to a run, as a share of its wall time (as the
#: endpoints' excess waits, `endpoint_timing.EXCESS_SHARE`; FECBENCH_EXCESS_SHARE replaces both).
WORST_SHARE = 0.01


def bound_ms() -> float:
    return env_bound_ms("FECBENCH_LATENESS_BOUND_MS", LATENESS_BOUND_MS)


def env_bound_ms(name: str, default: float) -> float:
    """A bound in ms from the environment variable `name`, else `default`; a value that is not a positive
    number is the user's error (never silently replaced by the default)."""
    return env_number(name, default, high=float("inf"), expected="a positive number of milliseconds")


def env_share(name: str, default: float) -> float:
    """A share (0 < x < 1) from the environment variable `name`, else `default`; anything else is the user's error."""
    return env_number(name, default, high=1.0, expected="a share of the run's wall time between 0 and 1")


def quantile_us(hist: Sequence[int], edges_us: Sequence[float], max_us: float, q: float) -> float | None:
    """The q-quantile of a lateness histogram, as the upper edge of the bucket it falls in (an upper
    bound, never above the largest value seen); None for an empty histogram."""
    total = sum(hist)
    if total <= 0:
        return None
    rank = math.ceil(q * total)
    seen = 0
    for i, count in enumerate(hist):
        seen += count
        if seen >= rank:
            return min(float(edges_us[i]), max_us) if i < len(edges_us) else max_us
    return max_us


def summary(direction: dict[str, Any] | None, edges_us: Sequence[float] | None,
            wall_ms: float | None = None) -> dict[str, Any] | None:
    """p50/p99/max/mean lateness (µs) of one direction's delay-element counters, the frames counted, and
    ``ok``: over `QUANTILE_FRAMES` frames or more, the p99 within the bound, and over a run of ``wall_ms``, the
    worst frame's lateness beyond the bound within `WORST_SHARE` of it (None: no frames). None when the
    counters hold no histogram (older build, netem)."""
    if not direction or edges_us is None or "late_hist" not in direction:
        return None
    hist = [int(v) for v in direction["late_hist"]]
    frames = sum(hist)
    max_us = float(direction.get("late_max_us", 0.0))
    p99 = quantile_us(hist, edges_us, max_us, 0.99)
    bound_us = bound_ms() * 1000
    worst_excess_ms = max(0.0, max_us - bound_us) / 1000 if frames else None
    share = env_share("FECBENCH_EXCESS_SHARE", WORST_SHARE)
    quantile_ok = frames < QUANTILE_FRAMES or p99 is None or p99 <= bound_us
    worst_ok = wall_ms is None or worst_excess_ms is None or worst_excess_ms <= share * wall_ms
    return {"frames": frames, "p50_us": quantile_us(hist, edges_us, max_us, 0.5), "p99_us": p99,
            "max_us": max_us if frames else None,
            "mean_us": float(direction.get("late_sum_us", 0.0)) / frames if frames else None,
            "bound_ms": bound_ms(), "quantile_frames": QUANTILE_FRAMES, "wall_ms": wall_ms,
            "worst_excess_ms": worst_excess_ms, "worst_limit": share,
            "ok": None if p99 is None else quantile_ok and worst_ok}


def flagged(late: dict[str, Any] | None) -> bool:
    """A direction's lateness flags its run (`summary`'s ``ok`` is False): the `delay-lateness` check of
    `fecbench.timekeeping.checks`, and what `judge` counts."""
    return bool(late) and late.get("ok") is False


def reason(late: dict[str, Any]) -> str:
    """Why a direction's lateness flags its run, with the numbers (`summary`'s ``ok`` is False)."""
    frames, p99_ms = late.get("frames") or 0, (late.get("p99_us") or 0) / 1000
    if "worst_excess_ms" not in late:   # recorded before issue 48: judged by the p99 alone
        return f"delay element p99 lateness {p99_ms:.3g} ms > bound {late['bound_ms']:g} ms"
    parts = []
    if frames >= late["quantile_frames"] and p99_ms > late["bound_ms"]:
        parts.append(f"delay element p99 lateness {p99_ms:.3g} ms over {frames} frames > bound {late['bound_ms']:g} ms")
    wall, worst = late.get("wall_ms"), late.get("worst_excess_ms")
    if wall and worst is not None and worst > late["worst_limit"] * wall:
        parts.append(f"delay element's latest frame {late['max_us'] / 1000:.3g} ms late, {worst:.3g} ms beyond "
                     f"{late['bound_ms']:g} ms: {100 * worst / wall:.2g} % of the run's {wall:.0f} ms > "
                     f"{100 * late['worst_limit']:g} %")
    return "; ".join(parts) or f"delay element p99 lateness {p99_ms:.3g} ms > bound {late['bound_ms']:g} ms"


def from_delay_json(text: Any) -> dict[str, Any] | None:
    """The lateness summary a run recorded in its link statistics (``link_stats.delay_json``), or None
    (netem, a campaign recorded before the delay element counted it, unreadable JSON)."""
    if not isinstance(text, str):
        return None
    try:
        late = (json.loads(text) or {}).get("lateness")
    except (ValueError, AttributeError):
        return None
    return late or None


#: A run is flagged when one of its link schedule's changes was in force more than this (ms) after its
#: scheduled time: a delay and rate change read back in force 0.90 ms late at worst with both cores of this
#: machine busy (topologies/README.md, "Timing"). FECBENCH_SCHEDULE_BOUND_MS replaces it (an emulated machine).
SCHEDULE_BOUND_MS = 2.0


def schedule_bound_ms() -> float:
    return env_bound_ms("FECBENCH_SCHEDULE_BOUND_MS", SCHEDULE_BOUND_MS)


def schedule_summary(events: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """How late a run's link schedule was: each scheduled change's lateness (in force − scheduled, ms), their
    count, median, maximum and the latest one, judged against the bound; None without scheduled changes."""
    late = [((e["applied_s"] - e["scheduled_s"]) * 1e3, e) for e in events
            if e.get("scheduled_s") is not None and e.get("applied_s") is not None]
    if not late:
        return None
    values = sorted(ms for ms, _ in late)
    worst_ms, worst = max(late, key=lambda pair: pair[0])
    bound = schedule_bound_ms()
    return {"events": len(values), "p50_ms": values[(len(values) - 1) // 2], "max_ms": worst_ms,
            "worst": f"{worst['kind']} on {worst['link']} {worst['direction']} at {worst['scheduled_s']:g} s",
            "bound_ms": bound, "ok": worst_ms <= bound}


# --- how runs were judged, in words: `fecbench status`, the report and --jobs auto's calibration say the same ---

def judge(directions: Iterable[tuple[Hashable, dict[str, Any] | None]]) -> dict[str, Any]:
    """How a set of runs' delay elements were judged: `directions` are (run key, one direction's `summary`) pairs.
    Counts the runs measured and flagged (by the p99 over `QUANTILE_FRAMES` frames or more, by the latest frame),
    and the largest p99 (with its frames) where the p99 was judged and where too few frames left it unjudged;
    the bound, frame count and share the runs were judged by (the largest recorded). JSON-able (a calibration
    records it); `criterion_text` says it."""
    runs: set[Hashable] = set()
    by_p99: set[Hashable] = set()
    by_worst: set[Hashable] = set()
    judged_runs: set[Hashable] = set()
    few_runs: set[Hashable] = set()
    judged_max: tuple[float, int] | None = None
    few_max: tuple[float, int] | None = None
    flagged_max: tuple[float, int] | None = None
    bounds, frame_counts, limits = [], [], []
    for key, late in directions:
        if not late or late.get("p99_us") is None or late.get("bound_ms") is None:
            continue
        runs.add(key)
        p99 = (float(late["p99_us"]) / 1000, int(late.get("frames") or 0))
        bound = float(late["bound_ms"])
        bounds.append(bound)
        needed = int(late.get("quantile_frames") or QUANTILE_FRAMES) if "worst_excess_ms" in late else 0
        frame_counts.append(needed)
        if late.get("worst_limit") is not None:
            limits.append(float(late["worst_limit"]))
        if p99[1] >= needed:
            judged_runs.add(key)
            judged_max = max(judged_max or p99, p99)
        else:
            few_runs.add(key)
            few_max = max(few_max or p99, p99)
        if not flagged(late):
            continue
        wall, excess = late.get("wall_ms"), late.get("worst_excess_ms")
        if wall and excess is not None and excess > float(late.get("worst_limit") or 0) * wall:
            by_worst.add(key)
        if (p99[1] >= needed and p99[0] > bound) or key not in by_worst:
            by_p99.add(key)
            flagged_max = max(flagged_max or p99, p99)
    return {"runs": len(runs), "flagged": len(by_p99 | by_worst), "flagged_p99": len(by_p99),
            "flagged_worst": len(by_worst - by_p99), "bound_ms": max(bounds, default=None),
            "quantile_frames": max(frame_counts, default=QUANTILE_FRAMES), "worst_limit": max(limits, default=None),
            "judged_runs": len(judged_runs), "judged_max": judged_max, "few_runs": len(few_runs),
            "few_max": few_max, "flagged_max": flagged_max}


def criterion_text(judged: dict[str, Any] | None) -> str:
    """`judge`'s runs in words: how many were flagged of how many, by which criterion (its n, its bound), the
    largest p99 where it was judged, and the largest where too few frames left it unjudged (and why)."""
    if not judged or not judged.get("runs"):
        return "delay elements: no lateness measured (netem counts none)"
    bound, needed, limit = judged["bound_ms"], judged["quantile_frames"], judged.get("worst_limit")
    rule = f"p99 lateness ≤ {bound:g} ms" + (f" where a direction sent n ≥ {needed:,} frames" if needed else "")
    if limit is not None:
        rule += f"; latest frame ≤ {100 * limit:g} % of the run's wall time beyond {bound:g} ms"
    parts = [f"delay elements: {judged['flagged']} of {judged['runs']} run(s) flagged ({rule})"]
    if judged["flagged_p99"]:
        p99, frames = judged["flagged_max"]
        parts.append(f"{judged['flagged_p99']} by the p99 (worst {p99:.3g} ms, n = {frames:,})")
    if judged["flagged_worst"]:
        parts.append(f"{judged['flagged_worst']} by the latest frame")
    if judged["judged_max"] is not None:
        p99, frames = judged["judged_max"]
        parts.append(f"p99 at most {p99:.3g} ms where judged (n ≥ {needed:,})" if needed
                     else f"p99 at most {p99:.3g} ms")
    if judged["few_max"] is not None:
        p99, frames = judged["few_max"]
        how = "judged by its latest frame alone" if limit is not None else "not judged"
        parts.append(f"{judged['few_runs']} run(s) with a direction of too few frames for the p99 criterion "
                     f"(n < {needed:,}; {how}): p99 up to {p99:.3g} ms (n = {frames:,})")
    return "; ".join(parts)


#: The delay element's and the shaper qdiscs' counters that only grow: a run's window reports them since its start.
DELAY_COUNTERS = ("rx", "tx", "drop_egress", "drop_queue", "drop_link", "errors", "rx_errors", "flushed", "gso")
QDISC_COUNTERS = ("bytes", "packets", "drops", "overlimits")


def counters_since(now: dict[str, Any], start: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """`now` with the counters `keys` less what they were at `start`."""
    out = dict(now)
    for key in keys:
        if isinstance(now.get(key), int) and isinstance(start.get(key), int) and now[key] >= start[key]:
            out[key] = now[key] - start[key]
    return out


def delay_since(delay: dict[str, Any] | None, start: dict[str, Any] | None) -> dict[str, Any] | None:
    """A delay element's stats with its counters since `start` (the stats when the window began)."""
    if not delay or not start:
        return delay
    # queue_at_start: frames held when the window began, sent or dropped within it (rx + it balances the rest).
    return {**delay, **{side: {**counters_since(delay[side], start.get(side) or {}, DELAY_COUNTERS),
                               "queue_at_start": (start.get(side) or {}).get("queue", 0)}
                        for side in ("ab", "ba") if isinstance(delay.get(side), dict)}}
