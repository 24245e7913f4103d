"""Figures for campaigns, shared by ``fecbench report`` and the notebooks (one implementation each).

Every function takes frames from :mod:`fecbench.results` and returns a ``matplotlib.figure.Figure``
built without pyplot (no global state, works under the Agg backend and inline in Jupyter). Style,
after the seed papers: one colour per label, stable across all figures of a database (from the
``labels`` attribute ``results.load`` puts on its frames); one colour per file size on a
sequential scale; sizes shown as kB/MB; ratios on a log2 axis with a reference line at 1; times on
log axes where they span decades.

Figures:
- ``ratio_ecdf``: ECDF of a metric ratio (e.g. DCT of quic-fec / quic), one curve per file size,
  one panel per compared label — Fig. 6, 7, 10 of Michel et al. 2019; also the data-received
  ratios of the thesis (Fig. 5.9, 5.15) when there is no size.
- ``ratio_vs_factors``: the same ratios against each design factor (where FEC hurts: low bw, low r).
- ``metric_ecdf``: ECDF of a metric per label (re-buffering time, data received: thesis Fig. 5.7–5.19),
  optionally one panel per size (download completion times).
- ``status_bars``, ``fidelity_scatter``, ``loss_fidelity``: what ran and whether the emulation
  matched the design.
- ``path_share``, ``path_share_vs_capacity``: multipath — how each label spread its packets over the
  paths (from ``results.path_traffic``), and whether it follows the paths' capacities.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

#: matplotlib settings for paper figures (readable when shrunk to a column width).
PAPER_RC = {
    "figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight", "font.size": 10,
    "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9, "legend.title_fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "lines.linewidth": 1.6, "axes.spines.top": False,
    "axes.spines.right": False,
}
LABEL_PALETTE = "colorblind"
SIZE_PALETTE = "viridis"
METRIC_TITLES = {
    "dct_ms": "download completion time (ms)", "handshake_ms": "handshake time (ms)",
    "rebuffering_ms": "total re-buffering time (ms)", "bytes_app": "data received",
    "client_wall_ms": "client wall time (ms)", "messages_late": "late messages",
    "messages_corrupt": "corrupted messages", "lost": "lost packets", "recovered": "recovered packets",
    "rtt_ms": "RTT (ms)", "bytes_sent": "bytes sent", "packets_sent": "packets sent",
}
FACTOR_TITLES = {"bw": "bandwidth (Mbit/s)", "owd": "one-way delay (ms)", "p": "p", "r": "r", "k": "k",
                 "h": "h", "loss": "loss rate", "bw_1/bw_2": "bandwidth ratio path 1 / path 2",
                 "owd_1/owd_2": "one-way delay ratio path 1 / path 2", "p_1/p_2": "p ratio path 1 / path 2"}
PATH_PALETTE = "Set2"
FINE_RATIO_TICKS = [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2, 2.5]
NICE_RATIO_TICKS = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10, 20]
STATUS_COLORS = {"ok": "#4c9a2a", "failed": "#c0392b", "timeout": "#e67e22", "unsupported": "#95a5a6",
                 "fidelity": "#8e44ad", "interrupted": "#f1c40f", "pending": "#d0d3d4"}


def styled(func: Callable[..., Figure]) -> Callable[..., Figure]:
    """Build the figure under the paper style, whatever the caller's global matplotlib settings."""
    @wraps(func)
    def wrapper(*args, **kwargs) -> Figure:
        with matplotlib.rc_context(), sns.axes_style("whitegrid"):
            matplotlib.rcParams.update(PAPER_RC)
            return func(*args, **kwargs)
    return wrapper


# --- naming and colours ----------------------------------------------------------------------

def format_size(size: float | None) -> str:
    """Bytes as the papers write them (decimal units): 1000 → '1 kB', 1_000_000 → '1 MB'."""
    if size is None or (isinstance(size, float) and math.isnan(size)) or size is pd.NA:
        return "messages"
    size = float(size)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def format_bytes_axis(value: float, _pos: object = None) -> str:
    """Tick label for byte counts (1.5 MB, 200 kB)."""
    if value <= 0:
        return "0"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} B"


def _plain_number(value: float, _pos: object = None) -> str:
    return f"{value:g}"


def labels_of(frame: pd.DataFrame) -> list[str]:
    """All labels of the database the frame came from (for stable colours), else of the frame."""
    labels = frame.attrs.get("labels")
    if labels:
        return list(labels)
    column = "label" if "label" in frame else None
    return sorted(frame[column].dropna().unique()) if column else []


def label_palette(labels: Sequence[str]) -> dict[str, tuple]:
    """One colour per label, in sorted label order: the same label has the same colour everywhere."""
    ordered = sorted(set(labels))
    base = sns.color_palette(LABEL_PALETTE, 10)
    # Colour-blind palette reordered so that the first labels get clearly distinct hues
    # (its orange and vermillion are close: vermillion comes late).
    colors = [base[i] for i in (0, 1, 2, 4, 5, 9, 6, 3, 8, 7)]
    return {label: colors[i % len(colors)] for i, label in enumerate(ordered)}


def size_palette(sizes: Sequence[float]) -> dict[str, tuple]:
    """One colour per file size (sequential: small = dark, large = light), keyed by size name."""
    ordered = sorted({float(s) for s in sizes if s is not None and not pd.isna(s)})
    cmap = matplotlib.colormaps[SIZE_PALETTE]
    # Spread over the map's 0–0.9 range (its yellow end is too pale on white).
    steps = np.linspace(0.0, 0.9, len(ordered)) if len(ordered) > 1 else [0.35]
    return {format_size(s): tuple(cmap(x)[:3]) for s, x in zip(ordered, steps, strict=True)}


def _sizes_of(frame: pd.DataFrame) -> list[float]:
    sizes = frame.attrs.get("sizes")
    if sizes:
        return list(sizes)
    return sorted(frame["size"].dropna().unique()) if "size" in frame else []


def _with_size_names(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The frame with a ``size_name`` column, and the size names in increasing size order."""
    frame = frame.copy()
    frame["size_name"] = [format_size(s) for s in frame["size"]] if "size" in frame else "messages"
    order = [format_size(s) for s in sorted(frame["size"].dropna().unique())] if "size" in frame else []
    if frame["size_name"].eq("messages").any():
        order.append("messages")
    return frame, order


def _log2_axis(ax, which: str, values: pd.Series) -> None:
    """A log2 ratio axis (``which`` = "x" or "y") with plain-number ticks (0.25, 0.5, 1, 2, 4)."""
    finite = values[np.isfinite(values) & (values > 0)]
    low, high = (finite.min(), finite.max()) if len(finite) else (0.5, 2.0)
    if high / low < 1.25:  # ratios all close to 1 (data received): a linear axis reads better
        low, high = min(low, 0.99), max(high, 1.01)
        pad = 0.05 * (high - low)
        (ax.set_xscale if which == "x" else ax.set_yscale)("linear")
        (ax.set_xlim if which == "x" else ax.set_ylim)(low - pad, high + pad)
        return
    low, high = min(low, 0.9), max(high, 1.1)
    span = math.log2(high) - math.log2(low)
    pad = 2 ** (0.04 * max(span, 1))
    if span <= 1.3:  # less than 2.5×: tenths
        candidates = FINE_RATIO_TICKS
    elif span <= 4:  # less than 16×: round numbers between the powers of two
        candidates = NICE_RATIO_TICKS
    else:
        step = math.ceil(span / 8)
        candidates = [2.0 ** e for e in range(math.floor(math.log2(low)), math.ceil(math.log2(high)) + 1, step)]
    ticks = [t for t in candidates if low / pad <= t <= high * pad]
    set_scale, set_lim = (ax.set_xscale, ax.set_xlim) if which == "x" else (ax.set_yscale, ax.set_ylim)
    axis = ax.xaxis if which == "x" else ax.yaxis
    set_scale("log", base=2)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(_plain_number))
    axis.set_minor_formatter(NullFormatter())
    set_lim(low / pad, high * pad)


def _log10_axis(axis: matplotlib.axis.Axis) -> None:
    """Plain-number ticks at 1, 2, 5 × powers of ten on an axis already in log scale."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(_plain_number))
    axis.set_minor_formatter(NullFormatter())


def _empty(fig: Figure, ax, text: str) -> Figure:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.3")
    ax.set_axis_off()
    return fig


def _grid(n: int, ncols: int, width: float = 4.2, height: float = 3.3) -> tuple[Figure, list]:
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_axis_off()
    return fig, axes[:max(n, 1)]


def metric_title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric)


def factor_title(factor: str) -> str:
    return FACTOR_TITLES.get(factor, factor)


# --- figures ---------------------------------------------------------------------------------

@styled
def ratio_ecdf(pairs: pd.DataFrame, *, title: str | None = None, ncols: int = 3) -> Figure:
    """ECDF of the ratio ``label / baseline`` (a ``results.paired`` frame), one curve per size.

    One panel per compared label. A ratio below 1 means the label did better than the baseline
    for a time metric (DCT, re-buffering) and worse for an amount (data received).
    """
    metric = pairs.attrs.get("metric", "metric")
    usable = pairs[pairs["ratio"].notna() & np.isfinite(pairs["ratio"]) & (pairs["ratio"] > 0)]
    labels = sorted(usable["label"].unique())
    fig, axes = _grid(len(labels), ncols)
    if not labels:
        return _empty(fig, axes[0], f"no paired ok runs to compare ({metric})")
    data, order = _with_size_names(usable)
    sized = any(name != "messages" for name in order)
    colors = size_palette(_sizes_of(pairs)) if sized else None
    label_colors = label_palette(labels_of(pairs))
    baseline = str(pairs["baseline"].iloc[0])
    for ax, label in zip(axes, labels, strict=False):
        sub = data[data["label"] == label]
        if sized:
            sns.ecdfplot(data=sub, x="ratio", hue="size_name", hue_order=[o for o in order if o in
                         set(sub["size_name"])], palette=colors, ax=ax)
            legend = ax.get_legend()
            if legend is not None:
                legend.set_title("file size")
        else:
            sns.ecdfplot(data=sub, x="ratio", color=label_colors[label], ax=ax)
        ax.axvline(1.0, color="0.2", linestyle="--", linewidth=1)
        _log2_axis(ax, "x", usable["ratio"])
        ax.set_xlabel(f"{metric_title(metric).split(' (')[0]} ratio {label} / {baseline}")
        ax.set_ylabel("ECDF")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{label} vs {baseline}")
    if title:
        fig.suptitle(title)
    return fig


@styled
def ratio_vs_factors(pairs: pd.DataFrame, factors: Sequence[str] | None = None, *, label: str | None = None,
                     per_point: bool = True, ncols: int = 3, log2_factors: Sequence[str] = ()) -> Figure:
    """The ratio ``label / baseline`` against each design factor, coloured by size, log2 y axis.

    ``per_point``: one marker per design point and size, the median ratio over its repetitions
    (as the 2019 paper reduces its 9 repetitions); otherwise one marker per pair.
    ``log2_factors``: factors drawn on a log2 x axis with a line at 1 (path ratios such as
    ``bw_1/bw_2`` from ``results.path_asymmetry``).
    """
    metric = pairs.attrs.get("metric", "metric")
    factors = list(factors if factors is not None else pairs.attrs.get("factors", []))
    factors = [f for f in factors if f in pairs and pd.api.types.is_numeric_dtype(pairs[f])]
    usable = pairs[pairs["ratio"].notna() & np.isfinite(pairs["ratio"]) & (pairs["ratio"] > 0)]
    if label is None and len(usable):
        label = sorted(usable["label"].unique())[0]
    usable = usable[usable["label"] == label]
    if per_point and "point" in usable and len(usable):
        keys = [k for k in ("design_hash", "workload", "point", "size") if k in usable]
        medians = usable.groupby(keys, dropna=False)["ratio"].median().rename("ratio")
        usable = (usable.drop(columns="ratio").drop_duplicates(keys)
                  .merge(medians.reset_index(), on=keys, how="left"))
    fig, axes = _grid(len(factors), ncols, width=3.6, height=3.0)
    if not factors or usable.empty:
        return _empty(fig, axes[0], "no paired ok runs or no numeric factors")
    data, order = _with_size_names(usable)
    sized = any(name != "messages" for name in order)
    baseline = str(pairs["baseline"].iloc[0])
    for i, (ax, factor) in enumerate(zip(axes, factors, strict=False)):
        if sized:
            sns.scatterplot(data=data, x=factor, y="ratio", hue="size_name", hue_order=order,
                            palette=size_palette(_sizes_of(pairs)), ax=ax, s=18, alpha=0.75,
                            edgecolor="none", legend=(i == 0))
        else:
            sns.scatterplot(data=data, x=factor, y="ratio", color=label_palette(labels_of(pairs))[label],
                            ax=ax, s=18, alpha=0.75, edgecolor="none")
        ax.axhline(1.0, color="0.2", linestyle="--", linewidth=1)
        _log2_axis(ax, "y", usable["ratio"])
        if factor in log2_factors:
            ax.axvline(1.0, color="0.6", linestyle=":", linewidth=1)
            _log2_axis(ax, "x", usable[factor].dropna())
        ax.set_xlabel(factor_title(factor))
        ax.set_ylabel(f"ratio {label} / {baseline}" if i % ncols == 0 else "")
        if i == 0 and sized and ax.get_legend() is not None:  # one legend for all panels, outside
            handles, names = ax.get_legend_handles_labels()
            ax.get_legend().remove()
            fig.legend(handles, names, title="file size", loc="outside right upper", frameon=False)
    what = "median over repetitions per design point" if per_point else "every repetition"
    fig.suptitle(f"{metric_title(metric).split(' (')[0]} ratio {label} / {baseline} against each factor\n"
                 f"({what})")
    return fig


@styled
def metric_ecdf(frame: pd.DataFrame, metric: str, *, per_size: bool = False, log: bool | None = None,
                ncols: int = 2, title: str | None = None) -> Figure:
    """ECDF of ``metric`` over ok runs, one curve per label (thesis Fig. 5.7, 5.8; DCT per size)."""
    usable = frame[(frame["status"] == "ok") & frame[metric].notna()] if "status" in frame else frame
    usable = usable[usable[metric].notna()]
    data, order = _with_size_names(usable)
    panels = order if per_size else [None]
    fig, axes = _grid(len(panels), ncols, width=3.8 if per_size else 5.2, height=3.2 if per_size else 3.6)
    if usable.empty:
        return _empty(fig, axes[0], f"no ok runs with {metric_title(metric)}")
    colors = label_palette(labels_of(frame))
    for i, (ax, panel) in enumerate(zip(axes, panels, strict=False)):
        sub = data if panel is None else data[data["size_name"] == panel]
        labels = sorted(sub["label"].unique())
        # A log axis when the values span more than a decade and are all positive.
        use_log = log if log is not None else bool((sub[metric] > 0).all()
                                                   and sub[metric].max() > 10 * sub[metric].min())
        sns.ecdfplot(data=sub, x=metric, hue="label", hue_order=labels, palette=colors, ax=ax,
                     log_scale=(10, False) if use_log else False, legend=(i == 0))
        if use_log:
            _log10_axis(ax.xaxis)
        if metric.startswith("bytes"):
            ax.xaxis.set_major_formatter(FuncFormatter(format_bytes_axis))
        ax.set_xlabel(metric_title(metric))
        ax.set_ylabel("ECDF" if i % ncols == 0 else "")
        ax.set_ylim(0, 1.02)
        if panel is not None:
            ax.set_title(panel)
    if title:
        fig.suptitle(title)
    return fig


@styled
def metric_vs_factor(frame: pd.DataFrame, metric: str, factor: str, *, title: str | None = None) -> Figure:
    """``metric`` of ok runs against one factor, one colour per label (thesis Fig. 5.10)."""
    usable = frame[(frame["status"] == "ok") & frame[metric].notna() & frame[factor].notna()]
    fig = Figure(figsize=(5.2, 3.6), layout="constrained")
    ax = fig.subplots()
    if usable.empty:
        return _empty(fig, ax, f"no ok runs with {metric_title(metric)}")
    labels = sorted(usable["label"].unique())
    sns.scatterplot(data=usable, x=factor, y=metric, hue="label", hue_order=labels,
                    palette=label_palette(labels_of(frame)), ax=ax, s=22, alpha=0.8, edgecolor="none")
    ax.set_xlabel(factor_title(factor))
    ax.set_ylabel(metric_title(metric))
    if metric.startswith("bytes"):
        ax.yaxis.set_major_formatter(FuncFormatter(format_bytes_axis))
    if title:
        ax.set_title(title)
    return fig


@styled
def status_bars(frame: pd.DataFrame) -> Figure:
    """Runs per label, stacked by status (what ran, what failed)."""
    fig = Figure(figsize=(6.4, 0.5 + 0.45 * max(frame["label"].nunique(), 2)), layout="constrained")
    ax = fig.subplots()
    if frame.empty:
        return _empty(fig, ax, "no runs in this database")
    table = pd.crosstab(frame["label"], frame["status"])
    statuses = [s for s in STATUS_COLORS if s in table.columns] + \
               [s for s in table.columns if s not in STATUS_COLORS]
    left = np.zeros(len(table))
    for status in statuses:
        values = table[status].to_numpy()
        ax.barh(table.index, values, left=left, color=STATUS_COLORS.get(status, "0.5"), label=status)
        left += values
    ax.invert_yaxis()
    ax.set_xlabel("runs")
    ax.legend(ncols=min(len(statuses), 4), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.grid(axis="y", visible=False)
    return fig


def _identity_scatter(ax, configured: pd.Series, measured: pd.Series, ok: pd.Series | None,
                      xlabel: str, ylabel: str) -> None:
    values = pd.DataFrame({"configured": configured, "measured": measured,
                           "check": "no verdict" if ok is None else ok.map(
                               {True: "ok", False: "out of tolerance"}).fillna("no verdict")}).dropna(
        subset=["configured", "measured"])
    if values.empty:
        ax.text(0.5, 0.5, "no measurements", ha="center", va="center", transform=ax.transAxes)
        return
    sns.scatterplot(data=values, x="configured", y="measured", hue="check", ax=ax, s=22,
                    palette={"ok": "#4c9a2a", "out of tolerance": "#c0392b", "no verdict": "0.5"},
                    edgecolor="none", alpha=0.8)
    low = min(values["configured"].min(), values["measured"].min())
    high = max(values["configured"].max(), values["measured"].max())
    ax.plot([low, high], [low, high], color="0.2", linestyle="--", linewidth=1, label="measured = configured")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False)


@styled
def fidelity_scatter(fid: pd.DataFrame) -> Figure:
    """Measured against configured RTT and rate (a ``results.fidelity`` frame), identity line.

    One panel per quantity that has measurements (the rate is not measured on every backend).
    """
    panels = [(title, fid[f"{col}_configured_{unit}"], fid[f"{col}_measured_{unit}"], label)
              for title, col, unit, label in (("round-trip time", "rtt", "ms", "RTT (ms)"),
                                              ("bottleneck rate", "rate", "mbit", "rate (Mbit/s)"))
              if not fid.empty and (fid[f"{col}_configured_{unit}"].notna()
                                    & fid[f"{col}_measured_{unit}"].notna()).any()]
    fig, axes = _grid(len(panels), 2, width=4.6, height=3.8)
    if not panels:
        return _empty(fig, axes[0], "no fidelity measurements in this database")
    ok = fid["ok"].astype("object").where(fid["ok"].notna(), None) if "ok" in fid else None
    for ax, (title, configured, measured, label) in zip(axes, panels, strict=True):
        _identity_scatter(ax, configured, measured, ok, f"configured {label}", f"measured {label}")
        ax.set_title(title)
    return fig


@styled
def loss_fidelity(stats: pd.DataFrame) -> Figure:
    """Loss rate counted by the dropper against the model's long-run rate, per link direction.

    Runs with the same model (same design point) are pooled, since one short run sees few packets;
    the grey bars show the model's ±2σ for the number of packets counted.
    """
    usable = stats[stats["loss_rate"].notna() & stats["expected_loss"].notna()]
    fig = Figure(figsize=(5.4, 4.2), layout="constrained")
    ax = fig.subplots()
    if usable.empty:
        return _empty(fig, ax, "no dropper counters with a known loss model")
    counted = usable["matched"].where(usable["matched"] > 0, usable["seen"])
    pooled = (usable.assign(counted=counted, where=usable["link"] + " " + usable["direction"])
              .groupby(["where", "expected_loss"], as_index=False)[["dropped", "counted"]].sum())
    pooled["observed"] = pooled["dropped"] / pooled["counted"]
    sigma = np.sqrt(pooled["expected_loss"] * (1 - pooled["expected_loss"]) / pooled["counted"])
    ax.vlines(pooled["expected_loss"], (pooled["expected_loss"] - 2 * sigma).clip(lower=0),
              pooled["expected_loss"] + 2 * sigma, color="0.75", linewidth=3, zorder=1)
    sns.scatterplot(data=pooled, x="expected_loss", y="observed", hue="where", ax=ax, s=28, alpha=0.85,
                    edgecolor="none", zorder=2)
    high = max(pooled["expected_loss"].max(), pooled["observed"].max(), 0.01) * 1.08
    ax.plot([0, high], [0, high], color="0.2", linestyle="--", linewidth=1, zorder=0)
    ax.set_xlim(-0.02 * high, high)
    ax.set_ylim(-0.02 * high, high)
    ax.set_xlabel("loss rate of the model")
    ax.set_ylabel("loss rate counted by the dropper")
    ax.set_title("dropped / matched packets, pooled per model")
    ax.legend(frameon=False, fontsize=8)
    return fig


@styled
def path_share(traffic: pd.DataFrame, *, direction: str = "down", ncols: int = 3) -> Figure:
    """Share of each run's packets sent on each path (a ``results.path_traffic`` frame), per label:
    stacked bars of the mean share, one panel per file size; ``direction`` "down" = server → client
    (a download's data), "up" = client → server."""
    column = f"share_{direction}"
    usable = traffic[(traffic["status"] == "ok") & traffic[column].notna()] if len(traffic) else traffic
    data, order = _with_size_names(usable) if len(usable) else (usable, [])
    fig, axes = _grid(max(len(order), 1), ncols, width=4.4,
                      height=0.9 + 0.45 * max(usable["label"].nunique() if len(usable) else 1, 2))
    if usable.empty:
        return _empty(fig, axes[0], "no per-path packet counts in this database")
    paths = sorted(int(p) for p in usable["path"].unique())
    colors = dict(zip(paths, sns.color_palette(PATH_PALETTE, max(len(paths), 3)), strict=False))
    labels = sorted(usable["label"].unique())
    for i, (ax, size_name) in enumerate(zip(axes, order, strict=False)):
        sub = data[data["size_name"] == size_name]
        means = sub.groupby(["label", "path"])[column].mean().unstack("path").reindex(
            index=labels, columns=paths).fillna(0.0)
        left = np.zeros(len(means))
        for path in paths:
            values = means[path].to_numpy()
            ax.barh(means.index, values, left=left, color=colors[path], label=f"path {path}")
            for y, (x0, width) in enumerate(zip(left, values, strict=True)):
                if width >= 0.08:
                    ax.text(x0 + width / 2, y, f"{width:.0%}", ha="center", va="center", fontsize=8)
            left += values
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0%}"))
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        ax.set_title(size_name)
        ax.set_xlabel(f"mean share of {'server → client' if direction == 'down' else 'client → server'} packets")
        if i % ncols:
            ax.set_yticklabels([])
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside upper center", ncols=len(paths), frameon=False)
    return fig


@styled
def path_share_vs_capacity(traffic: pd.DataFrame, *, labels: Sequence[str] | None = None,
                           ncols: int = 3) -> Figure:
    """Per run, the share of server → client packets on path 1 against path 1's share of the
    capacity, bw_1 / (bw_1 + bw_2), coloured by size, one panel per label; the diagonal is a
    scheduler that splits the data in proportion to the paths' rates."""
    needed = {"bw_1", "bw_2", "share_down", "path"}
    usable = traffic[(traffic["status"] == "ok") & (traffic["path"] == 1)] if needed <= set(traffic) else \
        traffic.iloc[0:0]
    if labels is not None:
        usable = usable[usable["label"].isin(labels)]
    shown = sorted(usable["label"].unique()) if len(usable) else []
    fig, axes = _grid(max(len(shown), 1), ncols, width=3.8, height=3.4)
    if not shown:
        return _empty(fig, axes[0], "no two-path runs with per-path bandwidths")
    data, order = _with_size_names(usable.assign(capacity_1=usable["bw_1"] / (usable["bw_1"] + usable["bw_2"])))
    palette = size_palette(_sizes_of(traffic))
    for i, (ax, label) in enumerate(zip(axes, shown, strict=False)):
        sub = data[data["label"] == label]
        sns.scatterplot(data=sub, x="capacity_1", y="share_down", hue="size_name",
                        hue_order=[o for o in order if o in set(sub["size_name"])], palette=palette, ax=ax,
                        s=24, alpha=0.8, edgecolor="none", legend=(i == 0))
        ax.plot([0, 1], [0, 1], color="0.2", linestyle="--", linewidth=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(label)
        ax.set_xlabel("path 1 share of capacity, bw_1 / (bw_1 + bw_2)")
        ax.set_ylabel("path 1 share of data packets" if i % ncols == 0 else "")
        if i == 0 and ax.get_legend() is not None:
            ax.get_legend().set_title("file size")
    return fig


def save(fig: Figure, path: str | Path) -> Path:
    """Write a figure as PNG (parents created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(PAPER_RC):
        fig.savefig(path, format="png")
    return path
