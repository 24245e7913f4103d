"""Ratio figures: a label against the baseline, per run or per design point, timeouts censored.

Each figure names the statistic it shows and, in each panel, how many pairs or points it drew,
how many are censored (drawn beyond the axis: +∞ when only a lower bound is known, 0 when only an
upper bound is) and how many were left out, and why (``fecbench.analysis.ratios`` defines the outcomes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fecbench.analysis import ratios
from fecbench.analysis.figures.style import (
    censored_ecdf,
    empty,
    factor_title,
    grid,
    label_palette,
    labels_of,
    log2_axis,
    metric_title,
    note_below,
    size_palette,
    sizes_of,
    styled,
    with_size_names,
    wrap,
)

#: Short metric names for axis labels that carry a label pair.
SHORT_NAMES = {"dct_ms": "DCT", "client_wall_ms": "client wall time", "rebuffering_ms": "re-buffering time",
               "file_e2e_ms": "file e2e time"}


def _metric_name(frame: pd.DataFrame) -> str:
    metric = frame.attrs.get("metric", "metric")
    return SHORT_NAMES.get(metric, metric_title(metric).split(" (")[0])


def _pair_note(sub: pd.DataFrame) -> str:
    """What an ECDF of per-run ratios drew and left out, from a ``ratios.pairs`` frame."""
    counts = sub["outcome"].value_counts()
    label, baseline = sub["label"].iloc[0], sub["baseline"].iloc[0]
    lines = [f"{len(sub)} pairs: {int(counts.get('finished', 0))} finished"]
    if counts.get("label timed out", 0):
        lines.append(f"{counts['label timed out']} {label} timed out (at +∞)")
    if counts.get("baseline timed out", 0):
        lines.append(f"{counts['baseline timed out']} {baseline} timed out (at 0)")
    left_out = []
    if counts.get("both timed out", 0):
        left_out.append(f"both timed out {counts['both timed out']}")
    undefined = int(((sub["outcome"] == "finished") & sub["ratio"].isna()).sum())
    if undefined:
        left_out.append(f"zero baseline {undefined}")
    reasons = sub.loc[sub["outcome"] == "excluded", "excluded_why"].value_counts().sort_index()
    left_out += [f"{why} {n}" for why, n in reasons.items()]
    if left_out:
        lines.append("left out: " + ", ".join(left_out))
    return "\n".join(lines)


def _point_note(sub: pd.DataFrame, above: str = "at +∞", below: str = "at 0") -> str:
    """What a figure of per-point ratios drew and left out, from ``ratios.point_ratios``."""
    states = sub["state"].value_counts()
    label, baseline = sub["label"].iloc[0], sub["baseline"].iloc[0]
    lines = [f"{len(sub)} points: {int(states.get('exact', 0))} exact"]
    if states.get("at least", 0):
        lines.append(f"{states['at least']} with the {label} median timed out ({above})")
    if states.get("at most", 0):
        lines.append(f"{states['at most']} with the {baseline} median timed out ({below})")
    reasons = {"undefined": "undefined (both medians timed out)", "between": "only bounded",
               "no data": "without a usable pair"}
    left_out = [f"{int(states[name])} {why}" for name, why in reasons.items() if states.get(name, 0)]
    if left_out:
        lines.append("left out: " + ", ".join(left_out))
    pairs = [f"{int(sub[['label_timeouts', 'baseline_timeouts', 'both_timeouts']].sum().sum())} with a timeout "
             "(censored)"]
    reasons = ratios.excluded_reasons(sub)
    if reasons:
        pairs.append(f"{sum(reasons.values())} excluded: " + ", ".join(f"{w} {n}" for w, n in reasons.items()))
    lines.append("pairs: " + "; ".join(pairs))
    return "\n".join(lines)


def _seeds_text(points: pd.DataFrame) -> str:
    seeded = points.loc[points["seeds"] > 0, "seeds"]
    if seeded.empty:
        return "no seeds"
    low, high = int(seeded.min()), int(seeded.max())
    if low == high:
        return f"{low} seed per point" if low == 1 else f"{low} seeds per point"
    return f"{low}–{high} seeds per point"


def _ecdf_panels(frame: pd.DataFrame, exact: pd.Series, below: pd.Series, above: pd.Series, note,
                 xlabel: str, ncols: int) -> Figure:
    """One panel per label, one censored ECDF per size (or one per label without sizes)."""
    labels = sorted(frame["label"].unique())
    fig, axes = grid(len(labels), ncols)
    data, order = with_size_names(frame)
    sized = any(name != "messages" for name in order)
    colors = size_palette(sizes_of(frame)) if sized else label_palette(labels_of(frame))
    for ax, label in zip(axes, labels, strict=False):
        mine = data["label"] == label
        baseline = str(data.loc[mine, "baseline"].iloc[0])  # each label's own (multipath twins differ)
        log2_axis(ax, "x", exact.dropna() if exact.notna().any() else pd.Series([1.0]))  # same axis everywhere
        xlim = ax.get_xlim()
        for name in (order if sized else [None]):
            sub = mine & (data["size_name"] == name) if name is not None else mine
            if not sub.any():
                continue
            count = int((sub & (exact.notna() | below | above)).sum())   # what the curve is drawn from
            censored_ecdf(ax, exact[sub & exact.notna()].to_numpy(dtype=float), int(below[sub].sum()),
                           int(above[sub].sum()), xlim, color=colors[name if sized else label],
                           label=f"{name if sized else label} ({count})")
        ax.set_xlim(xlim)
        ax.axvline(1.0, color="0.2", linestyle="--", linewidth=1)
        if sized:
            ax.legend(title="file size (n)", loc="upper left", frameon=False)
        note_below(ax, note(frame[mine]))
        ax.set_xlabel(xlabel.format(label=label, baseline=baseline))
        ax.set_ylabel("ECDF")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{label} vs {baseline}")
    return fig


@styled
def ratio_ecdf(pairs: pd.DataFrame, *, title: str | None = None, ncols: int = 3) -> Figure:
    """ECDF of the per-run ratio ``label / baseline``, one curve per size, one panel per label.

    ``pairs``: a ``ratios.pairs`` frame (every pair: a label's timeout drawn at +∞, the baseline's
    at 0, the rest counted in the panel's note) or a ``results.paired`` frame (finished pairs only).
    A ratio below 1 means the label did better than the baseline for a time metric (DCT,
    re-buffering) and worse for an amount (data received).
    """
    metric = pairs.attrs.get("metric", "metric")
    if "outcome" not in pairs:  # a results.paired frame: finished pairs only
        pairs = pairs.assign(outcome="finished", excluded_why="")
    exact = pairs["ratio"].where((pairs["outcome"] == "finished") & np.isfinite(pairs["ratio"]) & (pairs["ratio"] > 0))
    if not (exact.notna().any() or pairs["outcome"].isin(["label timed out", "baseline timed out"]).any()):
        fig, axes = grid(1, 1)
        return empty(fig, axes[0], f"no paired ok runs to compare ({metric})")
    fig = _ecdf_panels(pairs, exact, pairs["outcome"] == "baseline timed out", pairs["outcome"] == "label timed out",
                       _pair_note, f"{_metric_name(pairs)} ratio {{label}} / {{baseline}} (per run)", ncols)
    same = "point, loss seed and size" if "size" in pairs and pairs["size"].notna().any() else "point and loss seed"
    fig.suptitle(title or f"per-run {_metric_name(pairs)} ratio\n(each pair of runs on the same {same})")
    return fig


@styled
def point_ratio_ecdf(points: pd.DataFrame, *, title: str | None = None, ncols: int = 3) -> Figure:
    """ECDF over the design points of the ratio of medians ``label / baseline`` (a
    ``ratios.point_ratios`` frame: the 2019 paper's statistic), one curve per size, one panel per
    label. A point whose label median timed out is drawn at +∞, one whose baseline median did at 0;
    undefined points are counted in the note."""
    if not len(points) or not (points["seeds"] > 0).any():
        fig, axes = grid(1, 1)
        return empty(fig, axes[0], "no design point with seeds on both sides to compare")
    # Points without a usable pair are not drawn but stay in the notes ("no data").
    exact = points["ratio"].where(points["state"] == "exact")
    fig = _ecdf_panels(points, exact, points["state"] == "at most", points["state"] == "at least", _point_note,
                       f"ratio of median {_metric_name(points)} {{label}} / {{baseline}}", ncols)
    fig.suptitle(title or f"ratio of medians per design point\n(over the loss seeds of each point: "
                          f"{_seeds_text(points)})")
    return fig


def _point_scatter(ax, data: pd.DataFrame, factor: str, color) -> None:
    """Per-point ratios against a factor: dots (exact), ▲/▼ (censored), bootstrap interval bars."""
    exact = data[data["state"] == "exact"]
    ax.scatter(exact[factor], exact["ratio"], s=18, color=color, alpha=0.8, edgecolors="none")
    above = data[data["state"] == "at least"]
    ax.scatter(above[factor], above["ratio_low"], s=26, marker="^", color=color, alpha=0.9, edgecolors="none")
    below = data[data["state"] == "at most"]
    ax.scatter(below[factor], below["ratio_high"], s=26, marker="v", color=color, alpha=0.9, edgecolors="none")
    low, high = ax.get_ylim()
    bars = data[data["ci_low"].notna() & data["ci_high"].notna()]
    ax.vlines(bars[factor], bars["ci_low"].clip(lower=low / 2, upper=high * 2),
              bars["ci_high"].clip(lower=low / 2, upper=high * 2), color=color, alpha=0.3, linewidth=1)
    ax.set_ylim(low, high)


@styled
def ratio_vs_factors(pairs: pd.DataFrame, factors: Sequence[str] | None = None, *, label: str | None = None,
                     per_point: bool = True, ncols: int = 3, log2_factors: Sequence[str] = ()) -> Figure:
    """The ratio ``label / baseline`` against each design factor, coloured by size, log2 y axis.

    ``pairs``: a ``ratios.point_ratios`` frame (the ratio of medians per design point: dots, ▲ at
    the bound when the label's median timed out, ▼ when the baseline's did, bars for the bootstrap
    interval), or a per-run frame (``results.paired``): ``per_point`` then draws one marker per
    point and size at the median of its per-run ratios, otherwise one per pair.
    ``log2_factors``: factors drawn on a log2 x axis with a line at 1 (path ratios such as
    ``bw_1/bw_2`` from ``results.path_asymmetry``).
    """
    metric = _metric_name(pairs)
    is_points = "state" in pairs and "seeds" in pairs
    factors = list(factors if factors is not None else pairs.attrs.get("factors", []))
    # Numeric factors that vary (a constant one has nothing to show).
    factors = [f for f in factors if f in pairs and pd.api.types.is_numeric_dtype(pairs[f]) and pairs[f].nunique() > 1]
    if is_points:
        shown = pairs["state"].isin(["exact", "at least", "at most"])
        usable = pairs.assign(ratio=pairs["ratio"].where(pairs["state"] == "exact", pairs["ratio_low"].where(
            pairs["state"] == "at least", pairs["ratio_high"])))
    else:
        shown = pairs["ratio"].notna() & np.isfinite(pairs["ratio"]) & (pairs["ratio"] > 0)
        usable = pairs
    if label is None and shown.any():
        label = sorted(usable.loc[shown, "label"].unique())[0]
    everything = usable[usable["label"] == label]
    usable = usable[shown & (usable["label"] == label)]
    if not is_points and per_point and "point" in usable and len(usable):
        point = "network" if "network" in usable else "point"    # a point is its network (results.CONDITION)
        keys = [k for k in ("database", point, "workload", "size") if k in usable]
        medians = usable.groupby(keys, dropna=False)["ratio"].median().rename("ratio")
        usable = (usable.drop(columns="ratio").drop_duplicates(keys)
                  .merge(medians.reset_index(), on=keys, how="left"))
    fig, axes = grid(len(factors), ncols, width=3.6, height=3.0)
    if usable.empty:
        return empty(fig, axes[0], "no paired ok runs")
    if not factors:   # one design point (or factors that never vary): nothing to draw against, the pairs exist
        unit = "points" if is_points else "pairs"
        return empty(fig, axes[0], f"no design factor varies across this design's points: its {len(usable)} {unit} "
                                   "are in the ratio ECDF")
    data, order = with_size_names(usable)
    sized = any(name != "messages" for name in order)
    colors = size_palette(sizes_of(pairs)) if sized else {"messages": label_palette(labels_of(pairs))[label]}
    baseline = str(everything["baseline"].iloc[0])
    finite = usable["ratio"][np.isfinite(usable["ratio"]) & (usable["ratio"] > 0)]
    for i, (ax, factor) in enumerate(zip(axes, factors, strict=False)):
        if is_points:
            log2_axis(ax, "y", finite)
            for name in order:
                _point_scatter(ax, data[data["size_name"] == name], factor, colors[name])
        elif sized:
            sns.scatterplot(data=data, x=factor, y="ratio", hue="size_name", hue_order=order, palette=colors,
                            ax=ax, s=18, alpha=0.75, edgecolor="none", legend=False)
        else:
            sns.scatterplot(data=data, x=factor, y="ratio", color=colors["messages"], ax=ax, s=18, alpha=0.75,
                            edgecolor="none")
        ax.axhline(1.0, color="0.2", linestyle="--", linewidth=1)
        if not is_points:
            log2_axis(ax, "y", finite)
        if factor in log2_factors:
            ax.axvline(1.0, color="0.6", linestyle=":", linewidth=1)
            log2_axis(ax, "x", usable[factor].dropna())
        ax.set_xlabel(factor_title(factor))
        ax.set_ylabel(f"ratio {label} / {baseline}" if i % ncols == 0 else "")
    if sized:  # one legend for all panels, outside
        handles = [Line2D([], [], marker="o", linestyle="", color=colors[name], label=name) for name in order]
        fig.legend(handles=handles, title="file size", loc="outside right upper", frameon=False)
    if is_points:
        level = pairs.attrs.get("level", 0.95)
        bars = (f"bars: {level:.0%} bootstrap interval" if everything["ci_low"].notna().any()
                else "no bootstrap interval: fewer than 3 seeds")
        what = f"ratio of medians over the loss seeds of each design point ({_seeds_text(everything)}); {bars}"
        fig.supxlabel(wrap(_point_note(everything, "▲ at the bound", "▼ at the bound"), 100), x=0.01, ha="left",
                      fontsize=8, color="0.25")
    else:
        what = "median of the per-run ratios of each design point" if per_point else "every pair of runs"
    fig.suptitle(f"{metric} ratio {label} / {baseline} against each factor\n({what})")
    return fig


@styled
def versions_ratio_ecdf(pairs: pd.DataFrame, *, title: str | None = None, ncols: int = 3) -> Figure:
    """Two campaigns of one design side by side (``fecbench report THIS --against OTHER``): per label, the
    ECDF of the per-run ratio ``label / baseline`` of each campaign, one colour per size, a solid line for
    the first version of ``pairs["version"]`` (its order of appearance) and a dashed one for the second.

    ``pairs``: ``ratios.pairs`` frames of both campaigns with a ``version`` column; timeouts are drawn as
    ``ratio_ecdf`` draws them (the label's at +∞, the baseline's at 0), the rest counted in the legend."""
    versions = list(dict.fromkeys(pairs["version"]))
    exact = pairs["ratio"].where((pairs["outcome"] == "finished") & np.isfinite(pairs["ratio"]) & (pairs["ratio"] > 0))
    if exact.notna().sum() == 0:
        fig, axes = grid(1, 1)
        return empty(fig, axes[0], "no paired ok runs to compare in either campaign")
    below, above = pairs["outcome"] == "baseline timed out", pairs["outcome"] == "label timed out"
    labels = sorted(pairs["label"].unique())
    fig, axes = grid(len(labels), ncols, width=4.6)
    data, order = with_size_names(pairs)
    colors = size_palette(sizes_of(pairs))
    styles = dict(zip(versions, ("-", "--"), strict=False))
    for ax, label in zip(axes, labels, strict=False):
        mine = data["label"] == label
        baseline = str(data.loc[mine, "baseline"].iloc[0])
        log2_axis(ax, "x", exact.dropna())
        xlim = ax.get_xlim()
        for name in order:
            for version in versions:
                sub = mine & (data["size_name"] == name) & (data["version"] == version)
                if not sub.any():
                    continue
                values = exact[sub & exact.notna()].to_numpy(dtype=float)
                count = int((sub & (exact.notna() | below | above)).sum())
                median = f", median {np.median(values):.3g}" if len(values) else ""
                censored_ecdf(ax, values, int(below[sub].sum()), int(above[sub].sum()), xlim, color=colors[name],
                              linestyle=styles[version], label=f"{name} {version} ({count}{median})")
        ax.set_xlim(xlim)
        ax.axvline(1.0, color="0.2", linestyle=":", linewidth=1)
        ax.legend(title="size, campaign (pairs)", loc="upper left", frameon=False, fontsize=7)
        ax.set_xlabel(f"{_metric_name(pairs)} ratio {label} / {baseline} (per run)")
        ax.set_ylabel("ECDF")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{label} vs {baseline}")
    fig.suptitle(title or wrap(f"per-run {_metric_name(pairs)} ratio, two campaigns of one design: "
                               + " (solid) against ".join(versions) + " (dashed)", 90))
    return fig
