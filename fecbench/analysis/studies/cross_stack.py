"""Two FEC stacks' findings side by side (``designs/cross-stack.toml``: fecq and XQUIC).

A result about FEC may be a property of FEC or of the stack that implements it. So each stack's FEC
label is compared with **its own no-FEC twin** first (``fecbench.analysis.baselines.fec_twin``, the
report's rule: the label of the same implementation without FEC whose every other argument, multipath and
paths included, is the same) on the same points and loss seeds (common random numbers), and only then are
the stacks' ratios compared, code family against code family (RS ↔ RS, XOR ↔ XOR: ``baselines.family``
reads each stack's spelling, fecq ``rs:30,20``, XQUIC ``rs``) on the same multipath setting:

- ``twins(runs)``: FEC label → its no-FEC twin;
- ``stack_points(runs)``: per twin pair, design point and size, the ratio of median DCTs FEC ÷ no FEC
  with its bootstrap interval (``fecbench.ratios.point_ratios``: timeouts censored);
- ``matches(runs)``: the pairs of FEC labels of two implementations the table compares (same family,
  same multipath setting);
- ``side_by_side(runs)``: one row per point, size and matched pair: each
  stack's ratio and interval; the ratio of the two ratios (stack A's ÷ stack B's) with a bootstrap
  interval over the seeds where all four runs finished (the four resampled together); each stack's
  effect, from its interval and a tolerance (default 2 %): ``faster`` (interval below 1 − tol),
  ``slower`` (above 1 + tol), ``negligible`` (inside 1 ± tol), ``no clear effect`` (none of these:
  holds 1, or straddles a bound), ``not enough to say`` (no interval: fewer seeds than the report's minimum for
  one, ``stats.MIN_SEEDS_FOR_INTERVAL``, the headline's rule); and the verdict ``stacks``:
  ``agree`` (the same effect), ``disagree`` (one faster, the other slower), ``differ`` (other
  different effects, and the A ÷ B interval excludes 1: the effects' sizes measurably differ) or
  ``consistent`` (different effects, but the A ÷ B interval holds 1: the data cannot tell them apart).
  Each row names its point by a key (``point``); ``points(runs, frame)`` gives each key's factors once.
- ``recovery(runs)``: per FEC label of the table, whether the packets its FEC rebuilt spare the sender's loss
  declarations and retransmissions, from each stack's own counters against its twin on the same points and seeds
  (XQUIC's do not: its receiver never acknowledges a rebuilt packet's number, quic-impls/xquic/README.md).
- ``section(...)``: the report's tables (``fecbench report``).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from fecbench.analysis import baselines, ratios, results, stats

#: The seeds of a point (and the bootstrap) the report's other tables use.
BY = ("point", "size")


def _impls(runs: pd.DataFrame, impls: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    known = set(runs["label"])
    return {k: v for k, v in (baselines.from_runs(runs) if impls is None else impls).items() if k in known}


def twins(runs: pd.DataFrame, impls: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """Each FEC label → its no-FEC twin (``baselines.fec_twin``; ``impls``: ``baselines.recorded_impls(db)``,
    default read from the runs' ``impl_args``)."""
    found = baselines.twins(_impls(runs, impls))
    return dict(sorted(baselines.of_kind(found, baselines.FEC).items()))


def matches(runs: pd.DataFrame, impls: dict[str, dict[str, Any]] | None = None) -> list[tuple[str, str]]:
    """The pairs (A, B) of FEC labels with a twin, of two implementations, the same code family and the same
    multipath setting (A's implementation first in name order)."""
    impls = _impls(runs, impls)
    found = twins(runs, impls)
    out = []
    for a, b in itertools.combinations(sorted(found), 2):
        one, two = impls[a], impls[b]
        if one.get("name") == two.get("name") or baselines.family(one) != baselines.family(two) \
                or baselines.is_multipath(one) != baselines.is_multipath(two):
            continue
        out.append((a, b) if str(one.get("name")) <= str(two.get("name")) else (b, a))
    return sorted(out)


def stack_points(runs: pd.DataFrame, *, seed: int = 0, level: float = 0.95,
                 impls: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """``ratios.point_ratios`` of every FEC label against its twin, with its ``impl`` (empty frame
    without twins)."""
    impl_of = runs.drop_duplicates("label").set_index("label")["impl"]
    frames = []
    for label, base in twins(runs, impls).items():
        pairs = ratios.pairs(runs, baseline=base, labels=[label], metric="dct_ms")
        frames.append(ratios.point_ratios(pairs, by=BY, level=level, seed=seed).assign(impl=impl_of[label]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: Ratios within 1 ± TOLERANCE count as no effect (a 0.1 % difference is measurable on identical
#: loss patterns, and meaningless).
TOLERANCE = 0.02


#: An effect or a verdict without an interval (too few seeds): the report's words for it everywhere.
NOT_ENOUGH = "not enough to say"


def effect(low: float, high: float, tolerance: float = TOLERANCE) -> str:
    """What a ratio's interval says about FEC: ``faster``, ``slower``, ``negligible``, ``no clear
    effect`` or ``not enough to say`` (see above)."""
    if math.isnan(low) or math.isnan(high):
        return NOT_ENOUGH
    if high < 1 - tolerance:
        return "faster"
    if low > 1 + tolerance:
        return "slower"
    return "negligible" if low >= 1 - tolerance and high <= 1 + tolerance else "no clear effect"


def agreement(a: str, b: str, between: tuple[float, float] = (math.nan, math.nan)) -> str:
    """The stacks' verdict from their effects and the interval of A ÷ B (see above)."""
    if NOT_ENOUGH in (a, b):
        return NOT_ENOUGH
    if a == b:
        return "agree"
    if {a, b} == {"faster", "slower"}:
        return "disagree"
    low, high = between
    if math.isnan(low) or math.isnan(high):
        return NOT_ENOUGH
    return "consistent" if low <= 1 <= high else "differ"


def _finished(runs: pd.DataFrame, label: str, base: str) -> pd.DataFrame:
    """Per condition (network, workload, repetition, loss seed, size): the label's and its twin's DCT, both
    finished."""
    pairs = ratios.pairs(runs, baseline=base, labels=[label], metric="dct_ms")
    keys = [k for k in ("network", "workload", "point", "repetition", "loss_seed", "size") if k in pairs]
    done = pairs[pairs["outcome"] == "finished"]
    return done[keys + ["value", "baseline_value"]].rename(columns={"value": f"{label}:fec",
                                                                    "baseline_value": f"{label}:none"})


def side_by_side(runs: pd.DataFrame, *, seed: int = 0, level: float = 0.95, n_boot: int = 2000,
                 tolerance: float = TOLERANCE, impls: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per design point, size and matched pair of FEC labels (``matches``; see above)."""
    runs = results.with_network(runs)
    points = stack_points(runs, seed=seed, level=level, impls=impls)
    if points.empty:
        return pd.DataFrame()
    found = twins(runs, impls)
    keys = [k for k in ("network", "workload", "point", "repetition", "loss_seed", "size") if k in runs]
    rows = []
    for a, b in matches(runs, impls):
        mine, theirs = points[points["label"] == a], points[points["label"] == b]
        both = _finished(runs, a, found[a]).merge(_finished(runs, b, found[b]), on=keys)
        joined = mine.merge(theirs, on=["network", "point", "workload", "size"], suffixes=("_a", "_b"))
        for row in joined.itertuples(index=False):
            seeds = both[(both["network"] == row.network) & (both["size"] == row.size)]
            quad = [seeds[f"{a}:fec"], seeds[f"{a}:none"], seeds[f"{b}:fec"], seeds[f"{b}:none"]]
            between = (np.median(quad[0]) / np.median(quad[1])) / (np.median(quad[2]) / np.median(quad[3])) \
                if len(seeds) else math.nan
            ci = stats.bootstrap_ratio_of_ratios(*quad, n_boot=n_boot, level=level,
                                                 min_pairs=stats.MIN_SEEDS_FOR_INTERVAL,
                                                 seed=stats.group_seed(seed, [row.network, row.point, row.size,
                                                                              a, b]))
            effect_a = effect(row.ci_low_a, row.ci_high_a, tolerance)
            effect_b = effect(row.ci_low_b, row.ci_high_b, tolerance)
            rows.append({
                "network": row.network, "workload": row.workload, "point": row.point, "size": row.size,
                "label_a": a, "twin_a": found[a], "seeds_a": row.seeds_a, "ratio_a": row.ratio_a,
                "ratio_a_low": row.ratio_low_a, "ratio_a_high": row.ratio_high_a,
                "ci_a_low": row.ci_low_a, "ci_a_high": row.ci_high_a, "effect_a": effect_a,
                "label_b": b, "twin_b": found[b], "seeds_b": row.seeds_b, "ratio_b": row.ratio_b,
                "ratio_b_low": row.ratio_low_b, "ratio_b_high": row.ratio_high_b,
                "ci_b_low": row.ci_low_b, "ci_b_high": row.ci_high_b, "effect_b": effect_b,
                "stacks": agreement(effect_a, effect_b, ci), "seeds_all_finished": len(seeds),
                "a_over_b": between, "a_over_b_low": ci[0], "a_over_b_high": ci[1]})
    out = pd.DataFrame(rows)
    if len(out):
        out.insert(0, "point_key", _keys(out))
    factors = [f for f in runs.attrs.get("factors", []) if f in runs]
    out.attrs.update(level=level, n_boot=n_boot, seed=seed, factors=factors, tolerance=tolerance)
    return out


def _keys(frame: pd.DataFrame) -> list[str]:
    """Each row's point key: its point number, with its network's first characters where one number names
    several networks (campaigns of several designs)."""
    per_point = frame.groupby("point")["network"].nunique()
    return [str(p) if per_point[p] == 1 else f"{p}/{str(n)[-8:]}" for p, n in zip(frame["point"], frame["network"],
                                                                                   strict=True)]


def points(runs: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """The design points of ``side_by_side``'s rows, once each: their key and each factor's value."""
    if frame.empty:
        return pd.DataFrame()
    runs = results.with_network(runs)
    factors = frame.attrs.get("factors", [])
    keyed = frame[["point_key", "network"]].drop_duplicates("point_key")
    out = keyed.merge(runs[["network", *factors]].drop_duplicates("network"), on="network", how="left")
    return out.drop(columns="network").rename(columns={"point_key": "point"}).reset_index(drop=True)


def _interval(low: float, high: float) -> str:
    return "none" if math.isnan(low) or math.isnan(high) else f"[{low:.3g}, {high:.3g}]"


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """``side_by_side`` as the report shows it."""
    from fecbench.analysis.figures import format_size

    if frame.empty:
        return frame
    return pd.DataFrame({
        "point": frame["point_key"],
        "size": frame["size"].map(format_size),
        "A: FEC ÷ no FEC": [f"{a} ÷ {t}" for a, t in zip(frame["label_a"], frame["twin_a"], strict=True)],
        "A: ratio [interval]": [f"{stats.describe((lo, hi))} {_interval(cl, ch)}" for lo, hi, cl, ch in
                                zip(frame["ratio_a_low"], frame["ratio_a_high"], frame["ci_a_low"],
                                    frame["ci_a_high"], strict=True)],
        "B: FEC ÷ no FEC": [f"{a} ÷ {t}" for a, t in zip(frame["label_b"], frame["twin_b"], strict=True)],
        "B: ratio [interval]": [f"{stats.describe((lo, hi))} {_interval(cl, ch)}" for lo, hi, cl, ch in
                                zip(frame["ratio_b_low"], frame["ratio_b_high"], frame["ci_b_low"],
                                    frame["ci_b_high"], strict=True)],
        "stacks": frame["stacks"] + " (" + frame["effect_a"] + " / " + frame["effect_b"] + ")",
        "A ÷ B [interval]": [("–" if math.isnan(v) else f"{v:.3g} ") + _interval(lo, hi) for v, lo, hi in
                             zip(frame["a_over_b"], frame["a_over_b_low"], frame["a_over_b_high"], strict=True)],
        "seeds (A/B/all finished)": [f"{x}/{y}/{z}" for x, y, z in
                                     zip(frame["seeds_a"], frame["seeds_b"], frame["seeds_all_finished"],
                                         strict=True)]})


#: Each stack's counters of what its sender declared lost and sent again (those it has: units differ by stack).
SENDER_COUNTERS = (("lost", "declared lost", "packets"), ("retransmitted_packets", "retransmitted", "packets"),
                   ("retransmitted_bytes", "retransmitted", "bytes"))


def recovery(runs: pd.DataFrame, impls: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """Per FEC label of the cross-stack table: packets rebuilt per run (``recovered``) and, per sender counter the
    stack has, its mean per run with FEC and with its twin over the same points and seeds (both runs ok), and
    the share of rebuilt packets the first packet counter was spared: (without − with) ÷ rebuilt (a bytes counter is
    shown, not divided). ``spares``: yes (≥ ½ of the rebuilt packets spared), no (< 0.2), partly, or why it is
    not known."""
    found = twins(runs, impls)
    keys = [k for k in ("network", "workload", "point", "repetition", "loss_seed", "size") if k in runs]
    ok = runs[runs["status"] == "ok"]
    rows = []
    for label in sorted({label for pair in matches(runs, impls) for label in pair}):
        twin = found[label]
        counters = [(c, what, unit) for c, what, unit in SENDER_COUNTERS if c in ok and ok[c].notna().any()]
        columns = [c for c, _, _ in counters] + (["recovered"] if "recovered" in ok else [])
        both = ok[ok["label"] == label][keys + columns].merge(ok[ok["label"] == twin][keys + columns], on=keys,
                                                             suffixes=("", "_twin"))
        rebuilt = float(both["recovered"].mean()) if "recovered" in both and both["recovered"].notna().any() \
            else math.nan
        row = {"label": label, "impl": _impl(runs, label), "twin": twin, "pairs": len(both), "rebuilt": rebuilt}
        spared = math.nan
        for column, what, unit in counters:
            if both[column].isna().all():   # a counter this stack does not report
                continue
            mine, theirs = float(both[column].mean()), float(both[f"{column}_twin"].mean())
            row[f"{what} ({unit}) with / without"] = f"{mine:.3g} / {theirs:.3g}"
            if unit == "packets" and rebuilt > 0 and math.isnan(spared):
                spared = (theirs - mine) / rebuilt
        row["spared per rebuilt"] = spared
        row["spares"] = ("no counter of rebuilt packets" if math.isnan(rebuilt) else "nothing rebuilt"
                         if rebuilt == 0 else "no sender counter" if math.isnan(spared) else "yes" if spared >= 0.5
                         else "no: rebuilt packets are still declared lost and sent again" if spared < 0.2
                         else "partly")
        rows.append(row)
    return pd.DataFrame(rows)


def _impl(runs: pd.DataFrame, label: str) -> str:
    return str(runs.loc[runs["label"] == label, "impl"].iloc[0]) if "impl" in runs else label


NOTE = ("Each stack's FEC label against its own no-FEC twin (same implementation, every argument but the FEC "
        "ones the same) on the same points and loss seeds, and the stacks matched code family against code family "
        "(RS with RS, XOR with XOR) on the same multipath setting: ratio of median DCTs FEC ÷ no FEC with its "
        "{level:.0%} bootstrap interval (timeouts censored, as the headline). A ÷ B: stack A's ratio over stack "
        "B's, interval from a bootstrap over the seeds where all four runs finished. Effect: faster / slower "
        "when the interval lies below {low:g} / above {high:g}, negligible inside [{low:g}, {high:g}], no "
        "clear effect otherwise. Stacks: agree (same effect), disagree (one faster, one slower), differ "
        "(different effects and A ÷ B excludes 1), consistent (different effects but A ÷ B holds 1: the data "
        "cannot tell them apart). Point: the key of the table of points below.")


def section(tables: dict[str, pd.DataFrame], notes: dict[str, str], runs: pd.DataFrame, *, seed: int = 0,
            impls: dict[str, dict[str, Any]] | None = None) -> None:
    """Add the cross-stack table of ``runs`` (downloads) and its points to a report, when two implementations
    each have a FEC label of one family and its twin."""
    frame = side_by_side(runs, seed=seed, impls=impls)
    if frame.empty:
        return
    name = "cross-stack: FEC ÷ no FEC per stack, per point"
    spares = recovery(runs, impls)
    said = dict(zip(spares["label"], spares["spares"], strict=True)) if len(spares) else {}
    shown = table(frame)
    shown["rebuilt packets spare losses (A / B)"] = [f"{said.get(a, '?')} / {said.get(b, '?')}"
                                                    for a, b in zip(frame["label_a"], frame["label_b"], strict=True)]
    tables[name] = shown
    tolerance = frame.attrs["tolerance"]
    notes[name] = NOTE.format(level=frame.attrs["level"], low=1 - tolerance, high=1 + tolerance)
    if len(spares):
        tables["cross-stack: what rebuilt packets spare, per stack"] = spares
        notes["cross-stack: what rebuilt packets spare, per stack"] = (
            "From each stack's own counters, FEC label against its no-FEC twin on the same points and seeds (both "
            "runs ok), means per run: packets FEC rebuilt, what the sender declared lost and sent again. Spared per "
            "rebuilt: (without − with) ÷ rebuilt, in packets. A stack whose rebuilt packets are still declared lost "
            "(XQUIC: its receiver hands a rebuilt packet's frames to the stream without acknowledging its packet "
            "number, so the sender's loss detection declares it lost, retransmits it and counts a congestion loss; "
            "quic-impls/xquic/README.md) gains from FEC only the time to deliver, never the retransmission, and "
            "that decides every comparison across the stacks.")
    where = points(runs, frame)
    if where.shape[1] > 1:
        tables["cross-stack: the points"] = where
        notes["cross-stack: the points"] = "Each point of the cross-stack table once: its key and its factors' values."
