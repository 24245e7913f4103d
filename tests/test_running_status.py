"""A run in flight is stored `running`, not `interrupted` (issue 62 item 5): a SQL reader of the raw database sees
what it is; the next campaign records a run left `running` by a process that died `interrupted`; `fecbench status`
shows each as it is; the selection of the runs to do (and a reproduction, through `read_statuses`) counts a
`running` run as not done, as it counted an `interrupted` one; an old database's `interrupted` rows stay so."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fecbench.cli.status import mark_running
from fecbench.host import cleanup
from fecbench.records import db as dbmod
from fecbench.records import run_records
from fecbench.records.status import RETRYABLE, Status
from fecbench.runners.executors.selection import runs_to_do
from fecbench.runners.experiment.prepare import prepare
from fecbench.runners.run.recorder import Recorder, read_statuses
from tests.helpers.campaign import fake_design

#: A campaign process that ran on this host and is gone: PID 1's marker with a start time it never had.
GONE = f"{run_records.runner_name().split(' ')[0]} 1:999999999"


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


def _campaign(tmp_path: Path) -> tuple[Path, list[str]]:
    design = fake_design(tmp_path / "camp.toml", {"a": {}, "b": {}}, points=2)
    db = tmp_path / "camp.sqlite"
    prepared = prepare(design, require_built=False)
    Recorder.open(db, prepared, "netem", {}, {}).close()
    return design, [run.key for run in prepared.runs]


def _statuses(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT key, status FROM runs").fetchall())


def test_a_started_run_is_stored_running_and_counts_as_not_done(tmp_path: Path) -> None:
    design, keys = _campaign(tmp_path)
    db = tmp_path / "camp.sqlite"
    recorder = Recorder(dbmod.connect(db), 1)
    prepared = prepare(design, require_built=False)
    run = next(r for r in prepared.runs if r.key == keys[0])
    recorder.started(run, "netem", "here")
    recorder.close()
    assert _statuses(db)[keys[0]] == "running"          # what a SQL reader of the raw database sees
    assert read_statuses(db)[keys[0]] == "interrupted"  # not done, as every caller counted it
    assert keys[0] in {r.key for r in runs_to_do(prepared, db, set())}
    assert Status.RUNNING not in RETRYABLE


def test_the_next_campaign_records_a_run_left_running_by_a_dead_process_interrupted(tmp_path: Path) -> None:
    design, keys = _campaign(tmp_path)
    db = tmp_path / "camp.sqlite"
    conn = dbmod.connect(db)
    run_records.start_run(conn, keys[0], "t0", "netem", "here", GONE)                       # its process died
    run_records.start_run(conn, keys[1], "t0", "netem", "here", run_records.runner_name())  # in flight here
    with dbmod.transaction(conn):   # a database of an older fecbench: a run it stopped
        conn.execute("UPDATE runs SET status = 'interrupted', error = 'x' WHERE key = ?", (keys[2],))
    conn.close()
    assert [_statuses(db)[k] for k in keys[:3]] == ["running", "running", "interrupted"]
    Recorder.open(db, prepare(design, require_built=False), "netem", {}, {}).close()
    after = _statuses(db)
    assert [after[k] for k in keys[:3]] == ["interrupted", "running", "interrupted"]
    with sqlite3.connect(db) as conn:
        error = conn.execute("SELECT error FROM runs WHERE key = ?", (keys[0],)).fetchone()[0]
    assert "its campaign process ended before it did" in error


def test_status_shows_running_only_while_its_process_runs() -> None:
    rows = [{"status": "running", "finished_at": None, "runner": run_records.runner_name(), "error": "e"},
            {"status": "running", "finished_at": None, "runner": GONE, "error": "started, not finished"},
            {"status": "interrupted", "finished_at": None, "runner": GONE, "error": "Ctrl-C"},
            # an older fecbench stored a run in flight as `interrupted`: still shown running while it runs
            {"status": "interrupted", "finished_at": None, "runner": run_records.runner_name(), "error": "e"}]
    mark_running(rows)
    assert [r["status"] for r in rows] == ["running", "interrupted", "interrupted", "running"]
