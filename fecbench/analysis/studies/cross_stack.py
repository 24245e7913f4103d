"""Two FEC stacks' findings side by side (``designs/cross-stack.toml``: fecq and XQUIC).

A result about FEC may be a property of FEC or of the stack that implements it. So each stack's FEC
label is compared with **its own no-FEC twin** first — the label of the same implementation with
``fec = "none"`` that shares the most other arguments with it (two equally close ones: no twin) — on
the same points and loss seeds (common random numbers), and only then are the stacks' ratios compared:

- ``twins(runs)``: FEC label → its no-FEC twin;
- ``stack_points(runs)``: per twin pair, design point and size, the ratio of median DCTs FEC ÷ no FEC
  with its bootstrap interval (``fecbench.ratios.point_ratios``: timeouts censored);
- ``side_by_side(runs)``: one row per point, size and pair of FEC labels of two implementations: each
  stack's ratio and interval; the ratio of the two ratios (stack A's ÷ stack B's) with a bootstrap
  interval over the seeds where all four runs finished (the four resampled together); each stack's
  effect, from its interval and a tolerance (default 2 %): ``faster`` (interval below 1 − tol),
  ``slower`` (above 1 + tol), ``negligible`` (inside 1 ± tol), ``no clear effect`` (none of these:
  holds 1, or straddles a bound), ``undetermined`` (no interval); and the verdict ``stacks``:
  ``agree`` (the same effect), ``disagree`` (one faster, the other slower), ``differ`` (other
  different effects, and the A ÷ B interval excludes 1: the effects' sizes measurably differ) or
  ``consistent`` (different effects, but the A ÷ B interval holds 1: the data cannot tell them apart).
- ``section(...)``: the report's table (``fecbench report``).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd

from fecbench.analysis import ratios, results, stats

#: The seeds of a point (and the bootstrap) the report's other tables use.
BY = ("point", "size")


def _args(text: object) -> dict[str, object]:
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _fec(args: dict[str, object]) -> str:
    return str(args.get("fec", "none"))


def twins(runs: pd.DataFrame) -> dict[str, str]:
    """Each FEC label (argument ``fec`` set and not ``none``) → its no-FEC twin (see above)."""
    labels = runs.drop_duplicates("label").set_index("label")
    args = {label: _args(text) for label, text in labels["impl_args"].items()}
    out: dict[str, str] = {}
    for label, mine in args.items():
        if "fec" not in mine or _fec(mine) == "none":
            continue
        candidates = [c for c in args if labels.at[c, "impl"] == labels.at[label, "impl"]
                      and "fec" in args[c] and _fec(args[c]) == "none"]
        shared = {c: sum(mine.get(k) == v for k, v in args[c].items() if k != "fec") for c in candidates}
        ranked = sorted(candidates, key=lambda c: -shared[c])
        if ranked and (len(ranked) == 1 or shared[ranked[0]] > shared[ranked[1]]):
            out[label] = ranked[0]
    return dict(sorted(out.items()))


def stack_points(runs: pd.DataFrame, *, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """``ratios.point_ratios`` of every FEC label against its twin, with its ``impl`` (empty frame
    without twins)."""
    impl_of = runs.drop_duplicates("label").set_index("label")["impl"]
    frames = []
    for label, base in twins(runs).items():
        pairs = ratios.pairs(runs, baseline=base, labels=[label], metric="dct_ms")
        frames.append(ratios.point_ratios(pairs, by=BY, level=level, seed=seed).assign(impl=impl_of[label]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: Ratios within 1 ± TOLERANCE count as no effect (a 0.1 % difference is measurable on identical
#: loss patterns, and meaningless).
TOLERANCE = 0.02


def effect(low: float, high: float, tolerance: float = TOLERANCE) -> str:
    """What a ratio's interval says about FEC: ``faster``, ``slower``, ``negligible``, ``no clear
    effect`` or ``undetermined`` (see above)."""
    if math.isnan(low) or math.isnan(high):
        return "undetermined"
    if high < 1 - tolerance:
        return "faster"
    if low > 1 + tolerance:
        return "slower"
    return "negligible" if low >= 1 - tolerance and high <= 1 + tolerance else "no clear effect"


def agreement(a: str, b: str, between: tuple[float, float] = (math.nan, math.nan)) -> str:
    """The stacks' verdict from their effects and the interval of A ÷ B (see above)."""
    if "undetermined" in (a, b):
        return "undetermined"
    if a == b:
        return "agree"
    if {a, b} == {"faster", "slower"}:
        return "disagree"
    low, high = between
    if math.isnan(low) or math.isnan(high):
        return "undetermined"
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
                 tolerance: float = TOLERANCE) -> pd.DataFrame:
    """One row per design point, size and pair of FEC labels of two implementations (see above)."""
    runs = results.with_network(runs)
    points = stack_points(runs, seed=seed, level=level)
    if points.empty:
        return pd.DataFrame()
    found = twins(runs)
    rows = []
    labels = sorted(points["label"].unique())
    for a, b in itertools.combinations(labels, 2):
        mine, theirs = points[points["label"] == a], points[points["label"] == b]
        if mine["impl"].iloc[0] == theirs["impl"].iloc[0]:
            continue
        both = _finished(runs, a, found[a]).merge(_finished(runs, b, found[b]),
                                                  on=[k for k in ("network", "workload", "point", "repetition",
                                                                  "loss_seed", "size") if k in runs])
        joined = mine.merge(theirs, on=["network", "point", "workload", "size"], suffixes=("_a", "_b"))
        for row in joined.itertuples(index=False):
            seeds = both[(both["network"] == row.network) & (both["size"] == row.size)]
            quad = [seeds[f"{a}:fec"], seeds[f"{a}:none"], seeds[f"{b}:fec"], seeds[f"{b}:none"]]
            between = (np.median(quad[0]) / np.median(quad[1])) / (np.median(quad[2]) / np.median(quad[3])) \
                if len(seeds) else math.nan
            ci = stats.bootstrap_ratio_of_ratios(*quad, n_boot=n_boot, level=level,
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
    factors = [f for f in runs.attrs.get("factors", []) if f in runs]
    if len(out) and factors:  # the point's factor values, to read the table without the design
        out = out.merge(runs[["network", *factors]].drop_duplicates("network"), on="network", how="left")
    out.attrs.update(level=level, n_boot=n_boot, seed=seed, factors=factors, tolerance=tolerance)
    return out


def _interval(low: float, high: float) -> str:
    return "none" if math.isnan(low) or math.isnan(high) else f"[{low:.3g}, {high:.3g}]"


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """``side_by_side`` as the report shows it."""
    from fecbench.analysis.figures import format_size

    if frame.empty:
        return frame
    factors = frame.attrs.get("factors", [])
    return pd.DataFrame({
        "point": [f"{p} ({', '.join(f'{f} {row[f]:g}' for f in factors)})" if factors else str(p)
                  for p, (_, row) in zip(frame["point"], frame.iterrows(), strict=True)],
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


NOTE = ("Each stack's FEC label against its own no-FEC twin (same implementation, fec = none, the most "
        "arguments in common) on the same points and loss seeds: ratio of median DCTs FEC ÷ no FEC with its "
        "{level:.0%} bootstrap interval (timeouts censored, as the headline). A ÷ B: stack A's ratio over stack "
        "B's, interval from a bootstrap over the seeds where all four runs finished. Effect: faster / slower "
        "when the interval lies below {low:g} / above {high:g}, negligible inside [{low:g}, {high:g}], no "
        "clear effect otherwise. Stacks: agree (same effect), disagree (one faster, one slower), differ "
        "(different effects and A ÷ B excludes 1), consistent (different effects but A ÷ B holds 1: the data "
        "cannot tell them apart).")


def section(tables: dict[str, pd.DataFrame], notes: dict[str, str], runs: pd.DataFrame, *, seed: int = 0) -> None:
    """Add the cross-stack table of ``runs`` (downloads) to a report, when two implementations each
    have a FEC label and its twin."""
    frame = side_by_side(runs, seed=seed)
    if frame.empty:
        return
    name = "cross-stack: FEC ÷ no FEC per stack, per point"
    tables[name] = table(frame)
    tolerance = frame.attrs["tolerance"]
    notes[name] = NOTE.format(level=frame.attrs["level"], low=1 - tolerance, high=1 + tolerance)
