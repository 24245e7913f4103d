"""The results database (SQLite, WAL): schema, versioning and the runner's writes.

One writer (the runner) and any number of readers (`open_readonly`, which uses a `mode=ro` URI so
a report can run while a campaign is writing). Schema version 10 (version 1 without link_events,
version 2 without breakers, version 3 without fidelity.checks and fidelity.json, version 4 without
runs.phases_json, version 5 without endpoint_timing, version 6 without sessions and earlier_outcomes, version 7
without artifacts, version 8 without twins, version 9 without runs.decided_by):

meta(key TEXT PRIMARY KEY, value TEXT)                 -- 'schema_version' = '1'
campaigns(id, name, design_path, design_text, design_hash, fecbench_version, git_sha, created_at,
          host_json, impls_json, plan_json, seed, repetitions, topology, link_backend,
          settings_json)  -- the design's settings after defaults (runners.experiment.design.Design.settings): readers
                             use these, never a second parse of design_text with defaults of their own
points(campaign_id, point, <one column per factor: REAL for numbers, TEXT for choices>,
       PRIMARY KEY (campaign_id, point))
runs(key TEXT PRIMARY KEY, campaign_id, point, impl, label, impl_args (JSON), workload,
     size (bytes, NULL for messages), repetition, loss_seed,
     status  -- pending | running (started, not finished) | ok | failed | timeout | unsupported | fidelity |
                interrupted (stopped, or left running by a campaign process that died: the next campaign says so)
     error, server_log_tail, client_log_tail, started_at, finished_at, duration_s (run wall time),
     attempts, link_backend, host,
     phases_json  -- where the run's wall time went: seconds per phase (runners.run.lifecycle.PHASES)
     runner  -- "<hostname> <pid>:<start time>" of the campaign process that started it: a run still
                'running' whose runner is gone was interrupted (fecbench status; the next campaign records it so)
     decided_by  -- the rule of runners.run.judge that decided its status, or the checks that flagged it
                    (timekeeping.checks names, comma-separated) under the bounds of its own run; NULL before
                    version 10 and for a run no judge saw (a harness fault))
metrics(run_key PRIMARY KEY REFERENCES runs(key), dct_ms, handshake_ms, bytes_app, packets_sent,
        bytes_sent, repair_sent, recovered, lost, retransmitted_bytes, congestion_events,
        cwnd_final, rtt_ms, rebuffering_ms, messages_late, messages_corrupt,
        client_wall_ms (fecbench's own measurement: client process start -> exit),
        json (the client's whole metrics JSON))
link_stats(run_key, link, direction, seen, matched, dropped, ge_good, ge_bad, bursts,
           longest_burst, gso_seen, model (JSON: loss model + seed + stream, a schedule's outages),
           delay_json, outage_dropped (a link schedule's outage drops, counted in dropped too),
           PRIMARY KEY (run_key, link, direction))
fidelity(run_key, path, rtt_configured_ms, rtt_measured_ms, rate_configured_mbit,
         rate_measured_mbit, ok, checks (measurements taken: a failed one is repeated),
         json (the whole row: one-way delays, probe lateness, what failed measurements read),
         PRIMARY KEY (run_key, path))
verdict_logs(run_key, link, direction, data BLOB (npz), PRIMARY KEY (run_key, link, direction))
link_events(run_key, seq, kind, link, direction, scheduled_s, applied_s, took_ms, params (JSON),
            PRIMARY KEY (run_key, seq))   -- a link schedule's changes as applied during the run
            (fecbench.emulation.schedule_apply: times in s after the client's start)
endpoint_timing(run_key PRIMARY KEY, wakeups, wakeup_p50_ms, wakeup_p99_ms, wakeup_max_ms, runq_share,
                cpu_share, bound_ms, ok, json)  -- how long the run's endpoint threads waited for a CPU
            (fecbench.timekeeping.endpoint_timing: wake-up latency quantiles, run-queue share, the bound judged by, and
            in json the whole summary with its histograms, or {"error": why} where it was not measured)
flows(run_key, flow, role, label, impl, tool, workload, start_s, started_s, ended_s, status, error,
      bytes_down, bytes_up, packets_down, packets_up, dropped_down, dropped_up, dct_ms,
      endpoint_wakeup_p99_ms, endpoint_runq_share, json, PRIMARY KEY (run_key, flow))
            -- a run with competing flows (runners.run.competing): one row per flow and one for the foreground;
            what crossed the lossy links per direction (down: server → client), planned and actual start and
            end (s from the foreground client's start), and in json its metrics, endpoint timing and the
            per-bin series [t_s, bytes_down, bytes_up, dropped_down, dropped_up]
twins(run_key, twin, attempt, status, error, started_at, finished_at, duration_s, link_backend, host, runner,
      why_again, metrics_json, json, server_log_tail, client_log_tail, PRIMARY KEY (run_key, twin, attempt))
            -- `fecbench run --twins`: a run run again under its key, recorded beside it, never in its place (the
            runs table and every table keyed by run_key keep the run's own outcome). One row per attempt of a
            twin (a flagged twin is re-run as a twin: `why_again` says why on the attempt before); the twin's
            outcome is its last attempt's. metrics_json: the client's metrics and client_wall_ms; json: what else
            it measured (link_stats, fidelity, endpoints without histograms, phases, flows, link_events,
            artifacts under <db stem>.twins.artifacts/). Before version 9, a twin took its run's place and the
            run's first outcome went to earlier_outcomes with why_again containing run_records.TWIN: readers
            read both (selection.twinned, analysis.report.evidence.attempts)
breakers(campaign_id, label, tripped_at, runs, status, error, skipped,
         PRIMARY KEY (campaign_id, label, tripped_at))  -- the circuit breaker (runners/executors/engine.py): the
            first `runs` runs of a label all ended `status` with the same `error`; its `skipped` other
            runs were not scheduled (they stay pending)

campaigns.host_json is the host fingerprint (kernel, CPU, tools, link backend); a campaign run on
a Dask cluster adds "dask" (the --dask value), "dask_security" (transport tls|tcp, authenticated,
credentials or why not; see runners/executors/dask_security.py), "coordinator" (its hostname) and "hosts":
{hostname: fingerprint + "workers": [{pid, prefix, address}]}; runs.host names the host that ran the run.

Timestamps are ISO 8601 UTC strings. A run's key is a sha256 of its content (see
`fecbench.runners.keys`), so re-running a campaign never duplicates a row. Future schema versions
add a function to `MIGRATIONS` that upgrades from the previous version in place.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fecbench.inputs.errors import UserError
from fecbench.inputs.specs import DEFAULT_TIMEOUT_S, tomllib

SCHEMA_VERSION = 10


# Metrics stored as typed columns (the rest stays in metrics.json).
METRIC_COLUMNS: dict[str, str] = {
    "dct_ms": "REAL", "handshake_ms": "REAL", "bytes_app": "INTEGER", "packets_sent": "INTEGER",
    "bytes_sent": "INTEGER", "repair_sent": "INTEGER", "recovered": "INTEGER", "lost": "INTEGER",
    "retransmitted_bytes": "INTEGER", "congestion_events": "INTEGER", "cwnd_final": "INTEGER",
    "rtt_ms": "REAL", "rebuffering_ms": "REAL", "messages_late": "INTEGER",
    "messages_corrupt": "INTEGER", "client_wall_ms": "REAL",
}

LINK_STAT_COLUMNS = ("seen", "matched", "dropped", "ge_good", "ge_bad", "bursts", "longest_burst",
                     "gso_seen")
# Added by a migration (not in the version-1 table): a link schedule's outage drops (in `dropped` too).
LINK_STAT_LATER = ("outage_dropped",)

_SCHEMA_V1 = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS campaigns (
  id INTEGER PRIMARY KEY, name TEXT, design_path TEXT, design_text TEXT, design_hash TEXT,
  fecbench_version TEXT, git_sha TEXT, created_at TEXT, host_json TEXT, impls_json TEXT,
  plan_json TEXT, seed INTEGER, repetitions INTEGER, topology TEXT, link_backend TEXT);
CREATE TABLE IF NOT EXISTS points (
  campaign_id INTEGER, point INTEGER, PRIMARY KEY (campaign_id, point));
CREATE TABLE IF NOT EXISTS runs (
  key TEXT PRIMARY KEY, campaign_id INTEGER, point INTEGER, impl TEXT, label TEXT, impl_args TEXT,
  workload TEXT, size INTEGER, repetition INTEGER, loss_seed INTEGER, status TEXT, error TEXT,
  server_log_tail TEXT, client_log_tail TEXT, started_at TEXT, finished_at TEXT, duration_s REAL,
  attempts INTEGER DEFAULT 0, link_backend TEXT, host TEXT);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE INDEX IF NOT EXISTS runs_campaign ON runs (campaign_id, point);
CREATE TABLE IF NOT EXISTS metrics (
  run_key TEXT PRIMARY KEY REFERENCES runs(key),
  {", ".join(f"{name} {kind}" for name, kind in METRIC_COLUMNS.items())},
  json TEXT);
CREATE TABLE IF NOT EXISTS link_stats (
  run_key TEXT, link TEXT, direction TEXT,
  {", ".join(f"{name} INTEGER" for name in LINK_STAT_COLUMNS)},
  model TEXT, delay_json TEXT, PRIMARY KEY (run_key, link, direction));
CREATE TABLE IF NOT EXISTS fidelity (
  run_key TEXT, path INTEGER, rtt_configured_ms REAL, rtt_measured_ms REAL,
  rate_configured_mbit REAL, rate_measured_mbit REAL, ok INTEGER, PRIMARY KEY (run_key, path));
CREATE TABLE IF NOT EXISTS verdict_logs (
  run_key TEXT, link TEXT, direction TEXT, data BLOB, PRIMARY KEY (run_key, link, direction));
"""


def _create_v1(conn: sqlite3.Connection) -> None:
    # One statement at a time: executescript() would commit the surrounding transaction.
    for statement in _SCHEMA_V1.split(";"):
        if statement.strip():
            conn.execute(statement)


def _add_link_events(conn: sqlite3.Connection) -> None:
    """Version 2: the changes a link schedule applied during each run."""
    conn.execute("CREATE TABLE IF NOT EXISTS link_events (run_key TEXT, seq INTEGER, kind TEXT, link TEXT, "
                 "direction TEXT, scheduled_s REAL, applied_s REAL, took_ms REAL, params TEXT, "
                 "PRIMARY KEY (run_key, seq))")


def _add_breakers(conn: sqlite3.Connection) -> None:
    """Version 3: implementation labels the circuit breaker stopped scheduling."""
    conn.execute("CREATE TABLE IF NOT EXISTS breakers (campaign_id INTEGER, label TEXT, tripped_at TEXT, "
                 "runs INTEGER, status TEXT, error TEXT, skipped INTEGER, "
                 "PRIMARY KEY (campaign_id, label, tripped_at))")


def _add_fidelity_checks(conn: sqlite3.Connection) -> None:
    """Version 4: how many measurements a fidelity check took, and its whole row as JSON."""
    conn.execute("ALTER TABLE fidelity ADD COLUMN checks INTEGER")
    conn.execute("ALTER TABLE fidelity ADD COLUMN json TEXT")


def _add_run_phases(conn: sqlite3.Connection) -> None:
    """Version 5: where each run's wall time went (seconds per phase)."""
    conn.execute("ALTER TABLE runs ADD COLUMN phases_json TEXT")


FLOW_REALS = ("start_s", "started_s", "ended_s")
FLOW_COUNTS = ("bytes_down", "bytes_up", "packets_down", "packets_up", "dropped_down", "dropped_up")
ENDPOINT_COLUMNS = ("wakeups", "wakeup_p50_ms", "wakeup_p99_ms", "wakeup_max_ms", "runq_share", "cpu_share",
                    "bound_ms")


def _add_endpoint_timing(conn: sqlite3.Connection) -> None:
    """Version 6: how long each run's endpoints waited for a CPU (fecbench.timekeeping.endpoint_timing), which campaign
    process started each run (so that `fecbench status` tells a run in flight from a lost one), and the
    design's settings after defaults with each campaign, and the flows of runs with competing flows."""
    conn.execute("ALTER TABLE runs ADD COLUMN runner TEXT")
    conn.execute("ALTER TABLE campaigns ADD COLUMN settings_json TEXT")
    conn.execute("ALTER TABLE link_stats ADD COLUMN outage_dropped INTEGER")
    conn.execute("CREATE TABLE IF NOT EXISTS flows (run_key TEXT, flow TEXT, role TEXT, label TEXT, impl TEXT, "
                 f"tool TEXT, workload TEXT, {', '.join(f'{c} REAL' for c in FLOW_REALS)}, status TEXT, error TEXT, "
                 f"{', '.join(f'{c} INTEGER' for c in FLOW_COUNTS)}, dct_ms REAL, endpoint_wakeup_p99_ms REAL, "
                 "endpoint_runq_share REAL, json TEXT, PRIMARY KEY (run_key, flow))")
    conn.execute("CREATE TABLE IF NOT EXISTS endpoint_timing (run_key TEXT PRIMARY KEY, wakeups INTEGER, "
                 "wakeup_p50_ms REAL, wakeup_p99_ms REAL, wakeup_max_ms REAL, runq_share REAL, cpu_share REAL, "
                 "bound_ms REAL, ok INTEGER, json TEXT)")


def _add_applied_and_sessions(conn: sqlite3.Connection) -> None:
    """Version 7: what each run gets (links, losses, workload, argv: fecbench.runners.experiment.applied) and the
    duration model's estimate, with every run; one row per `fecbench run` (its wall time, networks, the
    runs it did and their estimates: what later estimates on this machine learn from); the earlier
    outcome of a run done again (a fidelity-flagged run re-run at the end of its campaign)."""
    conn.execute("ALTER TABLE runs ADD COLUMN applied_json TEXT")
    conn.execute("ALTER TABLE runs ADD COLUMN estimate_s REAL")
    conn.execute("CREATE TABLE IF NOT EXISTS sessions (campaign_id INTEGER, runner TEXT, started_at TEXT, "
                 "wall_s REAL, jobs INTEGER, executor TEXT, runs INTEGER, run_s REAL, estimate_s REAL, json TEXT)")
    conn.execute("CREATE TABLE IF NOT EXISTS earlier_outcomes (run_key TEXT, attempt INTEGER, status TEXT, "
                 "error TEXT, finished_at TEXT, duration_s REAL, fidelity_json TEXT, why_again TEXT, "
                 "PRIMARY KEY (run_key, attempt))")


def _add_artifacts(conn: sqlite3.Connection) -> None:
    """Version 8: the files each run kept to explain itself (qlog, key logs, packet captures:
    runners.experiment.capture), under <db stem>.artifacts/."""
    conn.execute("CREATE TABLE IF NOT EXISTS artifacts (run_key TEXT, kind TEXT, path TEXT, bytes INTEGER, "
                 "why TEXT, PRIMARY KEY (run_key, path))")


def _add_twins(conn: sqlite3.Connection) -> None:
    """Version 9: twins (`fecbench run --twins`) beside their runs, each attempt a row."""
    conn.execute("CREATE TABLE IF NOT EXISTS twins (run_key TEXT, twin INTEGER, attempt INTEGER, status TEXT, "
                 "error TEXT, started_at TEXT, finished_at TEXT, duration_s REAL, link_backend TEXT, host TEXT, "
                 "runner TEXT, why_again TEXT, metrics_json TEXT, json TEXT, server_log_tail TEXT, "
                 "client_log_tail TEXT, PRIMARY KEY (run_key, twin, attempt))")


def _add_decided_by(conn: sqlite3.Connection) -> None:
    """Version 10: which rule decided a run's status, or which checks flagged it, as judged when it ran."""
    if "decided_by" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}:
        conn.execute("ALTER TABLE runs ADD COLUMN decided_by TEXT")


# MIGRATIONS[v] upgrades a database at version v to v + 1 (a new database is made at version 1, then upgraded).
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _add_link_events, 2: _add_breakers,
                                                                3: _add_fidelity_checks, 4: _add_run_phases,
                                                                5: _add_endpoint_timing,
                                                                6: _add_applied_and_sessions, 7: _add_artifacts,
                                                                8: _add_twins, 9: _add_decided_by}


class SchemaError(Exception):
    """The database was written by a newer fecbench, or is not a fecbench database."""


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) a results database for writing, at the current schema version."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)  # autocommit; explicit transactions
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    _upgrade(conn)
    return conn


def release(conn: sqlite3.Connection) -> None:
    """Close a writer's connection leaving the database readable without writing beside it: back to a rollback
    journal (a reader of a WAL database creates its -shm file, in the checkout for results/), when no other
    connection holds it (a reader or another writer: it stays WAL, as a campaign in progress needs)."""
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
    except sqlite3.Error:
        pass
    conn.close()


def open_readonly(path: str | Path) -> sqlite3.Connection:
    """Open a results database read-only (safe while a campaign writes to it); anything that is not a
    fecbench results database this version can read is a UserError naming the file."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such results database (run a campaign first: fecbench run DESIGN.toml)")
    if path.is_dir():
        raise UserError(f"{path}: is a directory, not a results database")
    if path.stat().st_size == 0:
        raise UserError(f"{path}: empty file, not a results database")
    conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        version = int(conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
    except (sqlite3.DatabaseError, TypeError, ValueError) as exc:
        conn.close()
        raise UserError(f"{path}: not a fecbench results database ({exc})") from None
    if version > SCHEMA_VERSION:
        conn.close()
        raise UserError(f"{path}: results schema version {version}, this fecbench reads version {SCHEMA_VERSION} "
                        "(open it with the fecbench version that wrote it)")
    return conn


def newest(directory: str | Path = "results") -> Path:
    """The newest ``*.sqlite`` in ``directory``: the database commands use when none is given."""
    candidates = sorted(Path(directory).glob("*.sqlite"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise UserError(f"no results database in {directory}/: give its path, or run a campaign first "
                        "(fecbench run designs/smoke.toml)")
    return candidates[-1]


def schema_version(conn: sqlite3.Connection) -> int:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0]) if row else 0


def _upgrade(conn: sqlite3.Connection) -> None:
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        raise SchemaError(f"database schema version {version} is newer than this fecbench ({SCHEMA_VERSION})")
    with transaction(conn):
        if version == 0:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables - {"meta"}:
                raise SchemaError("not a fecbench results database (tables present, no schema version)")
            _create_v1(conn)
            version = 1
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                     (str(SCHEMA_VERSION),))


#: The connections (by id) whose `transaction` has begun and not yet ended.
_BEGUN: set[int] = set()


class transaction:
    """`with transaction(conn):` BEGIN IMMEDIATE … COMMIT, ROLLBACK on error (autocommit connections).

    A signal (Ctrl-C) can cut one between its BEGIN and its with-block, or before its COMMIT: the with-block's
    ROLLBACK never runs and the connection stays in that transaction, so the campaign's next write (recording the
    interrupted runs) met "cannot start a transaction within a transaction" (CI, test_ctrl_c_on_the_coordinator).
    The next transaction on the connection rolls such a leftover back first, as its own with-block would have."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        if id(self.conn) in _BEGUN and self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        _BEGUN.add(id(self.conn))
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        _BEGUN.discard(id(self.conn))


# --- campaigns and points ---------------------------------------------------------------------

def find_campaign(conn: sqlite3.Connection, design_hash: str) -> int | None:
    row = conn.execute("SELECT id FROM campaigns WHERE design_hash=? ORDER BY id DESC LIMIT 1",
                       (design_hash,)).fetchone()
    return int(row[0]) if row else None


def design_texts(conn: sqlite3.Connection) -> list[str]:
    """The design text of every campaign of the database, the first recorded first."""
    return [str(r[0]) for r in conn.execute("SELECT design_text FROM campaigns WHERE design_text IS NOT NULL "
                                            "ORDER BY id")]


def insert_campaign(conn: sqlite3.Connection, **fields: Any) -> int:
    """Insert a campaign row; dict/list values are stored as JSON text."""
    fields = {k: json.dumps(v, sort_keys=True, default=str) if isinstance(v, (dict, list)) else v
              for k, v in fields.items()}
    cols = ", ".join(fields)
    marks = ", ".join("?" for _ in fields)
    cur = conn.execute(f"INSERT INTO campaigns ({cols}) VALUES ({marks})", tuple(fields.values()))
    return int(cur.lastrowid)


def update_campaign(conn: sqlite3.Connection, campaign_id: int, **fields: Any) -> None:
    fields = {k: json.dumps(v, sort_keys=True, default=str) if isinstance(v, (dict, list)) else v
              for k, v in fields.items()}
    sets = ", ".join(f"{k}=?" for k in fields)
    conn.execute(f"UPDATE campaigns SET {sets} WHERE id=?", (*fields.values(), campaign_id))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ensure_factor_columns(conn: sqlite3.Connection, factors: dict[str, str]) -> None:
    """Add missing factor columns to `points` (factors: name -> 'REAL' | 'TEXT')."""
    present = {r[1] for r in conn.execute("PRAGMA table_info(points)")}
    for name, kind in factors.items():
        if name not in present:
            conn.execute(f"ALTER TABLE points ADD COLUMN {_quote(name)} {kind}")


def insert_points(conn: sqlite3.Connection, campaign_id: int, rows: Iterable[dict[str, Any]]) -> None:
    """rows: {'point': int, factor: value, …}; existing points are replaced (same design, same values)."""
    for row in rows:
        cols = ["campaign_id", *row]
        conn.execute(f"INSERT OR REPLACE INTO points ({', '.join(_quote(c) for c in cols)}) "
                     f"VALUES ({', '.join('?' for _ in cols)})", (campaign_id, *row.values()))


def campaign_settings(settings_json: str | None, design_text: str | None) -> dict[str, Any]:
    """A campaign's design settings after defaults: those it recorded (schema 6); for a campaign recorded
    before, the time limit its design text set, else the design parser's default (the one source of it,
    fecbench.inputs.specs.DEFAULT_TIMEOUT_S)."""
    if settings_json:
        return dict(json.loads(settings_json))
    try:
        value = tomllib.loads(design_text or "").get("design", {}).get("timeout_s", DEFAULT_TIMEOUT_S)
        return {"timeout_s": float(value)}
    except (tomllib.TOMLDecodeError, AttributeError, TypeError, ValueError):
        return {}


def json_or_none(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)
