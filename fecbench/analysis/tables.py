"""Per-run measurement tables of a results database, beside the runs frame of ``fecbench.analysis.results``:
every one joins on ``run_key`` = ``results.load(db).key``.

- ``link_stats(db)``: dropper counters per run, link and direction, with the loss rate and the loss model's;
- ``path_traffic(db)``: packets per run and client-server path counted by the droppers (multipath: how a
  scheduler spread the data), and each path's drops per direction: the loss model's and the bottleneck
  queue's (``queue_drops``: the shaper's qdiscs and the delay element's own queue);
  ``single_path_label(traffic)``: the label that stayed on path 1;
  ``path_asymmetry(frame)``: per-path factor ratios (bw_1/bw_2, owd_1/owd_2). What the endpoints counted
  per path is in ``fecbench.analysis.studies.path_metrics``;
- ``fidelity(db)``: the emulation checks before a run; ``lateness(db)``: the delay elements' accuracy
  during it; ``endpoint_timing(db)``: how long its endpoints waited for a CPU;
- ``link_events(db)``: the changes a link schedule applied.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pandas as pd

from fecbench.analysis import results
from fecbench.analysis.results import DbLike, load
from fecbench.dropper.models import expected_loss
from fecbench.timekeeping.delayline import SIDE_OF
from fecbench.timekeeping.lateness import from_delay_json


def endpoint_timing(db: DbLike) -> pd.DataFrame:
    """Each run's endpoint timing (``fecbench.timekeeping.endpoint_timing``): wake-ups, p50/p99/max wake-up latency
    (ms), run-queue and CPU shares, the bound and ``ok``, and ``error`` where it was not measured. Joins
    on ``run_key``; empty for campaigns recorded before schema version 6."""
    columns = ["run_key", "wakeups", "wakeup_p50_ms", "wakeup_p99_ms", "wakeup_max_ms", "runq_share", "cpu_share",
               "pressure_share", "preemptions", "bound_ms", "ok", "error"]
    if "endpoint_timing" not in results.table_names(db):
        return pd.DataFrame(columns=columns)
    rows = results.rows(db, "endpoint_timing", ["run_key", "json"], order_by=["run_key"])
    records = []
    for key, text in rows:
        value = json.loads(text) if text else {}
        records.append({"run_key": key, **{c: value.get(c) for c in columns[1:]}})
    return pd.DataFrame(records, columns=columns)


def expected_loss_rate(model: dict | str | None) -> float:
    """Long-run loss rate a recorded dropper model should produce (NaN when it cannot be told): the
    model's own answer (fecbench.dropper.models). Takes the runner's record ``{"model": kind, "params":
    {...}}``, a model's ``as_dict()`` (``{"model": kind, p: …}``, or ``kind`` for ``model``), or either
    nested as ``{"model": {...}, "seed": …}``; JSON text too."""
    if isinstance(model, str):
        try:
            model = json.loads(model)
        except ValueError:
            return math.nan
    if not isinstance(model, dict):
        return math.nan
    inner = model.get("model")
    if isinstance(inner, dict):  # {"model": {...}, "seed": …, "stream": …}
        return expected_loss_rate(inner)
    kind = str(model.get("kind") or inner or "")
    params = model["params"] if isinstance(model.get("params"), dict) else \
        {k: v for k, v in model.items() if k not in ("kind", "model")}
    return expected_loss(kind, {k: v for k, v in params.items() if k not in ("seed", "stream", "path", "dropper")})


def link_stats(db: DbLike) -> pd.DataFrame:
    """Dropper counters per run, link and direction, with ``model_dropped`` (the loss model's drops: a link
    schedule's outages, ``outage_dropped``, are a cause of their own), ``model_counted`` (the packets the model
    judged: matched, less those an outage took), ``loss_rate`` (model_dropped / model_counted) and
    ``expected_loss`` (the model's long-run loss rate). Joins on ``run_key`` = ``load().key``."""
    frame = results.frame(db, "link_stats", order_by=["run_key", "link", "direction"])
    counted = frame["matched"].where(frame["matched"] > 0, frame["seen"])
    frame["outage_dropped"] = pd.to_numeric(frame.get("outage_dropped", 0), errors="coerce").fillna(0).astype(int)
    frame["model_dropped"] = frame["dropped"] - frame["outage_dropped"]
    frame["model_counted"] = counted - frame["outage_dropped"]
    frame["loss_rate"] = (frame["model_dropped"] / frame["model_counted"].where(frame["model_counted"] > 0)
                          ).astype(float)
    frame["expected_loss"] = [expected_loss_rate(m) for m in frame["model"]] if len(frame) else []
    frame["expected_loss"] = frame["expected_loss"].astype(float)
    return frame


def link_path(model: object) -> float:
    """The 1-based path recorded with a link's dropper statistics (NaN when not recorded)."""
    try:
        path = json.loads(model).get("path") if isinstance(model, str) else None
    except (ValueError, AttributeError):
        return math.nan
    return float(path) if isinstance(path, (int, float)) and not isinstance(path, bool) else math.nan


def queue_drops(delay_json: str | None, direction: str) -> int:
    """Packets the bottleneck queue of a link direction dropped in a run (its link_stats row's ``delay_json``):
    the shaper's qdiscs (tbf's limit; the delay element's sends it refused), the delay element's own queue and a
    trace link's drop-tail (delayline/README.md, "Trace links")."""
    value = json.loads(delay_json) if delay_json else {}
    qdiscs = sum(int(q.get("drops") or 0) for q in value.get("qdiscs") or [])
    element = (value.get("delay") or {}).get(SIDE_OF[direction]) or {}
    return qdiscs + int(element.get("drop_queue") or 0) + int(element.get("drop_link") or 0)


def path_traffic(db: DbLike) -> pd.DataFrame:
    """Packets each run sent over each client-server path, as counted by the droppers of the lossy
    links (their ``matched`` counter): ``packets_down`` server → client (a download's data),
    ``packets_up`` client → server, and ``share_down``/``share_up``, the path's part of the run's
    packets in that direction; the path's drops in each direction, the loss model's (``dropped_down``,
    ``dropped_up``: the droppers') and the bottleneck queue's (``queue_dropped_down``, ``queue_dropped_up``).
    One row per run and path, with the run's columns and factor values (as in ``load``). Empty when the
    database records no link's path (campaigns before it did).
    """
    stats = link_stats(db)
    stats["path"] = [link_path(m) for m in stats["model"]] if len(stats) else []
    stats = stats[stats["path"].notna()]
    runs = load(db)
    columns = ["path", "packets_down", "packets_up", "share_down", "share_up", "dropped_down", "dropped_up",
               "queue_dropped_down", "queue_dropped_up"]
    if stats.empty:
        out = runs.iloc[0:0].assign(**{c: pd.Series(dtype=float) for c in columns})
        out.attrs.update(runs.attrs)
        return out
    counts = (stats.assign(matched=stats["matched"].fillna(0))
              .pivot_table(index=["run_key", "path"], columns="direction", values="matched", aggfunc="sum",
                           fill_value=0)
              .reindex(columns=["reverse", "forward"], fill_value=0)
              .rename(columns={"reverse": "packets_down", "forward": "packets_up"}).reset_index())
    counts.columns.name = None
    stats = stats.assign(queue=[queue_drops(j, d) for j, d in zip(stats["delay_json"], stats["direction"],
                                                                   strict=True)],
                         dropped=stats["dropped"].fillna(0))
    for what, name in (("dropped", "dropped"), ("queue", "queue_dropped")):
        drops = (stats.pivot_table(index=["run_key", "path"], columns="direction", values=what, aggfunc="sum",
                                   fill_value=0)
                 .reindex(columns=["reverse", "forward"], fill_value=0)
                 .rename(columns={"reverse": f"{name}_down", "forward": f"{name}_up"}).reset_index())
        drops.columns.name = None
        counts = counts.merge(drops, on=["run_key", "path"], how="left")
    counts["path"] = counts["path"].astype(int)
    for direction in ("down", "up"):
        total = counts.groupby("run_key")[f"packets_{direction}"].transform("sum")
        counts[f"share_{direction}"] = (counts[f"packets_{direction}"] / total.where(total > 0)).astype(float)
    out = runs.merge(counts, left_on="key", right_on="run_key", how="inner").drop(columns="run_key")
    out = out.sort_values(["campaign_id", "point", "label", "size", "repetition", "path"],
                          kind="stable").reset_index(drop=True)
    out.attrs.update(runs.attrs)
    return out


def single_path_label(traffic: pd.DataFrame) -> str | None:
    """In a ``path_traffic`` frame of a multipath campaign, the label that kept the largest mean share
    of its server → client packets on path 1 (the single-path baseline); None without two paths."""
    ok = traffic[(traffic["status"] == "ok") & traffic["share_down"].notna()] if len(traffic) else traffic
    if ok.empty or ok["path"].nunique() < 2:
        return None
    on_path_1 = ok[ok["path"] == 1].groupby("label")["share_down"].mean()
    return str(on_path_1.sort_values(kind="stable").index[-1]) if len(on_path_1) else None


def path_asymmetry(frame: pd.DataFrame, bases: Sequence[str] = ("bw", "owd")) -> pd.DataFrame:
    """The frame with one column ``<f>_1/<f>_2`` per base factor that has a value on paths 1 and 2
    (how much path 1 differs from path 2; NaN where path 2's value is 0 or either is missing), and
    those columns appended to ``attrs["asymmetry"]``. Works on ``load``, ``paired`` and
    ``path_traffic`` frames."""
    out = frame.copy()
    out.attrs.update(frame.attrs)
    names = []
    for base in bases:
        first, second = f"{base}_1", f"{base}_2"
        if first not in out or second not in out:
            continue
        ratio = pd.to_numeric(out[first], errors="coerce") / pd.to_numeric(out[second], errors="coerce")
        valid = (pd.to_numeric(out[first], errors="coerce") > 0) & (pd.to_numeric(out[second], errors="coerce") > 0)
        out[f"{first}/{second}"] = ratio.where(valid).astype(float)
        names.append(f"{first}/{second}")
    out.attrs["asymmetry"] = names
    return out


def link_events(db: DbLike) -> pd.DataFrame:
    """The changes link schedules applied (one row per run and change, ``params`` parsed; times in s
    after the client's start, ``error_ms`` = applied - scheduled). Joins on ``run_key`` = ``load().key``;
    empty for a database without schedules (or written before schema version 2)."""
    columns = ["run_key", "seq", "kind", "link", "direction", "scheduled_s", "applied_s", "took_ms", "params"]
    if "link_events" not in results.table_names(db):
        return pd.DataFrame(columns=[*columns, "error_ms"])
    frame = results.frame(db, "link_events", columns, order_by=["run_key", "seq"])
    frame["params"] = [json.loads(p) if p else {} for p in frame["params"]]
    frame["error_ms"] = ((frame["applied_s"] - frame["scheduled_s"]) * 1e3).astype(float)
    return frame


def lateness(db: DbLike) -> pd.DataFrame:
    """Each run's emulation accuracy per link and direction (``fecbench.timekeeping.lateness``): frames the delay
    element sent during the run, p50/p99/max/mean lateness (µs), the bound and ``ok``, and what judged it: the
    frames the p99 needs (``quantile_frames``), the run's wall time, its latest frame's lateness beyond the bound
    and the share of the wall time that may take (``lateness.judge`` reads them). Joins on ``run_key``; empty for
    netem runs and campaigns recorded before the delay element counted it."""
    frame = results.frame(db, "link_stats", ["run_key", "link", "direction", "delay_json"],
                          order_by=["run_key", "link", "direction"])
    rows = []
    for row in frame.itertuples(index=False):
        late = from_delay_json(row.delay_json)
        if late:
            rows.append({"run_key": row.run_key, "link": row.link, "direction": row.direction, **late})
    columns = ["run_key", "link", "direction", "frames", "p50_us", "p99_us", "max_us", "mean_us", "bound_ms", "ok",
               "quantile_frames", "wall_ms", "worst_excess_ms", "worst_limit"]
    return pd.DataFrame(rows, columns=columns)


def fidelity(db: DbLike) -> pd.DataFrame:
    """Emulation checks per run and path: configured vs measured RTT and rate, with their ratios."""
    frame = results.frame(db, "fidelity", order_by=["run_key", "path"])
    frame["ok"] = frame["ok"].astype("boolean")
    frame["rtt_ratio"] = (frame["rtt_measured_ms"] / frame["rtt_configured_ms"].where(
        frame["rtt_configured_ms"] > 0)).astype(float)
    frame["rate_ratio"] = (frame["rate_measured_mbit"] / frame["rate_configured_mbit"].where(
        frame["rate_configured_mbit"] > 0)).astype(float)
    return frame
