"""One run's timeline (``fecbench explain``), or a run beside its twin without FEC on the same losses.

Takes ``fecbench.analysis.traces.timeline.Timeline`` objects (their frames: ``metrics``, ``rate``, ``marks``,
``flows``). Per path, four panels sharing the time axis: congestion window and bytes in flight (kB), sending
rate (Mbit/s), smoothed RTT (ms), and the events as marks on rows of their own (dropper drops, declared
losses, repairs sent, sources recovered, recovery signals, blocks abandoned); runs with competing flows get a
last panel with each flow's throughput. Two runs are drawn in two columns on the same axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from fecbench.analysis.figures.style import format_size, styled, wrap
from fecbench.inputs.directions import SENDER_DIRECTION

#: How each mark is drawn: (name, marker, colour).
MARK_STYLE = {"drop": ("dropper drop", "x", "#c0392b"), "repair_drop": ("dropper drop (repair)", "x", "#f1948a"),
              "lost": ("declared lost", "v", "#e67e22"),
              "repair_sent": ("repair sent", "|", "#2471a3"), "recovered": ("source recovered", "o", "#27ae60"),
              "signalled": ("recovery signalled", "^", "#8e44ad"), "abandoned": ("block abandoned", "s", "#7f8c8d")}
ROWS = ("window", "rate", "rtt", "marks")
#: The link direction carrying a sender's packets (link_stats: forward = client → server).
_HEIGHTS = {"window": 2.2, "rate": 1.6, "rtt": 1.5, "marks": 1.3, "flows": 1.8}


def _title(timeline: Any) -> str:
    run, summary = timeline.run, timeline.summary
    size = format_size(run.get("size")) if run.get("size") is not None and run.get("size") == run.get("size") else ""
    dct = summary.get("dct_ms")
    return wrap(f"{run.get('label')} ({run.get('impl')}) {size} {run.get('workload')}, point {run.get('point')}, "
                f"rep. {run.get('repetition')}: {run.get('status')}"
                + (f", DCT {dct / 1000:.3g} s" if dct == dct and dct is not None else "")
                + f"\nrun {str(run.get('key'))[:12]}, qlog of the {timeline.sender}", 70)


def _window(ax, timeline: Any, path: int) -> None:
    part = timeline.metrics[timeline.metrics["path"] == path]
    ax.step(part["t_s"], part["cwnd"] / 1000, where="post", color="#1f77b4", label="congestion window")
    ax.step(part["t_s"], part["bytes_in_flight"] / 1000, where="post", color="#ff7f0e", linewidth=1.0,
            alpha=0.85, label="bytes in flight")
    flows = getattr(timeline, "flow_windows", None)
    if flows is not None and len(flows) and path == min(timeline.paths):   # competing flows' senders
        for name, part in flows.groupby("flow"):
            ax.step(part["t_s"], part["cwnd"] / 1000, where="post", linewidth=1.0, linestyle="--",
                    label=f"cwnd of flow {name}")
        ax.legend(frameon=False, fontsize=7, loc="upper right")
    ax.set_ylabel("cwnd, in flight (kB)")
    ax.set_ylim(bottom=0)


def _rate(ax, timeline: Any, path: int) -> None:
    part = timeline.rate[timeline.rate["path"] == path]
    ax.step(part["t_s"], part["mbit_s"], where="mid", color="#2ca02c", label="sending rate")
    links = getattr(timeline, "capacity", None)
    if links is not None and len(links):   # a trace link's capacity on this path (one path: whichever it is on)
        mine = links[(links["path"] == path) | (len(timeline.paths) == 1)]
        for link, cap in mine.groupby("link"):
            ax.step(cap["t_s"], cap["mbit_s"], where="mid", color="#7f7f7f", linewidth=1.0,
                    label=f"capacity of trace link {link}")
        if len(mine):
            ax.legend(frameon=False, fontsize=7, loc="upper right")
    ax.set_ylabel("sending rate\n(Mbit/s)")
    ax.set_ylim(bottom=0)


def _rtt(ax, timeline: Any, path: int) -> None:
    part = timeline.metrics[timeline.metrics["path"] == path]
    ax.step(part["t_s"], part["srtt_ms"], where="post", color="#9467bd", label="smoothed RTT")
    ax.set_ylabel("smoothed RTT\n(ms)")


def _marks(ax, timeline: Any, path: int) -> None:
    part = timeline.marks[timeline.marks["path"] == path]
    names = list(MARK_STYLE)
    for row, mark in enumerate(names):
        times = part.loc[part["mark"] == mark, "t_s"]
        name, marker, colour = MARK_STYLE[mark]
        if len(times):
            ax.scatter(times, [row] * len(times), marker=marker, color=colour, s=28 if marker != "|" else 60,
                       linewidths=1.2, zorder=3)
    counts = {mark: int((part["mark"] == mark).sum()) for mark in names}
    ax.set_yticks(range(len(names)), [f"{MARK_STYLE[m][0]} ({counts[m]})" for m in names], fontsize=7)
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.invert_yaxis()
    causes = timeline.summary.get("causes") or {}
    queue = causes.get(f"queue_{SENDER_DIRECTION.get(timeline.sender, 'reverse')}")
    if queue is not None and queue == queue and queue > 0:    # counted by the bottleneck, without times
        ax.text(0.99, 0.03, f"+ {int(queue)} queue drops at the bottleneck (counted, not timed)",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="#c0392b",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    ax.grid(axis="y", color="0.92")


def _flows(ax, timeline: Any) -> None:
    ax.set_ylabel("flows' throughput\n(Mbit/s)")
    if timeline.flows.empty:
        ax.text(0.5, 0.5, "no competing flows recorded for this run", ha="center", va="center",
                transform=ax.transAxes, fontsize=8, color="0.3")
        return
    for name, part in timeline.flows.groupby("flow"):
        ax.step(part["t_s"], part["mbit_s"], where="mid", linewidth=1.1, label=wrap(str(name), 30))
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False, fontsize=7, loc="upper right", title="flow (bins from the foreground client's start)",
              title_fontsize=7)


def _legend(fig: Figure) -> None:
    lines = [Line2D([], [], color="#1f77b4", label="congestion window (kB)"),
             Line2D([], [], color="#ff7f0e", label="bytes in flight (kB)"),
             Line2D([], [], color="#2ca02c", label="sending rate (Mbit/s)"),
             Line2D([], [], color="#9467bd", label="smoothed RTT (ms)")]
    marks = [Line2D([], [], linestyle="", marker=marker, color=colour, label=name, markersize=7)
             for name, marker, colour in MARK_STYLE.values()]
    fig.legend(handles=lines + marks, loc="outside lower center", ncols=5, frameon=False, fontsize=8)


@styled
def run_timeline(timelines: Sequence[Any]) -> Figure:
    """The timelines side by side (one column each), one block of panels per path, flows last."""
    paths = sorted({p for t in timelines for p in t.paths})
    with_flows = any(len(t.flows) for t in timelines)
    rows = [(path, kind) for path in paths for kind in ROWS] + ([(None, "flows")] if with_flows else [])
    fig = Figure(figsize=(6.2 * len(timelines) + 1.2, sum(_HEIGHTS[k] for _, k in rows) + 1.6),
                 layout="constrained")
    axes = fig.subplots(len(rows), len(timelines), sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": [_HEIGHTS[k] for _, k in rows]})
    span = max([float(t.metrics["t_s"].max()) for t in timelines if len(t.metrics)]
               + [float(t.marks["t_s"].max()) for t in timelines if len(t.marks)]
               + [float(t.rate["t_s"].max()) for t in timelines if len(t.rate)] + [1e-3])
    for column, timeline in enumerate(timelines):
        for row, (path, kind) in enumerate(rows):
            ax = axes[row][column]
            if kind == "flows":
                _flows(ax, timeline)
            else:
                {"window": _window, "rate": _rate, "rtt": _rtt, "marks": _marks}[kind](ax, timeline, path)
            if kind == "window" and len(paths) > 1:
                ax.set_title(f"path {path}", fontsize=9, loc="left")
        axes[0][column].set_title(_title(timeline), fontsize=9)
        unit = "ms" if span < 2 else "s"
        axes[-1][column].set_xlabel(f"time from the {timeline.sender}'s first qlog event ({unit})")
        axes[-1][column].set_xlim(0, span * 1.02)
        if unit == "ms":
            axes[-1][column].xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value * 1000:g}"))
    for row, (path, kind) in enumerate(rows):       # the same y range across the columns of a row
        if kind == "marks":
            continue
        line = [axes[row][c] for c in range(len(timelines))]
        top = max(ax.get_ylim()[1] for ax in line)
        if kind == "rtt":
            values = pd.concat([t.metrics.loc[t.metrics["path"] == path, "srtt_ms"] for t in timelines]).dropna()
            values = values[values > 0]
            if len(values) and values.max() > 20 * values.min():    # an initial guess far above the samples
                for ax in line:
                    ax.set_yscale("log")
                    ax.set_ylabel("smoothed RTT\n(ms, log scale)")
                continue
        for ax in line:
            ax.set_ylim(0, top)
    _legend(fig)
    return fig
