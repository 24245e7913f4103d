"""Figures of one metric per label: ECDFs (DCT per size, re-buffering time, data received: thesis
Fig. 5.7–5.19) and a metric against one factor (thesis Fig. 5.10)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from fecbench.analysis.style import (
    empty,
    factor_title,
    format_bytes_axis,
    grid,
    label_palette,
    labels_of,
    log10_axis,
    metric_title,
    styled,
    with_size_names,
)


@styled
def metric_ecdf(frame: pd.DataFrame, metric: str, *, per_size: bool = False, log: bool | None = None,
                ncols: int = 2, title: str | None = None) -> Figure:
    """ECDF of ``metric`` over ok runs, one curve per label (thesis Fig. 5.7, 5.8; DCT per size)."""
    usable = frame[(frame["status"] == "ok") & frame[metric].notna()] if "status" in frame else frame
    usable = usable[usable[metric].notna()]
    data, order = with_size_names(usable)
    panels = order if per_size else [None]
    fig, axes = grid(len(panels), ncols, width=3.8 if per_size else 5.2, height=3.2 if per_size else 3.6)
    if usable.empty:
        return empty(fig, axes[0], f"no ok runs with {metric_title(metric)}")
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
            log10_axis(ax.xaxis)
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
        return empty(fig, ax, f"no ok runs with {metric_title(metric)}")
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


