"""Page loads (runs of `[workload] kind = "page"`, fecbench/pages): each activity's times and the spread of the
load times.

- ``activities(db)``: one row per run and activity of its page (``activity``, ``kind``, ``start_ms``,
  ``first_byte_ms``, ``end_ms`` from the page's start, as the client measured them; the metrics JSON's
  ``page.activities``), with the run's columns (label, point, factors, repetition, status, ``load_ms``);
- ``load_spread(runs)``: per label (and point with ``by_point``): the runs that loaded, the median load time and
  the 10th, 25th, 75th and 90th percentiles, the interquartile range and the p90 ÷ p10 ratio: how dispersed a
  label's page loads are (rQUIC 2021 §VI-C: "QUIC more dispersed"), over ok runs;
- ``ok_loads(runs)``: the page loads that ended ok with a load time, what the two below and the report read;
- ``median_runs(runs)``: per label, the run whose load time is its median's (the lower one of an even count),
  the run a waterfall shows (``figures.page_waterfall``).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fecbench.analysis import results
from fecbench.analysis.results import DbLike

TIMES = ("start_ms", "first_byte_ms", "end_ms")
QUANTILES = (0.10, 0.25, 0.50, 0.75, 0.90)


def activities(db: DbLike) -> pd.DataFrame:
    """Every activity of every page-load run that reported them (its client's metrics JSON)."""
    rows = []
    for key, workload, text in results.run_metrics_json(db):
        if workload != "page" or not text:
            continue
        page = json.loads(text).get("page") or {}
        for order, act in enumerate(page.get("activities") or []):
            rows.append({"run_key": key, "order": order, "activity": act.get("id"), "kind": act.get("kind"),
                         **{t: act.get(t) for t in TIMES}, "load_ms": page.get("load_ms")})
    frame = pd.DataFrame(rows, columns=["run_key", "order", "activity", "kind", *TIMES, "load_ms"])
    if frame.empty:
        return frame
    runs = results.load(db)
    keep = [c for c in runs.columns if c not in frame.columns or c == "key"]
    return frame.merge(runs[keep], left_on="run_key", right_on="key", how="left").drop(columns="key")


def ok_loads(runs: pd.DataFrame) -> pd.DataFrame:
    """The page loads of ``runs`` that ended ok with a load time."""
    return runs[(runs["workload"] == "page") & (runs["status"] == "ok") & runs["dct_ms"].notna()]


def load_spread(runs: pd.DataFrame, by_point: bool = False) -> pd.DataFrame:
    """Per label (and point): how the ok page loads' times spread (see the module's doc)."""
    loads = ok_loads(runs)
    keys = ["label", "point"] if by_point else ["label"]
    rows = []
    for group, part in loads.groupby(keys, sort=True):
        q = np.quantile(part["dct_ms"].to_numpy(float), QUANTILES)
        rows.append({**dict(zip(keys, group if isinstance(group, tuple) else (group,), strict=True)),
                     "runs": len(part), "p10_ms": q[0], "p25_ms": q[1], "median_ms": q[2], "p75_ms": q[3],
                     "p90_ms": q[4], "iqr_ms": q[3] - q[1], "p90_over_p10": q[4] / q[0] if q[0] > 0 else np.nan})
    return pd.DataFrame(rows, columns=[*keys, "runs", "p10_ms", "p25_ms", "median_ms", "p75_ms", "p90_ms", "iqr_ms",
                                       "p90_over_p10"])


def median_runs(runs: pd.DataFrame) -> dict[str, str]:
    """Per label, the key of its ok page load whose time is the median (the lower middle of an even count)."""
    out = {}
    for label, part in ok_loads(runs).groupby("label", sort=True):
        ordered = part.sort_values(["dct_ms", "key"])
        out[str(label)] = str(ordered["key"].iloc[(len(ordered) - 1) // 2])
    return out
