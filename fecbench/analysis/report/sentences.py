"""The report's opening: plain-language sentences generated from the statistics, before any table.

Downloads (and every workload with a DCT), per label and size: "quic-fec-rs was faster than quic at
12 of 20 design points for 50 kB downloads (median ratio 0.93, 95 % interval [0.88, 0.99]; from 180 of 200
pairs at 20 of 20 points)"; when the interval holds 1, "no clear difference from quic (…; faster at 3 of 4 design
points)", and "slower than" when it lies above 1. Every sentence says what it rests on: the pairs used of the
pairs run, the points with a usable pair of the design's points. One resting on fewer than `MIN_PAIRS` pairs, or
on fewer than all the design's points, says so instead of a ratio ("from 3 of 60 pairs at 1 of 2 points: not
enough to say"). A point is counted faster when its ratio of medians (``ratios.point_ratios``) is below 1; a
point whose ratio is only a bound (timeouts) counts when the bound decides, and the count becomes a range
otherwise. The median ratio is the median over the points (as the headline table), its interval a percentile
bootstrap over the points (a point whose label median timed out counts at +inf, one whose baseline median did at
0, an undefined one not at all), seeded: the same database gives the same sentence; with fewer than 3 points,
each point's ratio with its bootstrap interval over its seeds instead. Then what was left out: pairs excluded
and why, pairs censored by the time limit.

Messages, per label: the share of pairs (same point and seed) where the label received more data
than the baseline and where it re-buffered less, with the median ratio of data received.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fecbench.analysis import ratios
from fecbench.analysis.figures.style import format_size

N_BOOT = 2000
#: A headline needs at least this many usable pairs (both runs finished or censored) to say more than that it
#: cannot: a ratio of medians over fewer is one or two runs' luck.
MIN_PAIRS = 10


def _placed(points: pd.DataFrame) -> np.ndarray:
    """Per-point ratios with censored ones placed (at least → +inf, at most → 0, undefined dropped)."""
    exact = points["ratio"].to_numpy(float)
    state = points["state"].to_numpy(object)
    out = np.where(state == "at least", np.inf, np.where(state == "at most", 0.0, exact))
    return out[~np.isnan(out)]


def _interval(values: np.ndarray, seed: int) -> tuple[float, float]:
    if values.size < 3:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    medians = np.median(values[rng.integers(0, values.size, (N_BOOT, values.size))], axis=1)
    low, high = np.quantile(medians, [0.025, 0.975], method="inverted_cdf")
    return float(low), float(high)


def _num(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.3g}"


def _count(low: int, high: int) -> str:
    return f"{low}" if low == high else f"{low}–{high}"


def downloads(points: pd.DataFrame, pairs: pd.DataFrame, base: str, seed: int) -> list[str]:
    """One sentence per label and size of ``ratios.point_ratios``, then one per label on what was left out."""
    out = []
    what = {"download": "downloads", "upload": "uploads", "reqresp": "request/response sequences"}
    for (label, size), every in points.groupby(["label", "size"], sort=True):
        group = every[every["seeds"] > 0]
        kind = what.get(str(every["workload"].iloc[0]), "transfers")
        here = pairs[(pairs["label"] == label) & (pairs["size"] == size)]
        used = int((here["outcome"] != "excluded").sum())
        evidence = f"from {used} of {len(here)} pairs at {len(group)} of {len(every)} design points"
        short = [why for why, bad in ((f"fewer than {MIN_PAIRS} usable pairs", used < MIN_PAIRS),
                                      (f"{len(every) - len(group)} of the design's points without a usable pair",
                                       len(group) < len(every))) if bad]
        if short:
            out.append(f"{label} against {base} for {format_size(size)} {kind}: {evidence}: not enough to say "
                       f"({'; '.join(short)}; what was left out and why: below).")
            continue
        sure = int((group["ratio_high"] < 1).sum())
        maybe = int((group["ratio_low"] < 1).sum())
        placed = _placed(group)
        median = float(np.median(placed)) if placed.size else math.nan
        low, high = _interval(placed, seed)
        if math.isnan(low) and len(group) < 3:   # too few points for an interval over them: each point's own
            interval = "; " + ", ".join(f"point {p}: {_num(r)} [{_num(lo)}, {_num(hi)}]" for p, r, lo, hi in zip(
                group["point"], group["ratio"], group["ci_low"], group["ci_high"], strict=True))
        else:
            interval = f", 95 % interval [{_num(low)}, {_num(high)}]" if not math.isnan(low) else ""
        at = f"{_count(sure, maybe)} of {len(group)} design points"
        if not math.isnan(low) and low <= 1 <= high:   # the interval holds 1: say so, whatever the count
            out.append(f"{label}: no clear difference from {base} for {format_size(size)} {kind} (median ratio "
                       f"{_num(median)}{interval}; faster at {at}; {evidence}).")
        elif not math.isnan(low) and low > 1:
            out.append(f"{label} was slower than {base} for {format_size(size)} {kind} (median ratio "
                       f"{_num(median)}{interval}; faster at {at}; {evidence}).")
        else:
            out.append(f"{label} was faster than {base} at {at} for {format_size(size)} {kind} (median ratio "
                       f"{_num(median)}{interval}; {evidence}).")
    for label, group in pairs.groupby("label", sort=True):
        excluded = group[group["outcome"] == "excluded"]["excluded_why"].value_counts().sort_index()
        censored = int(group["outcome"].isin(ratios.OUTCOMES[1:4]).sum())
        parts = [f"{n} {why}" for why, n in excluded.items()]
        text = (f"{label}: {len(group)} pairs against {base}; excluded: {int(excluded.sum())}"
                + (f" ({', '.join(parts)})" if parts else "")
                + f"; censored at the time limit: {censored}.")
        out.append(text)
    return out


def messages(frame: pd.DataFrame, base: str | None) -> list[str]:
    """Per label of a messages campaign against ``base``: more data received, less re-buffering."""
    runs = frame[frame["workload"] == "messages"]
    if base is None or base not in set(runs["label"]) or runs["label"].nunique() < 2:
        return []
    received = ratios.pairs(runs, baseline=base, by=["point", "rep"], metric="bytes_app")
    rebuffer = ratios.pairs(runs, baseline=base, by=["point", "rep"], metric="rebuffering_ms")
    out = []
    for label in sorted(set(received["label"])):
        mine = received[(received["label"] == label) & (received["outcome"] == "finished")]
        late = rebuffer[(rebuffer["label"] == label) & (rebuffer["outcome"] == "finished")]
        if mine.empty:
            continue
        more = int((mine["value"] > mine["baseline_value"]).sum())
        less = int((late["value"] < late["baseline_value"]).sum())
        excluded = int((received["label"] == label).sum() - len(mine))
        out.append(f"{label} received more data than {base} in {more} of {len(mine)} pairs (median ratio "
                   f"{_num(float(mine['ratio'].median()))}) and re-buffered less in {less} of {len(late)}; "
                   f"{excluded} pairs excluded.")
    return out
