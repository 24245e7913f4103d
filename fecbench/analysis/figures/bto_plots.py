"""rQUIC's buffer timeout swept (frames of ``fecbench.analysis.studies.bto``), as rQUIC 2021's Figs. 12 and 13 draw
it: per network, each run's completion rate ξ against its BTO (faint), each BTO's mean ξ (dots), the paper's
third-order least-squares fit through the means (on log BTO, the axis being logarithmic), and the network's RTT as a
vertical line; ξ = 1 is QUIC's average."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fecbench.analysis.figures.style import empty, grid, styled

#: The fit's order (the paper: "the 3rd order least squares regression of the results").
FIT_ORDER = 3


@styled
def bto_sweep(rates: pd.DataFrame) -> Figure:
    """One panel per network (point and size) of ``studies.bto.completion_rates``: ξ against the BTO."""
    groups = list(rates.groupby(["point", "size"], sort=True)) if len(rates) else []
    fig, axes = grid(max(len(groups), 1), min(max(len(groups), 1), 3), width=4.2, height=3.2)
    if not groups:
        return empty(fig, axes[0], "no coded rQUIC run with a baseline at its point")
    for ax, (_, part) in zip(axes, groups, strict=False):
        ax.scatter(part["bto_ms"], part["xi"], s=8, color="0.6", alpha=0.5, label="runs")
        means = part.groupby("bto_ms")["xi"].mean()
        ax.scatter(means.index, means.to_numpy(), s=24, color="C0", zorder=3, label="mean ξ per BTO")
        if len(means) > FIT_ORDER:
            x = np.log10(means.index.to_numpy(float))
            fit = np.polyfit(x, means.to_numpy(float), FIT_ORDER)
            grid_x = np.linspace(x.min(), x.max(), 100)
            ax.plot(10 ** grid_x, np.polyval(fit, grid_x), color="C0", lw=2, alpha=0.6, label="3rd-order fit")
        rtt = float(part["rtt_ms"].iloc[0])
        ax.axvline(rtt, color="0.2", ls="--", lw=0.8, label=f"RTT {rtt:g} ms")
        ax.axhline(1.0, color="0.5", lw=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("buffer timeout, BTO (ms)")
        ax.set_ylabel("completion rate ξ (÷ QUIC's average)")
        first = part.iloc[0]
        ax.set_title(f"{first['bw']:g} Mbit/s, RTT {rtt:g} ms, p {first['p']:g}, {int(first['size']):,} B", fontsize=9)
        ax.legend(fontsize=7)
    return fig
