"""Which rule decided a run, recorded when it ran (runs.decided_by, schema 10; issue 72 item 1): `fecbench status`
and the report read it back, so that a bound changed since never re-decides a recorded run; a database of schema 9
is upgraded in place and its runs, which recorded none, are judged from their records as before."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd

from fecbench.analysis import results
from fecbench.analysis.report.accuracy import flagged_runs
from fecbench.records import db as dbmod
from fecbench.records import run_records
from fecbench.timekeeping.checks import named
from tests.helpers.analysis_db import make_table_db


def _record(db: Path, decided: dict[str, tuple[str, str | None]]) -> None:
    conn = dbmod.connect(db)
    for key, (status, by) in decided.items():
        run_records.finish_run(conn, key, status=status, error="endpoints: as recorded" if status == "fidelity"
                               else None, server_log_tail="", client_log_tail="", finished_at="t", duration_s=1.0,
                               decided_by=by)
    conn.close()


def test_status_and_report_read_the_recorded_decision_not_todays_bounds(tmp_path: Path) -> None:
    db = make_table_db(tmp_path / "d.sqlite", [(0, "quic", 1000, rep, "ok", 10.0) for rep in range(3)])
    keys = list(results.load(db).sort_values("repetition")["key"])
    _record(db, {keys[0]: ("fidelity", "endpoints"), keys[1]: ("fidelity", "endpoints, delay-lateness"),
                 keys[2]: ("ok", "ok")})
    frame = results.load(db)
    assert dict(zip(frame["key"], frame["decided_by"], strict=True))[keys[2]] == "ok"
    out = subprocess.run([sys.executable, "-m", "fecbench", "status", str(db), "--json"], capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout)["flagged_by"] == {"endpoints": 2, "delay-lateness": 1}
    # The records as a later bound would judge them: the first two runs' endpoints now within it, the third's beyond.
    # The report counts what was decided when they ran.
    rows = pd.DataFrame({"run_key": keys, "ok": [True, True, False]})
    check = named("endpoints")
    assert flagged_runs(rows, check, lambda row: {"ok": row["ok"]}, decided=frame) == 2
    assert flagged_runs(rows, check, lambda row: {"ok": row["ok"]}) == 1      # today's judgement: the third alone
    lateness = named("delay-lateness")
    assert flagged_runs(rows, lateness, lambda row: {}, decided=frame) == 1   # only the second named it


def test_a_schema_9_database_is_upgraded_and_its_runs_judged_from_their_records(tmp_path: Path) -> None:
    db = make_table_db(tmp_path / "old.sqlite", [(0, "quic", 1000, rep, "ok", 10.0) for rep in range(2)])
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN decided_by")
        conn.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    frame = results.load(db)                      # read-only: as written by schema 9, no column
    assert "decided_by" not in frame
    rows = pd.DataFrame({"run_key": list(frame["key"]), "ok": [False, True]})
    assert flagged_runs(rows, named("endpoints"), lambda row: {"ok": row["ok"]}, decided=frame) == 1
    conn = dbmod.connect(db)                      # a campaign's connection upgrades it
    assert dbmod.schema_version(conn) == dbmod.SCHEMA_VERSION == 10
    assert "decided_by" in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    conn.close()
    assert results.load(db)["decided_by"].isna().all()
