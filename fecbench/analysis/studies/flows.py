"""Competing flows (runs of designs with `[[flow]]`): the flows table, fairness and throughput over time.

- ``flows(db)``: one row per run and flow (the foreground's row included: ``role`` foreground or
  competing), with the run's columns (campaign, point, factors, label, repetition, status) under
  ``run_*`` names where they clash, what crossed the lossy links per direction, and ``background``: the
  run's competing flows by label ("+"-joined, "none"), the grouping of the 2019 paper's Fig. 9;
- ``window_throughput(frame)``: per flow, its throughput (Mbit/s) in the run's *overlap window*, the
  time during which the foreground and every competing flow were all active, each from its client's start
  to its exit (or to the moment the run stopped it: runners.run.competing), measured over the window's whole
  time bins (the data direction: down for downloads and bulk flows, up for uploads): the bytes that got
  through the bottleneck queue (the delay element's per-flow counts; the bytes the flow offered the link, from
  the droppers, where nothing counted the queue: the netem backend);
- ``fairness(frame)``: per run, Jain's index over those throughputs, the foreground's share, the window (its
  start, end and the whole bins measured) and the flows compared; ``describe_window(row)`` says it in words;
- ``shares_over_time(frame)``: per run and time bin, each flow's share of the bottleneck's bytes in the
  data direction (where flows overlap: bins with at least two flows);
- ``foreground_dct(frame)``: per background label (and per point with ``by_point``) the foreground's
  DCT: runs, median with its bootstrap interval, quartiles.
"""

from __future__ import annotations

import json
import math
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


def cell_bytes(cell: Sequence, column: int) -> float:
    """A series cell's bytes in a direction (`column` 1: down, 2: up): what got through the bottleneck queue
    (cell[column + 6]) where the queue was counted, else what the flow offered the link (cell[column])."""
    through = cell[column + 6] if len(cell) > column + 6 else None
    return float(cell[column] if through is None else through)


def throughput_source(series: Sequence[Sequence]) -> str:
    """Which bytes a flow's throughput counts: "through the queue" or "offered (queue not counted)"."""
    counted = any(len(cell) > 7 and cell[7] is not None for cell in series)
    return "through the queue" if counted or not series else "offered (queue not counted)"


def overlap(group: pd.DataFrame) -> tuple[float, float] | None:
    """The window (s from the foreground's start) during which every flow of a run was active: from the last
    start to the first end (each flow's client start and exit, or the moment the run stopped it)."""
    starts, ends = group["started_s"].astype(float), group["ended_s"].astype(float)
    if starts.isna().any() or ends.isna().any():
        return None
    low, high = float(starts.max()), float(ends.min())
    return (low, high) if high > low else None


def _bins_inside(group: pd.DataFrame, low: float, high: float) -> list[float]:
    """The run's time bins (their starts) that lie whole inside [low, high]: where the window is measured."""
    width = float(group["bin_s"].dropna().iloc[0]) if group["bin_s"].notna().any() else 0.1
    first = math.ceil(round(low / width, 6)) * width
    return [round(first + i * width, 6) for i in range(max(0, math.floor(round((high - first) / width, 6))))]


def window_throughput(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with ``window_start_s``, ``window_end_s``, ``window_s`` (the run's overlap window and its
    length), ``measured_s`` (the window's whole bins, over which throughput is measured), ``throughput_mbit``
    (each flow's bytes in its data direction within those bins, over them: through the queue where it was
    counted) and ``throughput_source``."""
    out = frame.copy()
    for column in ("window_start_s", "window_end_s", "window_s", "measured_s", "throughput_mbit"):
        out[column] = np.nan
    out["throughput_source"] = None
    for _run, group in out.groupby("run_key"):
        window = overlap(group)
        if window is None:
            continue
        low, high = window
        bins = _bins_inside(group, low, high)
        width = float(group["bin_s"].dropna().iloc[0]) if group["bin_s"].notna().any() else 0.1
        starts = set(bins)
        for index, row in group.iterrows():
            column = _data_column(row)
            inside = sum(cell_bytes(cell, column) for cell in row["series"] if round(cell[0], 6) in starts)
            out.loc[index, ["window_start_s", "window_end_s", "window_s", "measured_s"]] = \
                [low, high, high - low, len(bins) * width]
            out.loc[index, "throughput_mbit"] = inside * 8 / 1e6 / (len(bins) * width) if bins else np.nan
            out.loc[index, "throughput_source"] = throughput_source(row["series"])
    return out


def fairness(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: Jain's fairness index over its flows' window throughputs, the foreground's share of their
    sum, the window (``window_start_s``, ``window_end_s``: s from the foreground's start; ``measured_s``: its
    whole bins), ``compared`` (the flows compared, "+"-joined) and ``throughput_source``, the background label
    and the run's columns."""
    windowed = window_throughput(frame)
    rows = []
    for run, group in windowed.groupby("run_key"):
        rates = group["throughput_mbit"].dropna()
        fg = group[group["role"] == "foreground"]["throughput_mbit"]
        total = float(rates.sum())
        first = group.iloc[0]
        sources = sorted({str(s) for s in group["throughput_source"].dropna()})
        rows.append({"run_key": run, "background": first["background"], "run_label": first["run_label"],
                     "point": first["point"], "repetition": first["repetition"], "flows": len(group),
                     "compared": "+".join(str(f) for f in group["flow"]),
                     "window_start_s": first["window_start_s"], "window_end_s": first["window_end_s"],
                     "window_s": first["window_s"], "measured_s": first["measured_s"],
                     "throughput_source": "; ".join(sources) if sources else None,
                     "jain": stats.jain_index(rates) if len(rates) else np.nan,
                     "foreground_share": float(fg.iloc[0]) / total if len(fg) and total > 0 else np.nan})
    return pd.DataFrame(rows)


def describe_window(row: pd.Series | dict) -> str:
    """One sentence on what a ``fairness`` row's index was computed over: the interval, its length, the whole
    bins measured, the flows compared and which bytes (e.g. "Jain's index 0.987 over 1.51-3.71 s after the
    foreground's start (2.20 s; 2.10 s of whole 0.1 s bins measured), while foreground, dl and tcp were all
    active; bytes through the queue.")."""
    get = row.get
    flows = str(get("compared") or "").split("+")
    names = ", ".join(flows[:-1]) + f" and {flows[-1]}" if len(flows) > 1 else flows[0]
    start, end = get("window_start_s"), get("window_end_s")
    if start is None or end is None or not np.isfinite(float(start)) or not np.isfinite(float(end)):
        return f"No interval in which {names} were all active: no index."
    return (f"Jain's index {float(get('jain')):.3f} over {float(start):.2f}-{float(end):.2f} s after the foreground's "
            f"start ({float(end) - float(start):.2f} s; {float(get('measured_s')):.2f} s of whole bins measured), "
            f"while {names} were all active; bytes {get('throughput_source') or 'offered'}.")


def shares_over_time(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run, time bin (s from the foreground's start) and flow: bytes in the data direction and the share
    of the bin's bytes, over bins where at least two flows carried data."""
    rows = []
    for row in frame.itertuples(index=False):
        column = _data_column(pd.Series(row._asdict()))
        for cell in row.series:
            rows.append({"run_key": row.run_key, "background": row.background, "flow": row.flow, "role": row.role,
                         "label": row.label, "t_s": cell[0], "bytes": cell_bytes(cell, column)})
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
