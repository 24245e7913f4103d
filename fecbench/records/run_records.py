"""The records of a campaign's runs in its database: pending, started (by which campaign process),
finished with everything measured (metrics, link statistics, fidelity, verdict logs, link events,
endpoint timing, competing flows), and the circuit breaker's record. The schema is in fecbench.records.db;
the campaign's Recorder (runners.run.recorder) is the one writer."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterable
from typing import Any

from fecbench.host.marks import format_owner, own_owner, parse_owners, running
from fecbench.records import db as dbmod
from fecbench.records.status import STATUSES


def insert_pending_runs(conn: sqlite3.Connection, rows: Iterable[dict[str, Any]]) -> int:
    """Insert runs not yet in the table as 'pending'; existing keys are left alone, but get what they lack of
    `applied_json` and `estimate_s` (runs planned by an older fecbench). Returns the count inserted."""
    count = 0
    for row in rows:
        cols = list(row) + ["status", "attempts"]
        cur = conn.execute(f"INSERT OR IGNORE INTO runs ({', '.join(cols)}) VALUES "
                           f"({', '.join('?' for _ in cols)})", (*row.values(), "pending", 0))
        count += cur.rowcount
        if not cur.rowcount and "applied_json" in row:
            conn.execute("UPDATE runs SET applied_json = coalesce(applied_json, ?), "
                         "estimate_s = coalesce(estimate_s, ?) WHERE key = ?",
                         (row["applied_json"], row.get("estimate_s"), row["key"]))
    return count


def keep_earlier_outcome(conn: sqlite3.Connection, key: str, why_again: str) -> None:
    """Copy a finished run's outcome (status, error, times, fidelity checks) aside before it runs again."""
    row = conn.execute("SELECT status, error, finished_at, duration_s, attempts FROM runs WHERE key = ?",
                       (key,)).fetchone()
    if row is None:
        return
    checks = [dict(zip(("path", "rtt_configured_ms", "rtt_measured_ms", "rate_configured_mbit",
                        "rate_measured_mbit", "ok"), r, strict=True))
              for r in conn.execute("SELECT path, rtt_configured_ms, rtt_measured_ms, rate_configured_mbit, "
                                    "rate_measured_mbit, ok FROM fidelity WHERE run_key = ?", (key,))]
    endpoint = conn.execute("SELECT wakeup_p99_ms, bound_ms, ok, json FROM endpoint_timing WHERE run_key = ?",
                            (key,)).fetchone()
    # What the attempt measured, so that it can be compared with the run's next attempt (the report does):
    # its typed metrics, and its endpoints' timing without the histograms.
    names = [c for c in dbmod.METRIC_COLUMNS if c in {r[1] for r in conn.execute("PRAGMA table_info(metrics)")}]
    measured = conn.execute(f"SELECT {', '.join(names)} FROM metrics WHERE run_key = ?", (key,)).fetchone()
    timing = {k: v for k, v in (json.loads(endpoint[3]) if endpoint and endpoint[3] else {}).items()
              if not k.endswith("_hist")}
    extra = {"fidelity": checks, "endpoint": list(endpoint[:3]) if endpoint else None,
             "endpoint_timing": timing or None,
             "metrics": {n: v for n, v in zip(names, measured, strict=True) if v is not None} if measured else None}
    with dbmod.transaction(conn):
        conn.execute("INSERT OR REPLACE INTO earlier_outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (key, row[4], row[0], row[1], row[2], row[3], json.dumps(extra), why_again))


def insert_session(conn: sqlite3.Connection, **fields: Any) -> None:
    """One `fecbench run` (or reproduce campaign) as it ended: wall time, networks, runs and their estimates."""
    cols = list(fields)
    with dbmod.transaction(conn):
        conn.execute(f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                     tuple(fields.values()))


def run_statuses(conn: sqlite3.Connection, keys: Iterable[str] | None = None) -> dict[str, str]:
    rows = conn.execute("SELECT key, status FROM runs").fetchall()
    statuses = {r[0]: r[1] for r in rows}
    if keys is not None:
        wanted = set(keys)
        statuses = {k: v for k, v in statuses.items() if k in wanted}
    return statuses


def start_run(conn: sqlite3.Connection, key: str, started_at: str, link_backend: str, host: str,
              runner: str | None = None) -> None:
    """Mark a run as started: status 'running' until it finishes, never half 'ok'; a crash from here on leaves it
    'running', which the next campaign on the database records 'interrupted' (`interrupt_left_over`). `runner`
    names the campaign process that started it (`runner_name`)."""
    with dbmod.transaction(conn):
        conn.execute("UPDATE runs SET status='running', error='started, not finished', "
                     "started_at=?, finished_at=NULL, duration_s=NULL, attempts=attempts+1, "
                     "link_backend=?, host=?, runner=? WHERE key=?", (started_at, link_backend, host, runner, key))
        _delete_results(conn, key)


def interrupt_left_over(conn: sqlite3.Connection) -> int:
    """Runs left 'running' by a campaign process that is gone (killed, crashed, its host rebooted): recorded
    'interrupted', as a run stopped by Ctrl-C is. One whose process still runs (or runs on another host, which
    this host cannot tell) is left alone. Returns how many were."""
    rows = conn.execute("SELECT key, runner FROM runs WHERE status = 'running'").fetchall()
    gone = [key for key, runner in rows if runner_alive(runner) is False or not runner]
    with dbmod.transaction(conn):
        conn.executemany("UPDATE runs SET status='interrupted', error='started, not finished: its campaign "
                         "process ended before it did' WHERE key=? AND status='running'", [(k,) for k in gone])
    return len(gone)


def runner_name() -> str:
    """This process as a run's `runner`: hostname, PID and start time (a recycled PID is not it)."""
    return f"{socket.gethostname()} {format_owner(own_owner())}"


def runner_alive(runner: str | None) -> bool | None:
    """Whether the campaign process named by a run's `runner` still runs: None when it ran on another host
    (or was not recorded), which this host cannot tell."""
    host, _, owner = (runner or "").partition(" ")
    owners = parse_owners(owner)
    if not owners or host != socket.gethostname():
        return None
    return running(owners[0])


def _delete_results(conn: sqlite3.Connection, key: str) -> None:
    for table in ("metrics", "link_stats", "fidelity", "verdict_logs", "link_events", "endpoint_timing", "flows",
                  "artifacts"):
        conn.execute(f"DELETE FROM {table} WHERE run_key=?", (key,))


def finish_run(conn: sqlite3.Connection, key: str, *, status: str, error: str | None,
               server_log_tail: str | None, client_log_tail: str | None, finished_at: str,
               duration_s: float, metrics: dict[str, Any] | None = None,
               client_wall_ms: float | None = None, link_stats: list[dict[str, Any]] | None = None,
               fidelity: list[dict[str, Any]] | None = None,
               verdict_logs: list[tuple[str, str, bytes]] | None = None,
               link_events: list[dict[str, Any]] | None = None,
               phases: dict[str, float] | None = None, endpoints: dict[str, Any] | None = None,
               flows: list[dict[str, Any]] | None = None, artifacts: list[dict[str, Any]] | None = None,
               decided_by: str | None = None) -> None:
    """Record a run's outcome and everything measured, in one transaction; ``decided_by``: the judge's rule or the
    checks that flagged it (``runs.decided_by``)."""
    if status not in STATUSES:
        raise ValueError(f"unknown run status {status!r}")
    with dbmod.transaction(conn):
        conn.execute("UPDATE runs SET status=?, error=?, server_log_tail=?, client_log_tail=?, "
                     "finished_at=?, duration_s=?, phases_json=?, decided_by=? WHERE key=?",
                     (status, error, server_log_tail, client_log_tail, finished_at, duration_s,
                      json.dumps(phases) if phases else None, decided_by, key))
        _delete_results(conn, key)
        if metrics is not None or client_wall_ms is not None:
            values = dict.fromkeys(dbmod.METRIC_COLUMNS)
            for name in dbmod.METRIC_COLUMNS:
                value = (metrics or {}).get(name)
                numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
                values[name] = value if numeric else None
            values["client_wall_ms"] = client_wall_ms
            cols = ["run_key", *values, "json"]
            conn.execute(f"INSERT INTO metrics ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                         (key, *values.values(), json.dumps(metrics, sort_keys=True) if metrics else None))
        counters = (*dbmod.LINK_STAT_COLUMNS, *dbmod.LINK_STAT_LATER)
        for stat in link_stats or []:
            conn.execute(
                f"INSERT OR REPLACE INTO link_stats (run_key, link, direction, {', '.join(counters)}, "
                f"model, delay_json) VALUES (?, ?, ?, {', '.join('?' for _ in counters)}, ?, ?)",
                (key, stat["link"], stat["direction"], *(stat.get(c) for c in counters),
                 dbmod.json_or_none(stat.get("model")), dbmod.json_or_none(stat.get("delay"))))
        for fid in fidelity or []:
            conn.execute("INSERT OR REPLACE INTO fidelity (run_key, path, rtt_configured_ms, "
                         "rtt_measured_ms, rate_configured_mbit, rate_measured_mbit, ok, checks, json) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (key, fid["path"], fid.get("rtt_configured_ms"), fid.get("rtt_measured_ms"),
                          fid.get("rate_configured_mbit"), fid.get("rate_measured_mbit"),
                          None if fid.get("ok") is None else int(bool(fid["ok"])), fid.get("checks"),
                          json.dumps(fid, sort_keys=True, default=str)))
        for link, direction, data in verdict_logs or []:
            conn.execute("INSERT OR REPLACE INTO verdict_logs (run_key, link, direction, data) "
                         "VALUES (?, ?, ?, ?)",
                         (key, link, direction, data))
        for event in link_events or []:
            conn.execute("INSERT OR REPLACE INTO link_events (run_key, seq, kind, link, direction, scheduled_s, "
                         "applied_s, took_ms, params) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (key, event["seq"], event["kind"], event.get("link"), event.get("direction"),
                          event.get("scheduled_s"), event.get("applied_s"), event.get("took_ms"),
                          dbmod.json_or_none(event.get("params"))))
        if endpoints is not None:
            ok, names = endpoints.get("ok"), dbmod.ENDPOINT_COLUMNS
            conn.execute(f"INSERT OR REPLACE INTO endpoint_timing (run_key, {', '.join(names)}, ok, json) "
                         f"VALUES (?, {', '.join('?' for _ in names)}, ?, ?)",
                         (key, *(endpoints.get(c) for c in names), None if ok is None else int(bool(ok)),
                          json.dumps(endpoints, sort_keys=True)))
        for flow in flows or []:
            _insert_flow(conn, key, flow)
        for artifact in artifacts or []:
            conn.execute("INSERT OR REPLACE INTO artifacts (run_key, kind, path, bytes, why) VALUES (?, ?, ?, ?, ?)",
                         (key, artifact["kind"], artifact["path"], artifact["bytes"], artifact.get("why")))


def _insert_flow(conn: sqlite3.Connection, key: str, flow: dict[str, Any]) -> None:
    ends = flow.get("endpoints") or {}
    columns = ["run_key", "flow", "role", "label", "impl", "tool", "workload", *dbmod.FLOW_REALS, "status", "error",
               *dbmod.FLOW_COUNTS, "dct_ms", "endpoint_wakeup_p99_ms", "endpoint_runq_share", "json"]
    row = {**flow, "run_key": key, "endpoint_wakeup_p99_ms": ends.get("wakeup_p99_ms"),
           "endpoint_runq_share": ends.get("runq_share"),
           "json": json.dumps({k: flow.get(k) for k in ("metrics", "endpoints", "series", "bin_s", "data")},
                              sort_keys=True, default=str)}
    dct = row.get("dct_ms")
    row["dct_ms"] = dct if isinstance(dct, (int, float)) and not isinstance(dct, bool) else None
    conn.execute(f"INSERT OR REPLACE INTO flows ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                 tuple(row.get(c) for c in columns))


def insert_breaker(conn: sqlite3.Connection, campaign_id: int, label: str, tripped_at: str, runs: int,
                   status: str, error: str, skipped: int) -> None:
    conn.execute("INSERT OR REPLACE INTO breakers (campaign_id, label, tripped_at, runs, status, error, skipped) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?)", (campaign_id, label, tripped_at, runs, status, error, skipped))


def read_breakers(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every tripped circuit breaker (none in a database older than schema version 3)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='breakers'").fetchone():
        return []
    return [dict(r) for r in conn.execute("SELECT * FROM breakers ORDER BY tripped_at")]


def sessions_and_durations(path: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What a results database says about how long things took here (runners.experiment.estimate): its sessions
    (runner, jobs, executor, wall_s, json, campaign name, runs) and its ok runs' (impl, workload, duration_s,
    estimate_s, runner). Empty for a database of an older schema or none at all; never writes."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return [], []
    try:
        sessions = conn.execute("SELECT runner, jobs, executor, wall_s, s.json, c.name, s.runs FROM sessions s "
                                "LEFT JOIN campaigns c ON c.id = s.campaign_id").fetchall()
        runs = conn.execute("SELECT impl, workload, duration_s, estimate_s, runner FROM runs WHERE status = 'ok' "
                            "AND duration_s > 0 AND estimate_s > 0").fetchall()
    except sqlite3.Error:
        return [], []
    finally:
        conn.close()
    return sessions, runs


def measured_durations(path: Any) -> dict[str, float]:
    """key -> duration_s of a database's runs that ran to their end (ok, timeout, or flagged: a real duration):
    what a campaign's own runs took here (runners.experiment.estimate). Empty for none; never writes."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return {}
    try:
        rows = conn.execute("SELECT key, duration_s FROM runs WHERE status IN ('ok', 'timeout', 'fidelity') "
                            "AND duration_s > 0").fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    return {str(key): float(seconds) for key, seconds in rows}


def kept_bytes(path: Any) -> int:
    """Bytes of artifacts a campaign's runs kept (0 for a database without the table)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'artifacts'").fetchone()
        return int(conn.execute("SELECT coalesce(sum(bytes), 0) FROM artifacts").fetchone()[0]) if found else 0


def retried_keys(conn: sqlite3.Connection, statuses: Iterable[str]) -> set[str]:
    """The runs run again after ending with one of ``statuses`` (an earlier outcome kept)."""
    wanted = list(statuses)
    marks = ", ".join("?" * len(wanted))
    rows = conn.execute(f"SELECT DISTINCT run_key FROM earlier_outcomes WHERE status IN ({marks})", wanted)
    return {str(key) for (key,) in rows}


#: Why a twin's first outcome was kept aside by a fecbench before schema version 9, when a twin took its run's place
#: (``earlier_outcomes.why_again`` starts with its status, then this in parentheses): what readers of such a
#: database look for. Twins are now recorded beside their runs (the ``twins`` table: ``start_twin``).
TWIN = "twin: the same key run again by --twins"


def again_for(conn: sqlite3.Connection, why: str) -> set[str]:
    """The runs run again for a reason containing ``why`` (an earlier outcome kept with it)."""
    rows = conn.execute("SELECT DISTINCT run_key FROM earlier_outcomes WHERE instr(why_again, ?) > 0", (why,))
    return {str(key) for (key,) in rows}


# --- twins (`fecbench run --twins`): beside their runs, never in their place ---------------------------------

_UNFINISHED = ("running", "interrupted")


def start_twin(conn: sqlite3.Connection, key: str, started_at: str, link_backend: str, host: str, runner: str,
               twin: int | None = None) -> int:
    """A twin of run ``key`` starts: a new attempt row, 'running', in the twins table (the runs table is not
    touched). ``twin``: the twin this campaign process started already (a flagged twin re-run: its next attempt);
    None: the run's twin left unfinished (interrupted, or running when its process died), else a new one.
    Returns the twin's number (1 for a run's first)."""
    with dbmod.transaction(conn):
        if twin is None:
            last = conn.execute("SELECT twin, status FROM twins WHERE run_key = ? ORDER BY twin DESC, attempt DESC "
                                "LIMIT 1", (key,)).fetchone()
            twin = 1 if last is None else int(last[0]) + (last[1] not in _UNFINISHED)
        attempt = int(conn.execute("SELECT coalesce(max(attempt), 0) + 1 FROM twins WHERE run_key = ? AND twin = ?",
                                   (key, twin)).fetchone()[0])
        conn.execute("UPDATE twins SET status = 'interrupted' WHERE run_key = ? AND twin = ? AND status = 'running'",
                     (key, twin))
        conn.execute("INSERT INTO twins (run_key, twin, attempt, status, error, started_at, link_backend, host, "
                     "runner) VALUES (?, ?, ?, 'running', 'started, not finished', ?, ?, ?, ?)",
                     (key, twin, attempt, started_at, link_backend, host, runner))
    return twin


def finish_twin(conn: sqlite3.Connection, key: str, twin: int, *, status: str, error: str | None, finished_at: str,
                duration_s: float, metrics: dict[str, Any] | None, measured: dict[str, Any],
                server_log_tail: str | None, client_log_tail: str | None) -> None:
    """A twin's outcome on its last attempt row: status, error, times, ``metrics`` (the client's, with
    client_wall_ms) and ``measured`` (what else the run measured: link stats, fidelity, endpoints, ...)."""
    if status not in STATUSES:
        raise ValueError(f"unknown run status {status!r}")
    endpoints = measured.get("endpoints")
    if isinstance(endpoints, dict):   # the summary without its histograms, as earlier_outcomes keeps it
        measured = {**measured, "endpoints": {k: v for k, v in endpoints.items() if not k.endswith("_hist")}}
    with dbmod.transaction(conn):
        conn.execute("UPDATE twins SET status = ?, error = ?, finished_at = ?, duration_s = ?, metrics_json = ?, "
                     "json = ?, server_log_tail = ?, client_log_tail = ? WHERE run_key = ? AND twin = ? AND attempt = "
                     "(SELECT max(attempt) FROM twins WHERE run_key = ? AND twin = ?)",
                     (status, error, finished_at, duration_s, json.dumps(metrics, sort_keys=True, default=str),
                      json.dumps(measured, sort_keys=True, default=str), server_log_tail, client_log_tail, key, twin,
                      key, twin))


def twin_again(conn: sqlite3.Connection, key: str, twin: int, why_again: str) -> None:
    """A twin about to run again (flagged, or lost with its worker): why, on its last attempt's row."""
    with dbmod.transaction(conn):
        conn.execute("UPDATE twins SET why_again = ? WHERE run_key = ? AND twin = ? AND attempt = "
                     "(SELECT max(attempt) FROM twins WHERE run_key = ? AND twin = ?)",
                     (why_again, key, twin, key, twin))


def twinned_keys(conn: sqlite3.Connection) -> set[str]:
    """The runs that have a twin which ran to its end (whatever its status): the twins table's, and in a
    database written before schema version 9, the runs whose first outcome was kept aside with ``TWIN``."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    done = set()
    if "twins" in tables:
        marks = ", ".join("?" for _ in _UNFINISHED)
        done = {str(key) for (key,) in conn.execute(
            f"SELECT DISTINCT run_key FROM twins WHERE status NOT IN ({marks})", _UNFINISHED)}
    return done | (again_for(conn, TWIN) if "earlier_outcomes" in tables else set())


def extra_repetitions(conn: sqlite3.Connection, first: int) -> list[tuple[Any, ...]]:
    """(point, repetition, size, label, key) of the runs whose repetition is ``first`` or later (the runs a
    reproduction added beyond its design's repetitions)."""
    return conn.execute("SELECT point, repetition, size, label, key FROM runs WHERE repetition >= ?",
                        (first,)).fetchall()


def ok_durations(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """(point, repetition, size, label, duration_s) of the runs that ended ok, with a measured duration."""
    return conn.execute("SELECT point, repetition, size, label, duration_s FROM runs "
                        "WHERE status = 'ok' AND duration_s > 0").fetchall()
