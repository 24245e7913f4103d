"""The link_events table (schema version 2: a link schedule's applied changes per run): migration of
a version 1 database in place, writes through finish_run, the read API, and retries clearing it."""

from __future__ import annotations

import sqlite3

import pytest

from fecbench.analysis import tables
from fecbench.records import db as dbmod
from fecbench.records import run_records


def test_link_events_table_migration_and_reader(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    dbmod._create_v1(conn)                       # a database written by schema version 1
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO runs (key, status) VALUES ('k', 'ok')")
    conn.close()
    assert tables.link_events(path).empty       # read-only: the old database is readable as it is
    conn = dbmod.connect(path)                   # a writer upgrades it in place, keeping the runs
    assert dbmod.schema_version(conn) == dbmod.SCHEMA_VERSION >= 2
    assert conn.execute("SELECT status FROM runs WHERE key='k'").fetchone()[0] == "ok"
    events = [{"seq": 0, "kind": "outage-start", "link": "bottleneck", "direction": "forward", "scheduled_s": 1.0,
               "applied_s": 1.0004, "took_ms": 0.01, "params": {"index_before": 50, "index_after": 50}}]
    run_records.finish_run(conn, "k", status="ok", error=None, server_log_tail="", client_log_tail="", finished_at="t",
                     duration_s=1.0, link_events=events)
    frame = tables.link_events(path)
    assert len(frame) == 1 and frame.loc[0, "params"] == {"index_before": 50, "index_after": 50}
    assert frame.loc[0, "error_ms"] == pytest.approx(0.4)
    run_records.start_run(conn, "k", "t", "delayline", "h")   # a retry clears the previous attempt's events
    assert tables.link_events(path).empty
    conn.close()


def test_report_summarises_the_applied_changes(tmp_path):
    from fecbench.analysis import report
    from tests.helpers.loss_position_db import make_loss_position_db

    db = make_loss_position_db(tmp_path / "u.sqlite")
    conn = dbmod.connect(db)
    events = [{"seq": i, "kind": kind, "link": "bottleneck", "direction": "forward", "scheduled_s": at,
               "applied_s": at + err / 1e3, "took_ms": 0.01, "params": {}}
              for i, (kind, at, err) in enumerate([("outage-start", 1.0, 0.05), ("outage-end", 1.2, -0.5)])]
    events.append({"seq": 2, "kind": "error", "params": {"error": "tc: boom"}})
    run_records.finish_run(conn, "run-a", status="ok", error=None, server_log_tail="", client_log_tail="",
                           finished_at="t", duration_s=1.0, metrics={"dct_ms": 250.0}, link_events=events)
    conn.close()
    built = report.build(db, tmp_path / "report")
    table = built.tables["link schedule: changes applied"].set_index("kind")
    assert list(table["changes"]) == [1, 1] and table.loc["outage-end", "max_error_ms"] == pytest.approx(0.5)
    assert "1 change(s) could not be applied" in (tmp_path / "report" / "index.html").read_text()
