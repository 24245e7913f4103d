"""Page loads (frames of ``fecbench.analysis.studies.pages``): a run's waterfall, as browsers' developer tools draw
one: each activity a bar from its start to its end, a download's wait for its first byte lighter than its
arrival, a computation hatched; one panel per run shown (a label's median load, side by side)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from fecbench.analysis.figures.style import empty, grid, label_palette, styled, wrap


@styled
def page_waterfall(frame: pd.DataFrame, run_keys: Sequence[str]) -> Figure:
    """The activities of each run of ``run_keys`` (rows of ``studies.pages.activities``), in the page's order."""
    runs = [k for k in run_keys if (frame["run_key"] == k).any()] if len(frame) else []
    n_acts = max((int((frame["run_key"] == k).sum()) for k in runs), default=1)
    fig, axes = grid(max(len(runs), 1), max(len(runs), 1), width=5.2, height=1.2 + 0.22 * n_acts)
    if not runs:
        return empty(fig, axes[0], "no page load reported its activities")
    palette = label_palette(sorted(frame["label"].dropna().unique()))
    for ax, key in zip(axes, runs, strict=False):
        acts = frame[frame["run_key"] == key].sort_values("order")
        label = str(acts["label"].iloc[0])
        colour = palette.get(label, "0.4")
        for row, act in enumerate(acts.itertuples()):
            _bar(ax, row, act, colour)
        ax.set_yticks(range(len(acts)), [wrap(str(a), 28).split("\n")[0] for a in acts["activity"]], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel("time from the page's start (ms)")
        ax.axvline(float(acts["load_ms"].iloc[0]), color="0.2", lw=0.8, ls="--")
        ax.set_title(f"{label}: loaded in {float(acts['load_ms'].iloc[0]):,.0f} ms", fontsize=9)
    return fig


def _bar(ax, row: int, act, colour) -> None:
    start, end = act.start_ms, act.end_ms
    if pd.isna(start):
        return
    end = start if pd.isna(end) else end
    if act.kind == "compute":
        ax.barh(row, end - start, left=start, color="white", edgecolor=colour, hatch="////", height=0.6, lw=0.6)
        return
    first = end if pd.isna(act.first_byte_ms) else act.first_byte_ms
    ax.barh(row, first - start, left=start, color=colour, alpha=0.35, height=0.6, lw=0)
    ax.barh(row, end - first, left=first, color=colour, height=0.6, lw=0)
