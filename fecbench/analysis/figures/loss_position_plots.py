"""Loss-position classes (``fecbench.analysis.studies.loss_position``) as a figure: the ECDF of a metric per label,
one panel per nested class (all transfers, with losses, with losses among the last k packets)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fecbench.analysis.figures.style import (
    censored_ecdf,
    empty,
    grid,
    label_palette,
    labels_of,
    metric_title,
    note_below,
    styled,
)
from fecbench.analysis.studies.loss_position import DEFAULT_K, DIRECTION_NAMES, finished_values, nested_rows


@styled
def class_ecdf(classified: pd.DataFrame, direction: str = "any", metric: str = "dct_ms",
               title: str | None = None) -> Figure:
    """One panel per nested class (all / with losses / with losses in the last k packets): ECDF of
    ``metric`` per label; runs that timed out count at +∞ (the curve ends below 1)."""
    k = int(classified.attrs.get("k", DEFAULT_K))
    rows = nested_rows(k)
    fig, axes = grid(len(rows), 3, width=3.8, height=3.2)
    values_all = finished_values(classified, metric) if len(classified) else pd.Series(dtype=float)
    finite = values_all[np.isfinite(values_all)]
    if finite.empty:
        return empty(fig, axes[0], f"no finished runs with {metric_title(metric, classified)}")
    xlim = (float(finite.min()) * 0.95, float(finite.max()) * 1.05)
    colors = label_palette(labels_of(classified))
    for i, (ax, (name, members)) in enumerate(zip(axes, rows.items(), strict=True)):
        sub = classified[classified[f"class_{direction}"].isin(members)]
        notes = []
        for label in sorted(sub["label"].dropna().unique()):
            values = finished_values(sub[sub["label"] == label], metric).to_numpy()
            above = int(np.isinf(values).sum())
            censored_ecdf(ax, values[np.isfinite(values)], 0, above, xlim, color=colors[label],
                          label=f"{label} ({len(values)})")
            if above:
                notes.append(f"{label} {above}")
        ax.set_xlim(xlim)
        ax.set_ylim(0, 1.02)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(metric_title(metric, classified))
        ax.set_ylabel("ECDF" if i == 0 else "")
        if len(sub):
            ax.legend(title="label (runs)", frameon=False, fontsize=7)
        if notes:
            note_below(ax, "timed out (at +∞): " + ", ".join(notes))
    min_len = classified.attrs.get("min_len")
    only = f", packets ≥ {min_len} B" if min_len else ""
    fig.suptitle(title or f"{metric_title(metric, classified)} per loss position "
                          f"({DIRECTION_NAMES[direction]}{only}, k = {k})")
    return fig
