"""Multipath figures: how each label spread its packets over the paths (``results.path_traffic``)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from fecbench.analysis.figures.style import (
    PATH_PALETTE,
    empty,
    grid,
    size_palette,
    sizes_of,
    stacked_barh,
    styled,
    with_size_names,
)


@styled
def path_share(traffic: pd.DataFrame, *, direction: str = "down", ncols: int = 3) -> Figure:
    """Share of each run's packets sent on each path (a ``results.path_traffic`` frame), per label:
    stacked bars of the mean share, one panel per file size; ``direction`` "down" = server → client
    (a download's data), "up" = client → server."""
    column = f"share_{direction}"
    usable = traffic[(traffic["status"] == "ok") & traffic[column].notna()] if len(traffic) else traffic
    data, order = with_size_names(usable) if len(usable) else (usable, [])
    fig, axes = grid(max(len(order), 1), ncols, width=4.4,
                      height=0.9 + 0.45 * max(usable["label"].nunique() if len(usable) else 1, 2))
    if usable.empty:
        return empty(fig, axes[0], "no per-path packet counts in this database")
    paths = sorted(int(p) for p in usable["path"].unique())
    colors = dict(zip(paths, sns.color_palette(PATH_PALETTE, max(len(paths), 3)), strict=False))
    labels = sorted(usable["label"].unique())
    for i, (ax, size_name) in enumerate(zip(axes, order, strict=False)):
        sub = data[data["size_name"] == size_name]
        means = sub.groupby(["label", "path"])[column].mean().unstack("path").reindex(
            index=labels, columns=paths).fillna(0.0)
        stacked_barh(ax, means, {path: f"path {path}" for path in paths}, [colors[path] for path in paths],
                     share_at_least=0.08)
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0%}"))
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
    fig, axes = grid(max(len(shown), 1), ncols, width=3.8, height=3.4)
    if not shown:
        return empty(fig, axes[0], "no two-path runs with per-path bandwidths")
    data, order = with_size_names(usable.assign(capacity_1=usable["bw_1"] / (usable["bw_1"] + usable["bw_2"])))
    palette = size_palette(sizes_of(traffic))
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


