"""Where the messages of real-time runs went (a ``fecbench.analysis.studies.message_accounting.accounting`` frame)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from fecbench.analysis.figures.style import empty, grid, stacked_barh, styled, wrap

#: Each message's fate and the colour-blind-safe palette order it is drawn in.
MESSAGE_FATES = {"messages_on_time": "on time", "messages_late": "late", "messages_corrupted": "corrupted",
                 "messages_lost": "lost"}
#: What became of the packets the receiver did not get in time, and of those FEC rebuilt.
PACKET_FATES = {"recovered": "rebuilt by FEC", "missing_in_network": "lost in the network",
                "missing_sender_dropped": "dropped by the sender", "missing_not_sent": "never sent"}


@styled
def message_fate(accounting: pd.DataFrame) -> Figure:
    """Per label over its ok runs: the share of the messages sent that were played on time, late,
    corrupted (some packets missing) or lost (all missing); and, per run on average, the packets
    FEC rebuilt and where the missing packets of the bad messages went."""
    ok = accounting[accounting["status"] == "ok"] if len(accounting) else accounting
    ok = ok[ok["messages_sent"].notna()] if len(ok) else ok
    labels = sorted(ok["label"].unique()) if len(ok) else []
    fig, axes = grid(2, 2, width=5.2, height=1.6 + 0.45 * max(len(labels), 2))
    if not labels:
        fig.delaxes(axes[1])
        return empty(fig, axes[0], "no messages runs with an accounting in this database")
    sums = ok.groupby("label")[[*MESSAGE_FATES, "messages_sent"]].sum().astype(float)
    shares = sums[list(MESSAGE_FATES)].div(sums["messages_sent"].where(sums["messages_sent"] > 0), axis=0)
    stacked_barh(axes[0], shares.fillna(0.0), MESSAGE_FATES, sns.color_palette("RdYlGn_r", 4), share_at_least=0.06)
    axes[0].set_xlim(0, 1)
    axes[0].xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0%}"))
    axes[0].set_xlabel("share of the messages sent")
    packets = ok.groupby("label")[list(PACKET_FATES)].mean().astype(float).fillna(0.0)
    stacked_barh(axes[1], packets, PACKET_FATES, [sns.color_palette("Set2")[0], *sns.color_palette("Reds", 3)[::-1]])
    for ax in axes:
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False, fontsize=8)
    axes[1].set_yticklabels([])
    axes[1].set_xlabel("packets per run (mean)")
    runs = ok.groupby("label").size()
    fig.suptitle(wrap("where the messages went (" + ", ".join(f"{label}: {n} runs" for label, n in runs.items())
                      + ")", 110))
    return fig
