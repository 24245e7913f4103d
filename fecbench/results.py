"""Read API over a results database: tidy pandas frames for analysis, report and notebooks.

Every function takes the database path (or, where noted, an already loaded frame) and opens it
read-only (``file:…?mode=ro``), so it is safe to call while a campaign is still writing (WAL).

- ``load(db)``: one row per run — campaign, design point, factor values (one column per factor),
  implementation, label, workload, size, repetition, status, timings and the typed metrics (plus
  ``JSON_METRICS``, read from the metrics JSON: the messages accounting).
- ``paired(db, baseline="quic", by=["point", "rep", "size"], metric="dct_ms")``: the per-run ratio
  ``metric(label) / metric(baseline)`` for every other label on identical conditions (same design,
  point, repetition — hence the same loss seed — and size), over pairs of ``ok`` runs only.
  ``fecbench.ratios`` builds on it: every pair accounted for (timeouts censored at the design's
  ``timeout_s``) and the papers' per-point ratio of medians with bootstrap intervals.
- ``link_stats(db)``, ``fidelity(db)``, ``lateness(db)``, ``link_events(db)``: per-run dropper
  counters, emulation checks before the run, the delay elements' accuracy during it, and the
  changes a link schedule applied, joinable on ``run_key`` = ``load(db).key``.
- ``path_traffic(db)``: packets per run and client-server path counted by the droppers (multipath:
  how a scheduler spread the data); ``single_path_label(traffic)``: the label that stayed on path 1;
  ``path_asymmetry(frame)``: per-path factor ratios (bw_1/bw_2, owd_1/owd_2). What the endpoints
  counted per path is in ``fecbench.path_metrics``.
- ``campaigns(db)``, ``factors(db)``, ``medians(...)``, ``status_counts(...)``: small helpers.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing

import pandas as pd

from fecbench import db as dbmod
from fecbench.errors import UserError
from fecbench.lateness import from_delay_json
from fecbench.specs import tomllib  # tomli on Python 3.10

#: Columns of the runs table kept in the tidy frame (logs tails are left to ``run_logs``).
RUN_COLUMNS = ["key", "campaign_id", "point", "impl", "label", "impl_args", "workload", "size",
               "repetition", "loss_seed", "status", "error", "started_at", "finished_at",
               "duration_s", "attempts", "link_backend", "host"]
#: Typed metric columns (the client's whole JSON stays in the database).
METRIC_COLUMNS = list(dbmod.METRIC_COLUMNS)
#: Metrics read from the client's metrics JSON (``metrics.json``) rather than a typed column: the
#: messages workload's accounting (quic-impls/fecq/README.md, "Messages"; NULL where a run's JSON
#: lacks the key) and the congestion-control options the run used.
JSON_METRICS = ("messages_sent", "messages_on_time", "messages_corrupted", "messages_lost",
                "rebuffering_events", "msg_packets_sent", "msg_packets_on_time", "msg_packets_late",
                "msg_packets_missing", "bad_msg_packets_late", "bad_msg_packets_missing",
                "missing_not_sent", "missing_sender_dropped", "missing_in_network", "stall_ms", "cc", "repair_cc")
#: Aliases accepted in ``paired(by=...)``.
KEY_ALIASES = {"rep": "repetition"}
#: The runner's time limit per run when a design sets no ``timeout_s`` (fecbench.runners.design).
DEFAULT_TIMEOUT_S = 60.0

DbLike = str | os.PathLike


def connect(db: DbLike) -> sqlite3.Connection:
    """A read-only connection to a fecbench results database (plain tuples, as pandas wants them)."""
    con = dbmod.open_readonly(db)
    con.row_factory = None
    return con


def _query(db: DbLike, sql: str, params: Sequence = ()) -> pd.DataFrame:
    with closing(connect(db)) as con:
        return pd.read_sql_query(sql, con, params=params)


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in con.execute(f"PRAGMA table_info({table})")]


def factors(db: DbLike) -> list[str]:
    """Names of the design factors (the columns of ``points`` besides campaign_id and point)."""
    with closing(connect(db)) as con:
        return [c for c in _columns(con, "points") if c not in ("campaign_id", "point")]


def campaigns(db: DbLike) -> pd.DataFrame:
    """One row per campaign: name, design, versions, seed, repetitions, topology, link backend."""
    frame = _query(db, "SELECT id, name, design_path, design_hash, fecbench_version, git_sha, created_at, "
                       "host_json, impls_json, seed, repetitions, topology, link_backend "
                       "FROM campaigns ORDER BY id")
    return frame


def load(db: DbLike, *, status: str | Iterable[str] | None = None) -> pd.DataFrame:
    """The tidy runs frame: one row per run with factors, run description, status and metrics.

    ``status`` keeps only runs with that status (or any of those statuses), e.g. ``"ok"``.
    The frame's ``attrs`` hold ``factors`` (the factor columns), ``labels`` and ``sizes`` (all of
    the database, for stable colours); ``design_hash`` and ``campaign``
    (its name) identify the design a run belongs to.
    """
    with closing(connect(db)) as con:
        con.execute("BEGIN")  # one snapshot for all the tables, even while a campaign commits runs
        run_cols = [c for c in RUN_COLUMNS if c in _columns(con, "runs")]
        runs = pd.read_sql_query(f"SELECT {', '.join(run_cols)} FROM runs", con)
        points = pd.read_sql_query("SELECT * FROM points", con)
        metric_cols = [c for c in METRIC_COLUMNS if c in _columns(con, "metrics")]
        from_json = [f"json_extract(json, '$.{k}') AS {k}" for k in JSON_METRICS if k not in metric_cols]
        metrics = pd.read_sql_query(f"SELECT run_key, {', '.join(metric_cols + from_json)} FROM metrics", con)
        camps = pd.read_sql_query("SELECT id AS campaign_id, name AS campaign, design_hash, design_text "
                                  "FROM campaigns", con)
        timing = _timing_columns(con)
    camps["timeout_s"] = [design_timeout(text) for text in camps.pop("design_text")]
    factor_names = [c for c in points.columns if c not in ("campaign_id", "point")]
    # A factor named like a run or metric column keeps its values under "factor_<name>".
    clash = set(run_cols) | set(metric_cols) | set(JSON_METRICS) | {"campaign", "design_hash", "timeout_s"}
    points = points.rename(columns={f: f"factor_{f}" for f in factor_names if f in clash})
    factor_names = [f"factor_{f}" if f in clash else f for f in factor_names]

    frame = runs.merge(camps, on="campaign_id", how="left")
    frame = frame.merge(points, on=["campaign_id", "point"], how="left")
    frame = frame.merge(metrics, left_on="key", right_on="run_key", how="left").drop(columns="run_key")
    frame = frame.merge(timing, left_on="key", right_on="run_key", how="left").drop(columns="run_key")
    for col in ("size", "repetition", "point", "loss_seed", "attempts"):
        if col in frame:
            frame[col] = frame[col].astype("Int64")
    if status is not None:
        wanted = [status] if isinstance(status, str) else list(status)
        frame = frame[frame["status"].isin(wanted)]
    order = ["key", "campaign", "design_hash", "campaign_id", "point", *factor_names]
    frame = frame[order + [c for c in frame.columns if c not in order]]
    frame = frame.sort_values(["campaign_id", "point", "label", "workload", "size", "repetition"],
                              na_position="first", kind="stable").reset_index(drop=True)
    frame.attrs["factors"] = factor_names
    # Every label and size of the database, so that figures of subsets keep the same colours.
    frame.attrs["labels"] = sorted(runs["label"].dropna().unique().tolist())
    frame.attrs["sizes"] = sorted(int(s) for s in runs["size"].dropna().unique())
    return frame


#: Per-run accuracy columns of ``load``: the endpoints' wake-up latency and run-queue share
#: (fecbench.endpoint_timing) and the worst p99 lateness of the run's delay elements (fecbench.lateness).
TIMING_COLUMNS = ["endpoint_wakeup_p50_ms", "endpoint_wakeup_p99_ms", "endpoint_wakeup_max_ms",
                  "endpoint_runq_share", "lateness_p99_ms"]


def _timing_columns(con: sqlite3.Connection) -> pd.DataFrame:
    """``TIMING_COLUMNS`` per run (NaN where not measured: netem has no lateness, older campaigns no
    endpoint timing)."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    endpoints = pd.DataFrame(columns=["run_key", *TIMING_COLUMNS[:4]])
    if "endpoint_timing" in tables:
        endpoints = pd.read_sql_query(
            "SELECT run_key, wakeup_p50_ms AS endpoint_wakeup_p50_ms, wakeup_p99_ms AS endpoint_wakeup_p99_ms, "
            "wakeup_max_ms AS endpoint_wakeup_max_ms, runq_share AS endpoint_runq_share FROM endpoint_timing", con)
    worst: dict[str, float] = {}
    for key, text in con.execute("SELECT run_key, delay_json FROM link_stats WHERE delay_json LIKE '%lateness%'"):
        p99 = (from_delay_json(text) or {}).get("p99_us")
        if p99 is not None:
            worst[key] = max(worst.get(key, 0.0), float(p99) / 1000)
    late = pd.DataFrame({"run_key": pd.Series(list(worst), dtype=object),
                         "lateness_p99_ms": pd.Series(list(worst.values()), dtype=float)})
    out = endpoints.astype({"run_key": object}).merge(late, on="run_key", how="outer")
    return out.astype({c: float for c in TIMING_COLUMNS})


def endpoint_timing(db: DbLike) -> pd.DataFrame:
    """Each run's endpoint timing (``fecbench.endpoint_timing``): wake-ups, p50/p99/max wake-up latency
    (ms), run-queue and CPU shares, the bound and ``ok``, and ``error`` where it was not measured. Joins
    on ``run_key``; empty for campaigns recorded before schema version 6."""
    columns = ["run_key", "wakeups", "wakeup_p50_ms", "wakeup_p99_ms", "wakeup_max_ms", "runq_share", "cpu_share",
               "pressure_share", "preemptions", "bound_ms", "ok", "error"]
    with closing(connect(db)) as con:
        if "endpoint_timing" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}:
            return pd.DataFrame(columns=columns)
        rows = con.execute("SELECT run_key, json FROM endpoint_timing ORDER BY run_key").fetchall()
    records = []
    for key, text in rows:
        value = json.loads(text) if text else {}
        records.append({"run_key": key, **{c: value.get(c) for c in columns[1:]}})
    return pd.DataFrame(records, columns=columns)


def design_timeout(design_text: str | None) -> float:
    """The time limit per run (s) a campaign's design file set (``[design] timeout_s``), the
    runner's default when it set none, NaN when the stored text cannot be read."""
    try:
        value = tomllib.loads(design_text or "").get("design", {}).get("timeout_s", DEFAULT_TIMEOUT_S)
        return float(value)
    except (tomllib.TOMLDecodeError, AttributeError, TypeError, ValueError):
        return math.nan


def _frame(db_or_frame: DbLike | pd.DataFrame, **kwargs) -> pd.DataFrame:
    return db_or_frame if isinstance(db_or_frame, pd.DataFrame) else load(db_or_frame, **kwargs)


def pairing(frame: pd.DataFrame, baseline: str, by: Sequence[str], metric: str,
            labels: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The columns that identify a condition (``design_hash``, ``workload`` and ``by``) and the
    labels compared with ``baseline``; a UserError naming what is wrong otherwise."""
    if metric not in frame.columns:
        raise UserError(f"unknown metric {metric!r} (allowed: {', '.join(METRIC_COLUMNS)})")
    keys = [KEY_ALIASES.get(k, k) for k in by]
    unknown = [k for k in keys if k not in frame.columns]
    if unknown:
        raise UserError(f"cannot pair on {', '.join(unknown)}: not a column of the runs "
                        f"(allowed: point, rep, size, workload, impl or a factor)")
    keys = ["design_hash", "workload", *[k for k in keys if k not in ("design_hash", "workload")]]
    present = sorted(frame["label"].dropna().unique())
    if baseline not in present:
        raise UserError(f"baseline label {baseline!r} has no runs (labels: {', '.join(present) or 'none'})")
    compared = [lbl for lbl in (labels if labels is not None else present) if lbl != baseline]
    missing = [lbl for lbl in compared if lbl not in present]
    if missing:
        raise UserError(f"label(s) {', '.join(missing)} have no runs (labels: {', '.join(present)})")
    return keys, compared


def paired(db_or_frame: DbLike | pd.DataFrame, baseline: str = "quic",
           by: Sequence[str] = ("point", "rep", "size"), metric: str = "dct_ms",
           labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Per-run ratios ``metric(label) / metric(baseline)`` between labels on identical conditions.

    Only pairs of two ``ok`` runs with the metric present take part: ``fecbench.ratios.pairs``
    accounts for every pair (timeouts as censored values, failures and why) and
    ``fecbench.ratios.point_ratios`` gives the papers' per-point ratio of medians. Conditions are
    ``by`` (``rep`` is an alias of ``repetition``) within one design and workload. One row per
    condition and compared label, with the columns of ``by``, ``workload``, ``label``,
    ``baseline``, ``value``, ``baseline_value``, ``ratio`` and the factor values of the point. A
    zero baseline gives a NaN ratio. ``labels`` restricts the compared labels (default: all but
    the baseline).
    """
    frame = _frame(db_or_frame)
    keys, compared = pairing(frame, baseline, by, metric, labels)
    present = sorted(frame["label"].dropna().unique())
    usable = frame[(frame["status"] == "ok") & frame[metric].notna()]
    factor_names = [f for f in frame.attrs.get("factors", []) if f not in keys]
    # Several rows for one condition and label (should not happen) count as their median.
    grouped = (usable.groupby([*keys, "label"], dropna=False)[metric].median()
               .rename("value").reset_index())
    base = (grouped[grouped["label"] == baseline].drop(columns="label")
            .rename(columns={"value": "baseline_value"}))
    others = grouped[grouped["label"].isin(compared)]
    out = others.merge(base, on=keys, how="inner")
    out.insert(out.columns.get_loc("label") + 1, "baseline", baseline)
    ratio = out["value"] / out["baseline_value"].where(out["baseline_value"] > 0)
    out["ratio"] = ratio.astype(float)
    if factor_names and "point" in keys:
        point_factors = (frame[["design_hash", "point", *factor_names]]
                         .drop_duplicates(["design_hash", "point"]))
        out = out.merge(point_factors, on=["design_hash", "point"], how="left")
    out = out.sort_values(["label", *keys], kind="stable").reset_index(drop=True)
    out.attrs.update(factors=factor_names, metric=metric, baseline=baseline,
                     labels=frame.attrs.get("labels", present), sizes=frame.attrs.get("sizes", []))
    return out


def expected_loss_rate(model: dict | str | None) -> float:
    """Long-run loss rate a dropper model should produce (NaN when it cannot be told).

    Uniform: ``p``. Gilbert-Elliott (p = P(good→bad), r = P(bad→good), k = P(deliver | good),
    h = P(deliver | bad), as in the seed papers): ``π_G (1-k) + π_B (1-h)`` with ``π_B = p/(p+r)``;
    without k and h it is the simple two-state model (k = 1, h = 0).
    """
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
    if isinstance(model.get("params"), dict):  # the runner's {"model": kind, "params": {p, r, …}, …}
        model = {**model, **model["params"]}
    kind = str(model.get("kind") or model.get("model") or model.get("type") or "").lower().replace("_", "-")
    try:
        if kind in ("none", "off", "no-loss"):
            return 0.0
        if kind in ("uniform", "bernoulli", "random"):
            return float(model["p"])
        if kind in ("gilbert-elliott", "ge", "gilbert", "gilbert-elliot", "markov"):
            p, r = float(model["p"]), float(model["r"])
            k, h = float(model.get("k", 1.0)), float(model.get("h", 0.0))
            if p + r == 0:
                return 1.0 - k
            bad = p / (p + r)
            return (1.0 - bad) * (1.0 - k) + bad * (1.0 - h)
    except (KeyError, TypeError, ValueError):
        return math.nan
    return math.nan


def link_stats(db: DbLike) -> pd.DataFrame:
    """Dropper counters per run, link and direction, with ``loss_rate`` (dropped/matched packets)
    and ``expected_loss`` (the model's long-run loss rate). Joins on ``run_key`` = ``load().key``."""
    frame = _query(db, "SELECT * FROM link_stats ORDER BY run_key, link, direction")
    counted = frame["matched"].where(frame["matched"] > 0, frame["seen"])
    frame["loss_rate"] = (frame["dropped"] / counted.where(counted > 0)).astype(float)
    frame["expected_loss"] = [expected_loss_rate(m) for m in frame["model"]] if len(frame) else []
    frame["expected_loss"] = frame["expected_loss"].astype(float)
    return frame


def _link_path(model: object) -> float:
    """The 1-based path recorded with a link's dropper statistics (NaN when not recorded)."""
    try:
        path = json.loads(model).get("path") if isinstance(model, str) else None
    except (ValueError, AttributeError):
        return math.nan
    return float(path) if isinstance(path, (int, float)) and not isinstance(path, bool) else math.nan


def path_traffic(db: DbLike) -> pd.DataFrame:
    """Packets each run sent over each client-server path, as counted by the droppers of the lossy
    links (their ``matched`` counter): ``packets_down`` server → client (a download's data),
    ``packets_up`` client → server, and ``share_down``/``share_up``, the path's part of the run's
    packets in that direction. One row per run and path, with the run's columns and factor values
    (as in ``load``). Empty when the database records no link's path (campaigns before it did).
    """
    stats = link_stats(db)
    stats["path"] = [_link_path(m) for m in stats["model"]] if len(stats) else []
    stats = stats[stats["path"].notna()]
    runs = load(db)
    columns = ["path", "packets_down", "packets_up", "share_down", "share_up"]
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
    with closing(connect(db)) as con:
        if "link_events" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}:
            return pd.DataFrame(columns=[*columns, "error_ms"])
        frame = pd.read_sql_query(f"SELECT {', '.join(columns)} FROM link_events ORDER BY run_key, seq", con)
    frame["params"] = [json.loads(p) if p else {} for p in frame["params"]]
    frame["error_ms"] = ((frame["applied_s"] - frame["scheduled_s"]) * 1e3).astype(float)
    return frame


def lateness(db: DbLike) -> pd.DataFrame:
    """Each run's emulation accuracy per link and direction (``fecbench.lateness``): frames the delay
    element sent during the run, p50/p99/max/mean lateness (µs), the bound and ``ok``. Joins on
    ``run_key``; empty for netem runs and campaigns recorded before the delay element counted it."""
    frame = _query(db, "SELECT run_key, link, direction, delay_json FROM link_stats ORDER BY run_key, link, direction")
    rows = []
    for row in frame.itertuples(index=False):
        late = from_delay_json(row.delay_json)
        if late:
            rows.append({"run_key": row.run_key, "link": row.link, "direction": row.direction, **late})
    columns = ["run_key", "link", "direction", "frames", "p50_us", "p99_us", "max_us", "mean_us", "bound_ms", "ok"]
    return pd.DataFrame(rows, columns=columns)


def fidelity(db: DbLike) -> pd.DataFrame:
    """Emulation checks per run and path: configured vs measured RTT and rate, with their ratios."""
    frame = _query(db, "SELECT * FROM fidelity ORDER BY run_key, path")
    frame["ok"] = frame["ok"].astype("boolean")
    frame["rtt_ratio"] = (frame["rtt_measured_ms"] / frame["rtt_configured_ms"].where(
        frame["rtt_configured_ms"] > 0)).astype(float)
    frame["rate_ratio"] = (frame["rate_measured_mbit"] / frame["rate_configured_mbit"].where(
        frame["rate_configured_mbit"] > 0)).astype(float)
    return frame


def status_counts(db_or_frame: DbLike | pd.DataFrame, by: Sequence[str] = ("label",)) -> pd.DataFrame:
    """Runs per ``by`` group (rows; e.g. ``["point", "label"]``) and status (columns), with a total column."""
    frame = _frame(db_or_frame)
    table = pd.crosstab([frame[c] for c in by], frame["status"])
    table["total"] = table.sum(axis=1)
    return table


def medians(db_or_frame: DbLike | pd.DataFrame, metric: str = "dct_ms",
            by: Sequence[str] = ("label", "size")) -> pd.DataFrame:
    """Median, quartiles and count of ``metric`` over ``ok`` runs, per ``by`` group."""
    frame = _frame(db_or_frame)
    usable = frame[(frame["status"] == "ok") & frame[metric].notna()]
    groups = usable.groupby(list(by), dropna=False)[metric]
    table = pd.DataFrame({"runs": groups.size(), "q25": groups.quantile(0.25),
                          "median": groups.median(), "q75": groups.quantile(0.75)})
    return table.reset_index()


def ratio_medians(pairs: pd.DataFrame, by: Sequence[str] = ("label", "size")) -> pd.DataFrame:
    """Per group of a ``paired`` frame: pairs, median ratio, quartiles and the share of ratios below 1 (``below_1``)."""
    usable = pairs[pairs["ratio"].notna()]
    groups = usable.groupby(list(by), dropna=False)["ratio"]
    table = pd.DataFrame({"pairs": groups.size(), "q25": groups.quantile(0.25),
                          "median": groups.median(), "q75": groups.quantile(0.75),
                          "below_1": groups.apply(lambda s: float((s < 1).mean()))})
    return table.reset_index()
