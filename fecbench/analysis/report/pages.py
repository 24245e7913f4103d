"""The report's page-load section (runs of `[workload] kind = "page"`): each label's load times with the
median's interval and how dispersed they are, per point, and each label's median load as a waterfall
(``fecbench.analysis.studies.pages``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from fecbench.analysis import figures, stats
from fecbench.analysis.studies import pages

LEVEL = 0.95


def pages_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path, frame: pd.DataFrame,
                  figure: Callable[..., None], seed: int) -> None:
    ok = pages.ok_loads(frame)
    if ok.empty:
        return
    spread = pages.load_spread(ok, by_point=True)
    intervals = [stats.bootstrap_median(ok.loc[(ok["label"] == row.label) & (ok["point"] == row.point),
                                               "dct_ms"].to_numpy(float),
                                        level=LEVEL, seed=stats.group_seed(seed, (row.label, row.point)))
                 for row in spread.itertuples()]
    at = spread.columns.get_loc("median_ms") + 1
    spread.insert(at, "median_low_ms", [low for low, _ in intervals])
    spread.insert(at + 1, "median_high_ms", [high for _, high in intervals])
    name = "page load times per label and point"
    tables[name] = spread
    notes[name] = (f"Each label's page load times (ok runs) per design point: the median with its {LEVEL:.0%} "
                   "bootstrap interval over the runs (seeded; none under 3 runs), the 10th–90th percentiles, the "
                   "interquartile range and p90 ÷ p10 (how dispersed the loads are: rQUIC 2021 §VI-C finds QUIC's "
                   "more dispersed). A timed-out load is not in these numbers; the status table counts it.")
    name = "page load spread per label"
    tables[name] = pages.load_spread(ok)
    notes[name] = "The same over every point of the design."
    median = pages.median_runs(ok)
    figure("page-waterfall", figures.page_waterfall(pages.activities(db), list(median.values())),
           "Each label's median page load, activity by activity: a download light while it waits for its first byte "
           "and dark while it arrives, a computation hatched, the load time dashed.")
