"""The report's opening: plain-language sentences generated from the statistics, before any table.

Downloads (and every workload with a DCT), per label and size: "quic-fec-rs was faster than quic at
12 of 20 design points for 50 kB downloads (median ratio 0.93, 95 % interval [0.88, 0.99]; from 180 of 200
pairs at 20 of 20 points)"; when the interval holds 1, "no clear difference from quic (…; faster at 3 of 4 design
points)", and "slower than" when it lies above 1. Every sentence says what it rests on: the pairs used of the
pairs run, the points with a usable pair of the design's points. One resting on fewer than `MIN_PAIRS` pairs, or
on fewer than all the design's points, says so instead of a ratio ("from 3 of 60 pairs at 1 of 2 points: not
enough to say"). A point is counted faster when its ratio of medians (``ratios.point_ratios``) is below 1; a
point whose ratio is only a bound (timeouts) counts when the bound decides, and the count becomes a range
otherwise. The median ratio is the median over the points (as the headline table), its interval one over the
design points, said so: two order statistics of the points' ratios (``stats.median_order_interval``,
distribution-free; a point whose label median timed out counts at +inf, one whose baseline median did at 0, an
undefined one not at all), none under the 6 points it needs at 95 %. With fewer points, each point's own interval
over its seeds decides instead (none under ``stats.MIN_SEEDS_FOR_INTERVAL`` = 10 seeds: "too few seeds"; README.md,
"Using it", says both minimums), and the label is faster or slower only at
the points whose own interval says so. "Faster" and "slower" are said only when an interval says so; an estimate
at its interval's edge is said to be. Then what was left out: pairs excluded and why, pairs censored by the time
limit.

Messages, per label: the share of pairs (same point and seed) where the label received more data
than the baseline and where it re-buffered less, with the median ratio of data received.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fecbench.analysis import ratios, stats
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


def _num(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.3g}"


def _count(low: int, high: int) -> str:
    return f"{low}" if low == high else f"{low}–{high}"


def downloads(points: pd.DataFrame, pairs: pd.DataFrame, base: str, twins: pd.DataFrame | None = None) -> list[str]:
    """One sentence per label and size of ``ratios.point_ratios``, then one per label on what was left out;
    ``twins`` (``evidence.twin_spreads``): how far a run of the label or the baseline repeats itself, said beside
    the effect."""
    out = []
    what = {"download": "downloads", "upload": "uploads", "reqresp": "request/response sequences",
            "page": "page loads"}
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
        said = _verdict(label, base, f"{format_size(size)} {kind}", group, evidence)
        out.append(said[:-1] + _twins(twins, [label, base], size, _placed(group)) + ".")
    for label, group in pairs.groupby("label", sort=True):
        excluded = group[group["outcome"] == "excluded"]["excluded_why"].value_counts().sort_index()
        censored = int(group["outcome"].isin(ratios.OUTCOMES[1:4]).sum())
        parts = [f"{n} {why}" for why, n in excluded.items()]
        text = (f"{label}: {len(group)} pairs against {base}; excluded: {int(excluded.sum())}"
                + (f" ({', '.join(parts)})" if parts else "")
                + f"; censored at the time limit: {censored}.")
        out.append(text)
    return out


def _verdict(label: str, base: str, what: str, group: pd.DataFrame, evidence: str) -> str:
    """One sentence: faster / slower / no clear difference only as an interval says, else not enough to say."""
    sure, maybe = int((group["ratio_high"] < 1).sum()), int((group["ratio_low"] < 1).sum())
    placed = _placed(group)
    median = float(np.median(placed)) if placed.size else math.nan
    low, high = stats.median_order_interval(placed)
    at = f"{_count(sure, maybe)} of {len(group)} design points"
    if math.isnan(low):   # too few points for an interval over them: each point's own interval over its seeds
        need = stats.fewest_for_median_interval()
        own = "; ".join(f"point {p}: {_num(r)} " + (f"[{_num(lo)}, {_num(hi)}]{_edge(r, lo, hi)}" if not math.isnan(lo)
                                                  else "(too few seeds for an interval)")
                        for p, r, lo, hi in zip(group["point"], group["ratio"], group["ci_low"], group["ci_high"],
                                                strict=True))
        faster, slower = int((group["ci_high"] < 1).sum()), int((group["ci_low"] > 1).sum())
        said = (f"median ratio {_num(median)}; too few design points for an interval over them ({len(group)}, "
                f"it needs {need}); each point's own 95 % interval over its seeds: {own}")
        for word, count in (("faster", faster), ("slower", slower)):
            if count == len(group):
                return (f"{label} was {word} than {base} at {count} of {len(group)} design points for {what} "
                        f"({said}; {evidence}).")
        if group["ci_low"].isna().any():
            return (f"{label} against {base} for {what}: not enough to say ({said}; faster by their own intervals "
                    f"at {faster}, slower at {slower}; {evidence}).")
        return (f"{label}: no clear difference from {base} for {what} ({said}; faster by their own intervals at "
                f"{faster}, slower at {slower}; {evidence}).")
    interval = (f", 95 % interval over the {placed.size} design points [{_num(low)}, {_num(high)}]"
                f"{_edge(median, low, high)}")
    if low <= 1 <= high:   # the interval holds 1: say so, whatever the count
        return (f"{label}: no clear difference from {base} for {what} (median ratio {_num(median)}{interval}; "
                f"faster at {at}; {evidence}).")
    if low > 1:
        return (f"{label} was slower than {base} for {what} (median ratio {_num(median)}{interval}; faster at {at}; "
                f"{evidence}).")
    return f"{label} was faster than {base} at {at} for {what} (median ratio {_num(median)}{interval}; {evidence})."


def _twins(twins: pd.DataFrame | None, labels: list[str], size: int, ratios_: np.ndarray) -> str:
    """The twins' spread beside the effect: the widest of the label's and the baseline's at this size, and whether
    the effect (the median ratio's distance from 1) is smaller."""
    if twins is None or twins.empty or not ratios_.size:
        return ""
    mine = twins[twins["label"].isin(labels) & (twins["size"] == size)]
    if mine.empty:
        return ""
    spread, n = float(mine["spread (90 %)"].max()), int(mine["twins"].sum())
    effect = abs(float(np.median(ratios_)) - 1)
    return (f"; twins (the same key run twice, {n}) differ by up to {spread:.1%} (90 %)"
            + (": the effect is smaller than that, not a finding until it repeats" if effect < spread else ""))


def _edge(value: float, low: float, high: float) -> str:
    """A word when the estimate is one of its interval's ends (few values: the order statistics are the extremes)."""
    return " (the estimate at its interval's edge: few values)" if value in (low, high) else ""


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
