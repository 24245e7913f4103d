"""The runs frame of a results database: tidy pandas frames for analysis, report and notebooks.

Every function takes the database path (or, where noted, an already loaded frame) and opens it
read-only (``file:…?mode=ro``), so it is safe to call while a campaign is still writing (WAL).

- ``load(db)``: one row per run — campaign, design point, factor values (one column per factor),
  implementation, label, workload, size, repetition, status, timings, the typed metrics (plus
  ``JSON_METRICS``, read from the metrics JSON: the messages accounting), the run's accuracy
  (``TIMING_COLUMNS``) and its campaign's ``timeout_s`` (from the settings the campaign recorded).
- ``paired(db, baseline="quic", by=["point", "rep", "size"], metric="dct_ms")``: the per-run ratio
  ``metric(label) / metric(baseline)`` for every other label on identical conditions (same design,
  point, repetition — hence the same loss seed — and size), over pairs of ``ok`` runs only.
  ``fecbench.analysis.ratios`` builds on it: every pair accounted for (timeouts censored at the design's
  ``timeout_s``) and the papers' per-point ratio of medians with bootstrap intervals.
- ``campaigns(db)``, ``factors(db)``, ``medians(...)``, ``status_counts(...)``, ``ratio_medians(...)``:
  small helpers. The per-run measurement tables are in ``fecbench.analysis.tables``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path

import pandas as pd

from fecbench.analysis import derived
from fecbench.inputs.errors import UserError
from fecbench.records import db as dbmod
from fecbench.timekeeping.lateness import from_delay_json

#: Columns of the runs table kept in the tidy frame (logs tails are left to ``run_logs``).
RUN_COLUMNS = ["key", "campaign_id", "point", "impl", "label", "impl_args", "workload", "size",
               "repetition", "loss_seed", "status", "error", "started_at", "finished_at",
               "duration_s", "attempts", "link_backend", "host", "decided_by"]
#: Typed metric columns (the client's whole JSON stays in the database).
METRIC_COLUMNS = list(dbmod.METRIC_COLUMNS)
#: Metrics read from the client's metrics JSON (``metrics.json``; NULL where a run's JSON lacks the key): the messages
#: workload's accounting (quic-impls/fecq/README.md, "Messages"), the congestion-control options the run used, fecq's
#: set-up time (``setup_ms``: client start to its first request, paths opened) and a request/response's ``exchanges``.
JSON_METRICS = ("messages_sent", "messages_on_time", "messages_corrupted", "messages_lost",
                "rebuffering_events", "msg_packets_sent", "msg_packets_on_time", "msg_packets_late",
                "msg_packets_missing", "bad_msg_packets_late", "bad_msg_packets_missing",
                "missing_not_sent", "missing_sender_dropped", "missing_in_network", "stall_ms", "cc", "repair_cc",
                "setup_ms", "exchanges")
#: Aliases accepted in ``paired(by=...)``.
KEY_ALIASES = {"rep": "repetition"}

DbLike = str | os.PathLike


def connect(db: DbLike) -> sqlite3.Connection:
    """A read-only connection to a fecbench results database (plain tuples, as pandas wants them)."""
    con = dbmod.open_readonly(db)
    con.row_factory = None
    return con


def query(db: DbLike, sql: str, params: Sequence = ()) -> pd.DataFrame:
    with closing(connect(db)) as con:
        return pd.read_sql_query(sql, con, params=params)


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in con.execute(f"PRAGMA table_info({table})")]


# --- the one reader of a results database's tables (every other analysis module reads through these) ---

def table_names(db: DbLike) -> set[str]:
    """The tables the database has (older schema versions lack some)."""
    with closing(connect(db)) as con:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def table_columns(db: DbLike, name: str) -> list[str]:
    """A table's columns ([] when it does not exist)."""
    with closing(connect(db)) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return _columns(con, name) if name in tables else []


def _identifier(con: sqlite3.Connection, name: str, table: str | None = None) -> str:
    """``name`` if it is a table (or, with ``table``, a column of it) of this database: identifiers are
    never taken from elsewhere into SQL text."""
    known = _columns(con, table) if table else [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type='table'")]
    if name not in known:
        raise ValueError(f"no {'column' if table else 'table'} {name!r}" + (f" in {table}" if table else ""))
    return name


def _select(con: sqlite3.Connection, name: str, columns: Sequence[str], where: dict[str, object] | None,
            not_null: Sequence[str], order_by: Sequence[str]) -> tuple[str, tuple]:
    """One table's SELECT with every identifier checked against the schema, the values as parameters."""
    table = _identifier(con, name)
    picked = ", ".join(_identifier(con, c, table) for c in columns)
    tests = [f"{_identifier(con, c, table)} = ?" for c in (where or {})]
    tests += [f"{_identifier(con, c, table)} IS NOT NULL" for c in not_null]
    sql = f"SELECT {picked} FROM {table}" + (f" WHERE {' AND '.join(tests)}" if tests else "")
    sql += f" ORDER BY {', '.join(_identifier(con, c, table) for c in order_by)}" if order_by else ""
    return sql, tuple((where or {}).values())


def rows(db: DbLike, name: str, columns: Sequence[str], *, where: dict[str, object] | None = None,
         not_null: Sequence[str] = (), order_by: Sequence[str] = ()) -> list[tuple]:
    """The rows of one table (tuples of ``columns``): ``where`` column = value, ``not_null`` columns not
    NULL, in ``order_by`` order (else the table's)."""
    with closing(connect(db)) as con:
        sql, params = _select(con, name, columns, where, not_null, order_by)
        return con.execute(sql, params).fetchall()


def frame(db: DbLike, name: str, columns: Sequence[str] | None = None, *, where: dict[str, object] | None = None,
          not_null: Sequence[str] = (), order_by: Sequence[str] = ()) -> pd.DataFrame:
    """``rows`` as a frame, typed as pandas reads SQL (every column when ``columns`` is None)."""
    with closing(connect(db)) as con:
        sql, params = _select(con, name, columns if columns is not None else _columns(con, name), where,
                              not_null, order_by)
        return pd.read_sql_query(sql, con, params=params)


def run_metrics_json(db: DbLike, exclude_status: Sequence[str] = ()) -> list[tuple[str, str, str | None]]:
    """(run key, workload, its metrics JSON or None) of every run whose status is not in ``exclude_status``."""
    with closing(connect(db)) as con:
        marks = ", ".join("?" for _ in exclude_status)
        return con.execute("SELECT r.key, r.workload, m.json FROM runs r LEFT JOIN metrics m ON m.run_key = r.key"
                           + (f" WHERE r.status NOT IN ({marks})" if exclude_status else ""),
                           tuple(exclude_status)).fetchall()


def factors(db: DbLike) -> list[str]:
    """Names of the design factors (the columns of ``points`` besides campaign_id and point)."""
    with closing(connect(db)) as con:
        return [c for c in _columns(con, "points") if c not in ("campaign_id", "point")]


def campaigns(db: DbLike) -> pd.DataFrame:
    """One row per campaign: name, design, versions, seed, repetitions, topology, link backend."""
    frame = query(db, "SELECT id, name, design_path, design_hash, fecbench_version, git_sha, created_at, "
                       "host_json, impls_json, seed, repetitions, topology, link_backend "
                       "FROM campaigns ORDER BY id")
    return frame


def load(db: DbLike | Sequence[DbLike], *, status: str | Iterable[str] | None = None,
         include_fidelity: bool = False) -> pd.DataFrame:
    """The tidy runs frame: one row per run with factors, run description, status and metrics
    (`data_dictionary` says what each column is, its unit and where it comes from).

    ``db`` is one database or a list of them: then the column ``database`` (its path as given) says which one
    each row came from, and every pairing keeps them apart (a run is never compared across databases, nor
    averaged with its copy in another). ``status`` keeps only runs with that status (or any of those statuses),
    e.g. ``"ok"``. ``include_fidelity``: runs flagged ``fidelity`` take the status their run itself ended with
    (``ok`` or ``timeout``), so that every analysis uses them (a sensitivity check: with and without); the column
    ``flagged`` is True for them either way, ``flag`` says why they were flagged.

    The frame's ``attrs`` hold ``factors`` (the factor columns), ``labels`` and ``sizes`` (all of
    the database, for stable colours); ``network`` identifies the conditions a run ran under (what pairs runs),
    ``design_hash`` and ``campaign`` (its name) the design a run belongs to.
    """
    if not isinstance(db, (str, os.PathLike)):
        frames = [load(one, status=status, include_fidelity=include_fidelity).assign(database=str(one))
                  for one in db]
        if not frames:
            raise UserError("results.load: no database given")
        out = pd.concat(frames, ignore_index=True)
        out.attrs["factors"] = list(dict.fromkeys(f for f in frames for f in f.attrs["factors"]))
        out.attrs["labels"] = sorted({label for f in frames for label in f.attrs["labels"]})
        out.attrs["sizes"] = sorted({size for f in frames for size in f.attrs["sizes"]})
        return out
    with closing(connect(db)) as con:
        con.execute("BEGIN")  # one snapshot for all the tables, even while a campaign commits runs
        run_cols = [c for c in [*RUN_COLUMNS, "applied_json"] if c in _columns(con, "runs")]
        runs = pd.read_sql_query(f"SELECT {', '.join(run_cols)} FROM runs", con)
        points = pd.read_sql_query("SELECT * FROM points", con)
        metric_cols = [c for c in METRIC_COLUMNS if c in _columns(con, "metrics")]
        from_json = [f"json_extract(json, '$.{k}') AS {k}" for k in JSON_METRICS if k not in metric_cols]
        metrics = pd.read_sql_query(f"SELECT run_key, {', '.join(metric_cols + from_json)} FROM metrics", con)
        settings = ", settings_json" if "settings_json" in _columns(con, "campaigns") else ""
        camps = pd.read_sql_query("SELECT id AS campaign_id, name AS campaign, design_hash, design_text"
                                  f"{settings} FROM campaigns", con)
        timing = _timing_columns(con)
    recorded = camps.pop("settings_json") if "settings_json" in camps else [None] * len(camps)
    camp_settings = [dbmod.campaign_settings(json_text, text)
                     for json_text, text in zip(recorded, camps.pop("design_text"), strict=True)]
    camps["timeout_s"] = [float(s.get("timeout_s", math.nan)) for s in camp_settings]
    run_cols = [c for c in run_cols if c != "applied_json"]
    applied = runs.pop("applied_json") if "applied_json" in runs else pd.Series(None, index=runs.index)
    factor_names = [c for c in points.columns if c not in ("campaign_id", "point")]
    # A factor named like a run or metric column keeps its values under "factor_<name>".
    clash = set(run_cols) | set(metric_cols) | set(JSON_METRICS) | set(DERIVED_COLUMNS)
    points = points.rename(columns={f: f"factor_{f}" for f in factor_names if f in clash})
    factor_names = [f"factor_{f}" if f in clash else f for f in factor_names]

    frame = runs.merge(camps, on="campaign_id", how="left")
    frame["network"] = _networks(frame, applied, dict(zip(camps["campaign_id"], camp_settings, strict=True)))
    frame = frame.merge(points, on=["campaign_id", "point"], how="left")
    frame = frame.merge(metrics, left_on="key", right_on="run_key", how="left").drop(columns="run_key")
    frame = derived.with_derived_metrics(
        frame.merge(timing, left_on="key", right_on="run_key", how="left").drop(columns="run_key"))
    for col in ("size", "repetition", "point", "loss_seed", "attempts"):
        if col in frame:
            frame[col] = frame[col].astype("Int64")
    frame["flagged"] = frame["status"] == "fidelity"
    frame["flag"] = frame["error"].where(frame["flagged"]) if "error" in frame else None
    if include_fidelity:
        frame["status"] = frame["status"].mask(frame["flagged"], frame["error"].map(_own_status))
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


#: Columns ``load`` derives (besides the tables' own): a factor of the same name becomes ``factor_<name>``.
DERIVED_COLUMNS = ("campaign", "design_hash", "timeout_s", "network", "flagged", "flag", "database",
                   *derived.METRICS)


def _own_status(error: object) -> str:
    """The status a fidelity-flagged run's run itself ended with: ``timeout`` when its flag says so, else ``ok``
    (fecbench.runners.run.lifecycle keeps the run's own outcome in the flag's words)."""
    return "timeout" if isinstance(error, str) and "(the run itself ended timeout" in error else "ok"


def _networks(frame: pd.DataFrame, applied: pd.Series, settings: dict[int, dict]) -> list[str]:
    """Each run's network: a digest of the conditions it ran under as recorded with it (the topology, the links'
    rate, delay and queue per direction, the loss model, the workload, the design point's values, a link schedule
    and competing flows), never of the design file's text: a label added to a design later, or a second design
    with the same point, pairs with the runs already there. Runs recorded before the settings were
    (runs.applied_json, schema 7) fall back to their design and point."""
    out = []
    for text, campaign_id, design_hash, point in zip(applied, frame["campaign_id"], frame["design_hash"],
                                                     frame["point"], strict=True):
        if not isinstance(text, str):
            out.append(f"{str(design_hash)[:12]}:p{point}")
            continue
        got = json.loads(text)
        recorded = settings.get(campaign_id, {})
        condition = {"topology": Path(str(recorded.get("topology", ""))).name, "schedule": recorded.get("schedule"),
                     "flows": recorded.get("flows"), "values": got.get("values"), "links": got.get("links"),
                     "loss": got.get("loss"), "workload": got.get("workload")}
        digest = hashlib.sha256(json.dumps(condition, sort_keys=True, default=str).encode()).hexdigest()
        out.append(digest[:16])
    return out


#: Per-run accuracy columns of ``load``: the endpoints' wake-up latency and run-queue share
#: (timekeeping.endpoint_timing) and the worst p99 lateness of the run's delay elements (timekeeping.lateness).
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


def _frame(db_or_frame: DbLike | pd.DataFrame, **kwargs) -> pd.DataFrame:
    return with_network(db_or_frame) if isinstance(db_or_frame, pd.DataFrame) else load(db_or_frame, **kwargs)


def with_network(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame made elsewhere (by hand, an older export) without ``network``: its design and point stand for it."""
    if "network" in frame.columns or not {"point"} <= set(frame.columns):
        return frame
    design = frame["design_hash"].astype(str) if "design_hash" in frame.columns else "design"
    out = frame.assign(network=design + ":p" + frame["point"].astype(str))
    out.attrs.update(frame.attrs)
    return out


#: What makes two runs comparable (``pairing``): the network they ran on (``network``: the point's values and
#: the links, loss model, workload, schedule and flows as recorded), the workload, the size, the repetition and
#: the loss seed; the database they came from when several were loaded. Never the design file's hash.
CONDITION = ("network", "workload", "size", "repetition", "loss_seed")


def pairing(frame: pd.DataFrame, baseline: str, by: Sequence[str], metric: str,
            labels: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The columns that identify a condition (`CONDITION`, ``database`` when the frame has it, and ``by``'s
    other columns; ``point`` and ``design_hash`` are implied by ``network``, ``rep`` is ``repetition``) and the
    labels compared with ``baseline``; a UserError naming what is wrong otherwise, and one naming the runs when
    two of a label share a condition (two campaigns ran it: never averaged)."""
    if metric not in frame.columns:
        raise UserError(f"unknown metric {metric!r} (allowed: {', '.join(METRIC_COLUMNS)})")
    asked = [KEY_ALIASES.get(k, k) for k in by]
    unknown = [k for k in asked if k not in frame.columns]
    if unknown:
        raise UserError(f"cannot pair on {', '.join(unknown)}: not a column of the runs "
                        f"(allowed: point, rep, size, workload, impl or a factor)")
    implied = ("point", "design_hash", *CONDITION)
    keys = [*(["database"] if "database" in frame.columns else []), *CONDITION,
            *[k for k in asked if k not in implied]]
    keys = [k for k in keys if k in frame.columns]
    present = sorted(frame["label"].dropna().unique())
    if baseline not in present:
        raise UserError(f"baseline label {baseline!r} has no runs (labels: {', '.join(present) or 'none'})")
    compared = [lbl for lbl in (labels if labels is not None else present) if lbl != baseline]
    missing = [lbl for lbl in compared if lbl not in present]
    if missing:
        raise UserError(f"label(s) {', '.join(missing)} have no runs (labels: {', '.join(present)})")
    runs = frame[frame["label"].isin([baseline, *compared])]
    twice = runs[runs.duplicated([*keys, "label"], keep=False)]
    if len(twice):
        where = ", ".join(sorted({str(c) for c in twice["campaign"].dropna().unique()})) or "?"
        raise UserError(f"{len(twice)} runs of label(s) {', '.join(sorted(set(twice['label'])))} share their "
                        f"conditions (network, size, repetition, loss seed) with another run of the same label "
                        f"(campaigns: {where}): the same runs were run twice, and a pair would have to choose or "
                        f"average them. Compare one campaign (frame[frame.campaign_id == N]) or keep them apart "
                        f"with by=[..., \"campaign_id\"]")
    return keys, compared


def unpaired(frame: pd.DataFrame, baseline: str, keys: Sequence[str], compared: Sequence[str]) -> dict[str, str]:
    """The compared labels none of whose runs has a baseline run under the same conditions, each with why and the
    fix (a label is never left out of a comparison without saying so)."""
    base = frame.loc[frame["label"] == baseline, list(keys)].drop_duplicates()
    out = {}
    for label in compared:
        mine = frame.loc[frame["label"] == label, list(keys)].drop_duplicates()
        if len(mine) and not len(mine.merge(base, on=list(keys))):
            networks = set(mine["network"]) & set(base["network"]) if "network" in keys else set()
            why = ("its runs share networks with the baseline's but not their sizes, repetitions or loss seeds"
                   if networks else "it ran on other networks (design points, links, loss, workload) than the "
                   "baseline")
            out[label] = (f"{label}: no run of {baseline} under the same conditions ({why}); run {baseline} there "
                          "too (add it to the design and fecbench run again), or compare it with another label")
    return out


def paired(db_or_frame: DbLike | pd.DataFrame, baseline: str = "quic",
           by: Sequence[str] = ("point", "rep", "size"), metric: str = "dct_ms",
           labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Per-run ratios ``metric(label) / metric(baseline)`` between labels on identical conditions.

    Only pairs of two ``ok`` runs with the metric present take part: ``fecbench.analysis.ratios.pairs``
    accounts for every pair (timeouts as censored values, failures and why) and
    ``fecbench.analysis.ratios.point_ratios`` gives the papers' per-point ratio of medians. Conditions are
    `CONDITION` (the network, workload, size, repetition and loss seed; ``by`` may add columns). One row per
    condition and compared label, with the condition's columns, ``point`` (the baseline's), ``label``,
    ``baseline``, ``value``, ``baseline_value``, ``ratio`` and the factor values of the point. A zero baseline
    gives a NaN ratio. ``labels`` restricts the compared labels (default: all but the baseline). A label with no
    pair at all is named in ``attrs["unpaired"]`` with why, and warned about.
    """
    frame = _frame(db_or_frame)
    keys, compared = pairing(frame, baseline, by, metric, labels)
    present = sorted(frame["label"].dropna().unique())
    usable = frame[(frame["status"] == "ok") & frame[metric].notna()]
    factor_names = [f for f in frame.attrs.get("factors", []) if f not in keys]
    side = usable[[*keys, "label", "point", metric]]
    base = (side[side["label"] == baseline].drop(columns="label")
            .rename(columns={metric: "baseline_value"}))
    others = side[side["label"].isin(compared)].drop(columns="point").rename(columns={metric: "value"})
    out = others.merge(base, on=keys, how="inner")
    out.insert(out.columns.get_loc("label") + 1, "baseline", baseline)
    ratio = out["value"] / out["baseline_value"].where(out["baseline_value"] > 0)
    out["ratio"] = ratio.astype(float)
    if factor_names:
        point_factors = frame[["network", *factor_names]].drop_duplicates("network")
        out = out.merge(point_factors, on="network", how="left")
    out = out.sort_values(["label", *keys], kind="stable").reset_index(drop=True)
    alone = unpaired(frame, baseline, keys, compared)
    warn_unpaired(alone)
    out.attrs.update(factors=factor_names, metric=metric, baseline=baseline, unpaired=alone,
                     labels=frame.attrs.get("labels", present), sizes=frame.attrs.get("sizes", []))
    return out


def warn_unpaired(alone: dict[str, str]) -> None:
    """A label left without pairs, said where the analyst sees it (a notebook shows warnings)."""
    import warnings

    for text in alone.values():
        warnings.warn(f"unpaired: {text}", UnpairedWarning, stacklevel=3)


class UnpairedWarning(UserWarning):
    """A label none of whose runs could be paired with the baseline's."""


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


def artifacts(db: DbLike) -> pd.DataFrame:
    """What each run kept to explain itself (fecbench.runners.experiment.capture): run key, kind (qlog, keylog, pcap),
    the file (absolute: under ``<db stem>.artifacts/``), its bytes and why it was kept; empty before schema 7."""
    columns = ["run_key", "kind", "file", "bytes", "why"]
    with closing(connect(db)) as con:
        if "artifacts" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}:
            return pd.DataFrame(columns=columns)
        rows = con.execute("SELECT run_key, kind, path, bytes, why FROM artifacts ORDER BY run_key, path").fetchall()
    root = Path(db).resolve().parent / f"{Path(db).stem}.artifacts"
    return pd.DataFrame([(key, kind, str(root / path), size, why) for key, kind, path, size, why in rows],
                        columns=columns)
