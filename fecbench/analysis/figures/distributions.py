"""Figures of one metric per label: ECDFs (DCT per size, re-buffering time, data received: thesis
Fig. 5.7–5.19) and a metric against one factor (thesis Fig. 5.10)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from fecbench.analysis.figures.style import (
    censored_ecdf,
    empty,
    factor_title,
    format_bytes_axis,
    grid,
    label_palette,
    labels_of,
    log10_axis,
    metric_title,
    note_below,
    styled,
    with_size_names,
)


def _limits(values: pd.Series, log: bool) -> tuple[float, float]:
    """x limits around the finished values, with a margin (multiplicative on a log axis)."""
    if values.empty:
        return (1.0, 10.0) if log else (0.0, 1.0)
    low, high = float(values.min()), float(values.max())
    if log:
        return low / 1.15, high * 1.15
    pad = 0.05 * (high - low) or 0.05 * abs(high) or 1.0
    return low - pad, high + pad


@styled
def metric_ecdf(frame: pd.DataFrame, metric: str, *, per_size: bool = False, log: bool | None = None,
                ncols: int = 2, title: str | None = None) -> Figure:
    """ECDF of ``metric`` per label (thesis Fig. 5.7, 5.8; DCT per size), one curve per label.

    Runs that finished (``ok`` with the metric) are drawn at their value. For a duration
    (``ratios.CENSORED_METRICS``), runs that reached the time limit are censored: counted at +∞, so
    the curve ends below 1 by their share (with one time limit, this is the Kaplan–Meier estimate),
    and each panel's note says how many per label. Other statuses are not drawn (see status_bars).
    """
    from fecbench.analysis.ratios import CENSORED_METRICS

    has_status = "status" in frame
    finished = frame[metric].notna() & ((frame["status"] == "ok") if has_status else True)
    timed_out = pd.Series(False, index=frame.index)
    if has_status and metric in CENSORED_METRICS:
        timed_out = (frame["status"] == "timeout") & ~finished
    drawn = finished | timed_out
    usable = frame[drawn].assign(censored=timed_out[drawn])
    data, order = with_size_names(usable)
    panels = order if per_size else [None]
    fig, axes = grid(len(panels), ncols, width=3.8 if per_size else 5.2, height=3.2 if per_size else 3.6)
    if not finished.any():
        return empty(fig, axes[0], f"no ok runs with {metric_title(metric, frame)}")
    colors = label_palette(labels_of(frame))
    for i, (ax, panel) in enumerate(zip(axes, panels, strict=False)):
        sub = data if panel is None else data[data["size_name"] == panel]
        values = sub.loc[~sub["censored"], metric]
        # A log axis when the values span more than a decade and are all positive.
        use_log = log if log is not None else bool(len(values) and (values > 0).all()
                                                   and values.max() > 10 * values.min())
        if use_log:
            ax.set_xscale("log")
        xlim = _limits(values, use_log)
        notes = []
        for label in sorted(sub["label"].unique()):
            mine = sub[sub["label"] == label]
            above = int(mine["censored"].sum())
            censored_ecdf(ax, mine.loc[~mine["censored"], metric].to_numpy(dtype=float), 0, above, xlim,
                          color=colors[label], label=f"{label} ({len(mine)})")
            if above:
                notes.append(f"{label} {above} of {len(mine)}")
        ax.set_xlim(xlim)
        if use_log:
            log10_axis(ax.xaxis)
        if metric.startswith("bytes"):
            ax.xaxis.set_major_formatter(FuncFormatter(format_bytes_axis))
        ax.legend(title="label (runs)", frameon=False, fontsize=8)
        if notes:
            note_below(ax, "timed out (at +∞): " + ", ".join(notes))
        ax.set_xlabel(metric_title(metric, frame))
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
        return empty(fig, ax, f"no ok runs with {metric_title(metric, frame)}")
    labels = sorted(usable["label"].unique())
    sns.scatterplot(data=usable, x=factor, y=metric, hue="label", hue_order=labels,
                    palette=label_palette(labels_of(frame)), ax=ax, s=22, alpha=0.8, edgecolor="none")
    ax.set_xlabel(factor_title(factor))
    ax.set_ylabel(metric_title(metric, frame))
    if metric.startswith("bytes"):
        ax.yaxis.set_major_formatter(FuncFormatter(format_bytes_axis))
    if title:
        ax.set_title(title)
    return fig


