"""A transaction cut by a signal does not block the next write (records/db.py; CI, test_ctrl_c_on_the_coordinator):
Ctrl-C between a transaction's BEGIN and its with-block left the connection in it, and recording the interrupted
runs then failed with "cannot start a transaction within a transaction". Pure SQLite, no root."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fecbench.records import db as dbmod


def _connection(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "t.sqlite", isolation_level=None)
    conn.execute("CREATE TABLE runs (key TEXT PRIMARY KEY, status TEXT)")
    return conn


def test_a_transaction_cut_after_its_begin_is_rolled_back_by_the_next(tmp_path: Path) -> None:
    conn = _connection(tmp_path)
    cut = dbmod.transaction(conn)
    cut.__enter__()                      # BEGIN ran; the signal came before the with-block: no __exit__
    conn.execute("INSERT INTO runs VALUES ('a', 'ok')")
    assert conn.in_transaction
    with dbmod.transaction(conn):        # the campaign's next write: recording the interrupted runs
        conn.execute("INSERT INTO runs VALUES ('b', 'interrupted')")
    assert not conn.in_transaction
    assert conn.execute("SELECT key, status FROM runs").fetchall() == [("b", "interrupted")]


def test_an_error_in_the_block_rolls_back_and_a_transaction_outside_ours_is_not_touched(tmp_path: Path) -> None:
    conn = _connection(tmp_path)
    with pytest.raises(KeyboardInterrupt), dbmod.transaction(conn):
        conn.execute("INSERT INTO runs VALUES ('a', 'ok')")
        raise KeyboardInterrupt
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,) and not conn.in_transaction
    other = sqlite3.connect(tmp_path / "o.sqlite", isolation_level=None)
    other.execute("BEGIN")               # someone else's transaction: still an error to nest in it
    with pytest.raises(sqlite3.OperationalError, match="within a transaction"), dbmod.transaction(other):
        pass
