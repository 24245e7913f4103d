"""Competing flows (frames of ``fecbench.analysis.studies.flows``): the foreground's DCT per background (the 2019
paper's Fig. 9), throughput shares over time, Jain's fairness index."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from fecbench.analysis.figures.style import empty, grid, label_palette, styled, wrap


@styled
def foreground_dct_box(frame: pd.DataFrame) -> Figure:
    """Box plots of the foreground's DCT (ok runs) per background label, every run a dot."""
    fg = frame[(frame["role"] == "foreground") & (frame["run_status"] == "ok") & frame["dct_ms"].notna()]
    fig = Figure(figsize=(1.8 + 1.3 * max(fg["background"].nunique(), 2), 3.6), layout="constrained")
    ax = fig.subplots()
    if fg.empty:
        return empty(fig, ax, "no foreground transfer with competing flows ended ok")
    order = sorted(fg["background"].unique())
    data = fg.assign(dct_s=fg["dct_ms"] / 1000)
    sns.boxplot(data=data, x="background", y="dct_s", order=order, ax=ax, color="0.85", showfliers=False, width=0.5)
    sns.stripplot(data=data, x="background", y="dct_s", order=order, ax=ax, color="0.2", size=3, jitter=0.15)
    counts = data.groupby("background").size()
    ax.set_xticks(range(len(order)), [f"{wrap(b, 14)}\n({counts[b]} runs)" for b in order])
    ax.set_xlabel("competing flows (background)")
    ax.set_ylabel(f"foreground ({', '.join(sorted(fg['label'].unique()))}) DCT (s)")
    return fig


@styled
def flow_shares(shares: pd.DataFrame) -> Figure:
    """Per background label: each flow's mean share of the bottleneck's bytes (data direction) per time bin
    over its runs, where flows overlap; time from the foreground's start."""
    backgrounds = sorted(shares["background"].unique()) if len(shares) else []
    fig, axes = grid(max(len(backgrounds), 1), min(max(len(backgrounds), 1), 3), width=4.4, height=3.0)
    if not backgrounds:
        return empty(fig, axes[0], "no bins where competing flows overlapped")
    palette = label_palette(sorted(shares["label"].unique()))
    for ax, background in zip(axes, backgrounds, strict=False):
        part = shares[shares["background"] == background]
        mean = part.groupby(["label", "t_s"])["share"].mean().reset_index()
        for label, line in mean.groupby("label"):
            ax.plot(line["t_s"], line["share"], color=palette[label], label=label, linewidth=1.2)
        ax.axvline(0, color="0.4", linestyle=":", linewidth=1)
        ax.set_ylim(0, 1)
        ax.set_title(wrap(f"with {background} ({part['run_key'].nunique()} runs)", 44), fontsize=9)
        ax.set_xlabel("time from the foreground's start (s)")
        ax.set_ylabel("share of the bottleneck's bytes")
        ax.legend(frameon=False, fontsize=7)
    return fig


@styled
def jain_box(fair: pd.DataFrame) -> Figure:
    """Jain's fairness index of each run's flows (in the overlap window) per background label."""
    fig = Figure(figsize=(1.8 + 1.3 * max(fair["background"].nunique() if len(fair) else 0, 2), 3.2),
                 layout="constrained")
    ax = fig.subplots()
    valid = fair[fair["jain"].notna()] if len(fair) else fair
    if valid.empty:
        return empty(fig, ax, "no run with an overlap window")
    order = sorted(valid["background"].unique())
    sns.boxplot(data=valid, x="background", y="jain", order=order, ax=ax, color="0.85", showfliers=False, width=0.5)
    sns.stripplot(data=valid, x="background", y="jain", order=order, ax=ax, color="0.2", size=3, jitter=0.15)
    ax.set_xticks(range(len(order)), [wrap(b, 14) for b in order])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("competing flows (background)")
    ax.set_ylabel("Jain's fairness index")
    return fig
