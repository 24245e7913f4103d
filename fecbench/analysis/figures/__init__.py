"""Figures for campaigns, shared by ``fecbench report`` and the notebooks (one implementation each).

Every function takes frames from :mod:`fecbench.analysis.results` or :mod:`fecbench.analysis.ratios` and returns a
``matplotlib.figure.Figure`` built without pyplot (no global state, works under the Agg backend and
inline in Jupyter). Style (``style``), after the seed papers: one colour per label, stable across
all figures of a database; one colour per file size on a sequential scale; sizes shown as kB/MB;
ratios on a log2 axis with a reference line at 1; times on log axes where they span decades.

Ratio figures (``ratio``) name the statistic they show and how many pairs or points were
censored or left out, and why:

- ``point_ratio_ecdf``: ECDF over the design points of the ratio of medians (FEC ÷ no FEC over the
  loss seeds of a point: the statistic of Michel et al. 2019, Fig. 6, 7, 10), one curve per size.
- ``ratio_ecdf``: ECDF of the per-run ratios (one point's seeds: Fig. 5 of the 2019 paper; the
  data-received ratios of the thesis, Fig. 5.9, 5.15), one curve per size, one panel per label.
- ``ratio_vs_factors``: per-point ratios against each design factor (where FEC hurts: low bw, low r),
  with bootstrap intervals and censored points marked.

Timeouts are censored (``fecbench.analysis.ratios``): a ratio only known to be at least a bound is drawn at
+∞ in ECDFs (the curve ends below 1) and as ▲ at its bound against factors; one only known to be at
most a bound at 0 (the curve starts above 0) and as ▼.

Other figures: ``metric_ecdf`` and ``metric_vs_factor`` (``metrics``: DCT per size, re-buffering
time, data received: thesis Fig. 5.7–5.19); ``status_bars``, ``fidelity_scatter``,
``loss_fidelity``, ``run_accuracy``, ``exclusion_bars`` (``checks``: what ran, whether the emulation matched the
design, how late the endpoints and delay elements ran during each run, and the share of pairs each side of a
comparison lost);
``message_fate`` (``messages``: where each label's messages went, and their missing packets, from
``message_accounting``); ``path_share``, ``path_share_vs_capacity`` (``paths``: how each multipath
label spread its packets over the paths, from ``results.path_traffic``); ``class_ecdf`` (``loss_position_plots``:
DCT per loss-position class from the verdict logs: no loss, loss, loss among the last k packets; with
``loss_position.starlink_table``); ``run_timeline`` (``fecbench explain``: one run's congestion window, bytes in
flight, sending rate and smoothed RTT over time per path, with its drops, losses, repairs and recoveries as
marks, beside its twin without FEC with ``--pair``); ``page_waterfall`` (``page_plots``: a page load's activities
over time, from ``studies.pages``); ``bto_sweep`` (``bto_plots``: rQUIC's completion rate against its
buffer timeout per network, from ``studies.bto``: Figs. 12, 13). ``save`` writes a PNG.
"""

from fecbench.analysis.figures.bto_plots import bto_sweep
from fecbench.analysis.figures.checks import (
    exclusion_bars,
    fidelity_scatter,
    loss_fidelity,
    run_accuracy,
    status_bars,
)
from fecbench.analysis.figures.distributions import metric_ecdf, metric_vs_factor
from fecbench.analysis.figures.flow_plots import flow_shares, foreground_dct_box, jain_box
from fecbench.analysis.figures.loss_position_plots import class_ecdf
from fecbench.analysis.figures.message_plots import message_fate
from fecbench.analysis.figures.page_plots import page_waterfall
from fecbench.analysis.figures.path_plots import path_share, path_share_vs_capacity
from fecbench.analysis.figures.ratio_plots import point_ratio_ecdf, ratio_ecdf, ratio_vs_factors, versions_ratio_ecdf
from fecbench.analysis.figures.style import (
    FACTOR_TITLES,
    LABEL_PALETTE,
    METRIC_TITLES,
    PAPER_RC,
    SIZE_PALETTE,
    STATUS_COLORS,
    factor_title,
    format_bytes_axis,
    format_size,
    label_palette,
    labels_of,
    metric_title,
    save,
    size_palette,
    styled,
)
from fecbench.analysis.figures.timeline_plots import run_timeline

__all__ = [
    "FACTOR_TITLES", "LABEL_PALETTE", "METRIC_TITLES", "PAPER_RC", "SIZE_PALETTE", "STATUS_COLORS", "bto_sweep",
    "class_ecdf",
    "exclusion_bars",
    "factor_title", "fidelity_scatter", "flow_shares", "foreground_dct_box", "format_bytes_axis", "format_size",
    "jain_box", "label_palette", "labels_of",
    "loss_fidelity", "message_fate", "metric_ecdf", "metric_title", "metric_vs_factor", "page_waterfall", "path_share",
    "path_share_vs_capacity", "point_ratio_ecdf", "ratio_ecdf", "ratio_vs_factors", "run_accuracy", "run_timeline",
    "save",
    "size_palette", "status_bars", "styled", "versions_ratio_ecdf",
]
