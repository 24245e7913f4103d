"""The report's competing-flows section: the foreground's DCT per background (2019 paper, Fig. 9) with
bootstrap intervals, Jain's fairness index and the foreground's share per background, throughput shares
over time (``fecbench.analysis.studies.flows``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from fecbench.analysis import figures
from fecbench.analysis.studies import flows


def flows_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path,
                  figure: Callable[..., None]) -> None:
    frame = flows.flows(db)
    if frame.empty:
        return
    dct = flows.foreground_dct(frame)
    name = "foreground DCT per background (competing flows)"
    tables[name] = dct
    notes[name] = (f"The measured transfer's completion time per set of competing flows (ok runs): median with its "
                   f"{dct.attrs['level']:.0%} bootstrap interval over the runs (seeded), quartiles.")
    fair = flows.fairness(frame)
    if len(fair):
        name = "fairness per background"
        tables[name] = (fair.groupby("background")
                        .agg(runs=("run_key", "size"), jain_median=("jain", "median"),
                             foreground_share_median=("foreground_share", "median"),
                             window_s_median=("window_s", "median")).reset_index())
        notes[name] = ("Jain's index over the throughputs of every flow of a run (the foreground's included) while "
                       "all were active, from the droppers' per-flow counters; 1: equal shares, 1/n: one flow took "
                       "everything. Foreground share: its part of the flows' total in that window.")
    figure("flows-foreground-dct", figures.foreground_dct_box(frame),
           "The foreground's DCT per set of competing flows (box: quartiles; dots: runs), as the 2019 paper's Fig. 9.")
    figure("flows-jain", figures.jain_box(fair), "Jain's fairness index per run, per set of competing flows.")
    figure("flows-shares", figures.flow_shares(flows.shares_over_time(frame)),
           "Each flow's mean share of the bottleneck's bytes per time bin where flows overlapped; dotted: the "
           "foreground's start.")
