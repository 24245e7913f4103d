"""Competing flows (runs of designs with `[[flow]]`): the flows table, fairness and throughput over time.

- ``flows(db)``: one row per run and flow (the foreground's row included: ``role`` foreground or
  competing), with the run's columns (campaign, point, factors, label, repetition, status) under
  ``run_*`` names where they clash, what crossed the lossy links per direction, and ``background``: the
  run's competing flows by label ("+"-joined, "none"), the grouping of the 2019 paper's Fig. 9;
- ``window_throughput(frame)``: per flow, its throughput (Mbit/s) in the run's *overlap window*, the
  time during which the foreground and every competing flow were all active (the data direction: down
  for downloads and bulk flows, up for uploads), from the droppers' per-bin counters;
- ``fairness(frame)``: per run, Jain's index over those throughputs, and the foreground's share;
- ``shares_over_time(frame)``: per run and time bin, each flow's share of the bottleneck's bytes in the
  data direction (where flows overlap: bins with at least two flows);
- ``foreground_dct(frame)``: per background label (and per point with ``by_point``) the foreground's
  DCT: runs, median with its bootstrap interval, quartiles.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fecbench.analysis import results, stats
from fecbench.analysis.results import DbLike

SEED = 2609


def flows(db: DbLike) -> pd.DataFrame:
    """The flows table joined with the runs frame (empty when no run had competing flows)."""
    raw = results.frame(db, "flows") if "flows" in results.table_names(db) else pd.DataFrame()
    if raw.empty:
        return pd.DataFrame(columns=["run_key", "flow", "role", "label", "background"])
    extra = [json.loads(text) if text else {} for text in raw.pop("json")]
    raw["series"] = [e.get("series") or [] for e in extra]
    raw["bin_s"] = [e.get("bin_s") for e in extra]
    raw["data"] = [e.get("data") or "down" for e in extra]
    runs = results.load(db)
    keep = ["key", "campaign", "design_hash", "point", *runs.attrs["factors"], "label", "repetition", "status",
            "workload", "size"]
    runs = runs[keep].rename(columns={"key": "run_key", "label": "run_label", "status": "run_status",
                                      "workload": "run_workload", "size": "run_size"})
    frame = raw.merge(runs, on="run_key", how="left")
    competing = frame[frame["role"] == "competing"].groupby("run_key")["label"].agg(lambda s: "+".join(sorted(s)))
    frame["background"] = frame["run_key"].map(competing).fillna("none")
    frame.attrs["factors"] = runs.attrs["factors"] if hasattr(runs, "attrs") else []
    return frame.sort_values(["run_key", "role", "flow"], kind="stable").reset_index(drop=True)


def _data_column(row: pd.Series) -> int:
    """Index in a series cell of the flow's data direction: 1 (down) unless it sends up."""
    return 2 if row.get("data") == "up" else 1


def overlap(group: pd.DataFrame) -> tuple[float, float] | None:
    """The window (s from the foreground's start) during which every flow of a run was active."""
    starts, ends = group["started_s"].astype(float), group["ended_s"].astype(float)
    if starts.isna().any() or ends.isna().any():
        return None
    low, high = float(starts.max()), float(ends.min())
    return (low, high) if high > low else None


def window_throughput(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with ``window_s`` (the run's overlap window's length) and ``throughput_mbit`` (each flow's
    bytes in its data direction within the window, over the window)."""
    out = frame.copy()
    out["window_s"] = np.nan
    out["throughput_mbit"] = np.nan
    for _run, group in out.groupby("run_key"):
        window = overlap(group)
        if window is None:
            continue
        low, high = window
        for index, row in group.iterrows():
            width = row["bin_s"] or 0.1
            column = _data_column(row)
            inside = sum(cell[column] for cell in row["series"] if low <= cell[0] and cell[0] + width <= high + 1e-9)
            span = sum(width for cell in row["series"] if low <= cell[0] and cell[0] + width <= high + 1e-9)
            out.loc[index, "window_s"] = high - low
            out.loc[index, "throughput_mbit"] = inside * 8 / 1e6 / (high - low) if span else 0.0
    return out


def fairness(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: Jain's fairness index over its flows' window throughputs, the foreground's share of their
    sum, the window, the background label and the run's columns."""
    windowed = window_throughput(frame)
    rows = []
    for run, group in windowed.groupby("run_key"):
        rates = group["throughput_mbit"].dropna()
        fg = group[group["role"] == "foreground"]["throughput_mbit"]
        total = float(rates.sum())
        first = group.iloc[0]
        rows.append({"run_key": run, "background": first["background"], "run_label": first["run_label"],
                     "point": first["point"], "repetition": first["repetition"], "flows": len(group),
                     "window_s": first["window_s"], "jain": stats.jain_index(rates) if len(rates) else np.nan,
                     "foreground_share": float(fg.iloc[0]) / total if len(fg) and total > 0 else np.nan})
    return pd.DataFrame(rows)


def shares_over_time(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run, time bin (s from the foreground's start) and flow: bytes in the data direction and the share
    of the bin's bytes, over bins where at least two flows carried data."""
    rows = []
    for row in frame.itertuples(index=False):
        column = _data_column(pd.Series(row._asdict()))
        for cell in row.series:
            rows.append({"run_key": row.run_key, "background": row.background, "flow": row.flow, "role": row.role,
                         "label": row.label, "t_s": cell[0], "bytes": cell[column]})
    long = pd.DataFrame(rows, columns=["run_key", "background", "flow", "role", "label", "t_s", "bytes"])
    if long.empty:
        return long.assign(share=pd.Series(dtype=float))
    totals = long.groupby(["run_key", "t_s"])["bytes"].transform("sum")
    active = long[long["bytes"] > 0].groupby(["run_key", "t_s"])["flow"].transform("count")
    long["share"] = (long["bytes"] / totals.where(totals > 0)).astype(float)
    long["flows_active"] = active.reindex(long.index).fillna(0)
    both = long.groupby(["run_key", "t_s"])["flows_active"].transform("max") >= 2
    return long[both].drop(columns="flows_active").reset_index(drop=True)


def foreground_dct(frame: pd.DataFrame, by_point: bool = False, level: float = 0.95,
                   seed: int = SEED) -> pd.DataFrame:
    """The foreground's DCT per background label (and point): runs (ok ones), median with its bootstrap
    interval (seeded per group), quartiles."""
    fg = frame[(frame["role"] == "foreground") & (frame["run_status"] == "ok") & frame["dct_ms"].notna()]
    keys: Sequence[str] = ["point", "background"] if by_point else ["background"]
    rows = []
    for key, group in fg.groupby(list(keys)):
        values = group["dct_ms"].astype(float).to_numpy()
        low, high = stats.bootstrap_median(values, level=level, seed=stats.group_seed(seed, key))
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)), "runs": len(values),
                     "median_ms": float(np.median(values)), "ci_low_ms": low, "ci_high_ms": high,
                     "q25_ms": float(np.quantile(values, 0.25)), "q75_ms": float(np.quantile(values, 0.75))})
    table = pd.DataFrame(rows)
    table.attrs.update(level=level, seed=seed)
    return table
