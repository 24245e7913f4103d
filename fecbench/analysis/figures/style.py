"""Style shared by the figures: paper rc settings, names, colours and axes.

One colour per label, chosen by its name and stable across all figures of a database (each figure colours the
database's labels, the ``labels`` attribute ``results.load`` puts on its frames, so two labels wanting one colour
settle it the same way everywhere); one colour per file size on a sequential scale; sizes shown
as kB/MB; ratios on a log2 axis with a reference line at 1; times on log axes where they span
decades. Figures are built without pyplot (no global state; Agg backend or inline in Jupyter).
"""

from __future__ import annotations

import hashlib
import math
import textwrap
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
    "stall_ms": "time a waiting player stood still (ms)",
    "client_wall_ms": "client wall time (ms)", "messages_late": "late messages",
    "messages_corrupt": "corrupted messages", "lost": "lost packets", "recovered": "recovered packets",
    "rtt_ms": "RTT (ms)", "bytes_sent": "bytes sent", "packets_sent": "packets sent",
    "file_e2e_ms": "a file's end-to-end time (ms)", "coding_overhead": "coding overhead (repairs ÷ datagrams)",
}
FACTOR_TITLES = {"bw": "bandwidth (Mbit/s)", "owd": "one-way delay (ms)", "p": "p", "r": "r", "k": "k",
                 "h": "h", "loss": "loss rate", "bw_1/bw_2": "bandwidth ratio path 1 / path 2",
                 "owd_1/owd_2": "one-way delay ratio path 1 / path 2", "p_1/p_2": "p ratio path 1 / path 2"}
PATH_PALETTE = "Set2"
FINE_RATIO_TICKS = [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2, 2.5]
NICE_RATIO_TICKS = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10, 20]
STATUS_COLORS = {"ok": "#4c9a2a", "failed": "#c0392b", "timeout": "#e67e22", "unsupported": "#95a5a6",
                 "fidelity": "#8e44ad", "interrupted": "#f1c40f", "running": "#85c1e9",
                 "pending": "#d0d3d4"}


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
    """Bytes as the design wrote them: decimal units (1000 → '1 kB', 1_000_000 → '1 MB'), binary ones for a
    whole number of them that is not decimal (5 × 2^20 → '5 MiB', never '5.24288 MB')."""
    if size is None or (isinstance(size, float) and math.isnan(size)) or size is pd.NA:
        return "messages"
    size = float(size)
    for (unit, scale), (binary, bscale) in zip((("GB", 1e9), ("MB", 1e6), ("kB", 1e3)),
                                               (("GiB", 2.0 ** 30), ("MiB", 2.0 ** 20), ("KiB", 2.0 ** 10)),
                                               strict=True):
        if size >= bscale and size % bscale == 0 and size % scale != 0:
            return f"{size / bscale:g} {binary}"
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


def plain_number(value: float, _pos: object = None) -> str:
    return f"{value:g}"


def labels_of(frame: pd.DataFrame) -> list[str]:
    """All labels of the database the frame came from (for stable colours), else of the frame."""
    labels = frame.attrs.get("labels")
    if labels:
        return list(labels)
    column = "label" if "label" in frame else None
    return sorted(frame[column].dropna().unique()) if column else []


def label_palette(labels: Sequence[str]) -> dict[str, tuple]:
    """One colour per label, chosen by the label's name (a digest of it picks the palette's colour; a label whose
    colour another label of ``labels`` took first, in sorted order, takes the next free one): the same label has
    the same colour in every figure and notebook, whatever other labels a figure shows, unless two of them want
    the same colour."""
    base = sns.color_palette(LABEL_PALETTE, 10)
    # Colour-blind palette reordered so that the first colours are clearly distinct hues
    # (its orange and vermillion are close: vermillion comes late).
    colors = [base[i] for i in (0, 1, 2, 4, 5, 9, 6, 3, 8, 7)]
    taken: dict[int, str] = {}
    out = {}
    for label in sorted(set(labels)):
        slot = int(hashlib.sha256(str(label).encode()).hexdigest(), 16) % len(colors)
        for step in range(len(colors)):
            if (slot + step) % len(colors) not in taken:
                slot = (slot + step) % len(colors)
                break
        taken.setdefault(slot, label)
        out[label] = colors[slot]
    return out


def size_palette(sizes: Sequence[float]) -> dict[str, tuple]:
    """One colour per file size (sequential: small = dark, large = light), keyed by size name."""
    ordered = sorted({float(s) for s in sizes if s is not None and not pd.isna(s)})
    cmap = matplotlib.colormaps[SIZE_PALETTE]
    # Spread over the map's 0–0.9 range (its yellow end is too pale on white).
    steps = np.linspace(0.0, 0.9, len(ordered)) if len(ordered) > 1 else [0.35]
    return {format_size(s): tuple(cmap(x)[:3]) for s, x in zip(ordered, steps, strict=True)}


def sizes_of(frame: pd.DataFrame) -> list[float]:
    sizes = frame.attrs.get("sizes")
    if sizes:
        return list(sizes)
    return sorted(frame["size"].dropna().unique()) if "size" in frame else []


def with_size_names(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The frame with a ``size_name`` column, and the size names in increasing size order."""
    frame = frame.copy()
    frame["size_name"] = [format_size(s) for s in frame["size"]] if "size" in frame else "messages"
    order = [format_size(s) for s in sorted(frame["size"].dropna().unique())] if "size" in frame else []
    if frame["size_name"].eq("messages").any():
        order.append("messages")
    return frame, order


def log2_axis(ax, which: str, values: pd.Series) -> None:
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
    axis.set_major_formatter(FuncFormatter(plain_number))
    axis.set_minor_formatter(NullFormatter())
    set_lim(low / pad, high * pad)


def log10_axis(axis: matplotlib.axis.Axis) -> None:
    """Plain-number ticks at 1, 2, 5 × powers of ten on an axis already in log scale."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(plain_number))
    axis.set_minor_formatter(NullFormatter())


def stacked_barh(ax, table: pd.DataFrame, names: dict, colors: Sequence, share_at_least: float | None = None) -> None:
    """One horizontal bar per row of ``table`` (top to bottom), its ``names`` columns stacked left to
    right in ``colors``, each segment labelled with ``names[column]``; with ``share_at_least``, the
    segments at least that wide carry their value as a percentage."""
    left = np.zeros(len(table))
    for (column, name), color in zip(names.items(), colors, strict=True):
        values = table[column].to_numpy(dtype=float)
        ax.barh(table.index, values, left=left, color=color, label=name)
        for y, (x0, width) in enumerate(zip(left, values, strict=True)):
            if share_at_least is not None and width >= share_at_least:
                ax.text(x0 + width / 2, y, f"{width:.0%}", ha="center", va="center", fontsize=8)
        left += values
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)


def empty(fig: Figure, ax, text: str) -> Figure:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.3")
    ax.set_axis_off()
    return fig


def grid(n: int, ncols: int, width: float = 4.2, height: float = 3.3) -> tuple[Figure, list]:
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_axis_off()
    return fig, axes[:max(n, 1)]


def wrap(text: str, width: int = 64) -> str:
    """Each line of ``text`` wrapped at ``width`` characters (notes must not widen a figure)."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent="  ") for line in text.split("\n"))


def note_below(ax, text: str) -> None:
    """A small note under the panel's x label (constrained layout makes room for it)."""
    ax.annotate(wrap(text), xy=(0, 0), xycoords="axes fraction", xytext=(0, -30), textcoords="offset points",
                ha="left", va="top", fontsize=7, color="0.25")


def censored_ecdf(ax, values: np.ndarray, below: int, above: int, xlim: tuple[float, float], **style) -> None:
    """An ECDF step curve over ``len(values) + below + above`` items where ``below`` items are known
    to lie left of the axis (drawn at 0: the curve starts at their share) and ``above`` right of it
    (at +∞: the curve ends below 1)."""
    total = len(values) + below + above
    if total == 0:
        return
    xs = np.sort(values)
    ys = (below + np.arange(1, len(xs) + 1)) / total
    start = below / total
    ax.step(np.r_[xlim[0], xs, xlim[1]], np.r_[start, ys, ys[-1] if len(ys) else start], where="post", **style)


#: dct_ms by workload: what the DCT measures (quic-impls/README.md defines each).
DCT_TITLES = {"download": "download completion time (ms)", "upload": "upload completion time (ms)",
              "reqresp": "request/response completion time (ms)", "page": "page load time (ms)"}


def metric_title(metric: str, frame: pd.DataFrame | None = None) -> str:
    """An axis title for ``metric``; for ``dct_ms`` named after the workload of ``frame``'s runs when
    they share one (an upload's DCT is not a download's), "completion time" when they are mixed."""
    if metric == "dct_ms" and frame is not None and "workload" in frame:
        workloads = set(frame["workload"].dropna())
        return DCT_TITLES.get(workloads.pop(), METRIC_TITLES[metric]) if len(workloads) == 1 \
            else "completion time (ms)"
    return METRIC_TITLES.get(metric, metric)


def factor_title(factor: str) -> str:
    return FACTOR_TITLES.get(factor, factor)



def save(fig: Figure, path: str | Path) -> Path:
    """Write a figure as PNG (parents created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(PAPER_RC):
        fig.savefig(path, format="png")
    return path
