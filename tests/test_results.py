"""fecbench.analysis.results on databases written through fecbench.records.db: loading, pairing, checks, concurrency."""

from __future__ import annotations

import math
import shutil
import sqlite3

import numpy as np
import pytest

from fecbench.analysis import results, tables
from fecbench.inputs.errors import UserError
from fecbench.inputs.specs import DEFAULT_TIMEOUT_S
from fecbench.records import db as dbmod
from tests.helpers.analysis_db import DOWNLOAD_LABELS, FACTORS, SIZES, make_download_db, make_messages_db

POINTS, REPS, FAILURES = 4, 3, 2


@pytest.fixture(scope="module")
def download_db(tmp_path_factory):
    return make_download_db(tmp_path_factory.mktemp("res") / "d.sqlite", points=POINTS, repetitions=REPS,
                            failures=FAILURES)


@pytest.fixture(scope="module")
def messages_db(tmp_path_factory):
    return make_messages_db(tmp_path_factory.mktemp("res") / "m.sqlite")


def raw(db, sql, params=()):
    with sqlite3.connect(db) as con:
        return con.execute(sql, params).fetchall()


def test_load_one_row_per_run_with_factors_and_metrics(download_db):
    frame = results.load(download_db)
    assert len(frame) == POINTS * REPS * len(SIZES) * len(DOWNLOAD_LABELS)
    assert frame["key"].is_unique
    assert frame.attrs["factors"] == list(FACTORS)
    assert frame.attrs["labels"] == sorted(DOWNLOAD_LABELS)
    assert frame.attrs["sizes"] == SIZES
    # Factor values are those of the points table, joined on (campaign, point).
    for point, bw, r in raw(download_db, "SELECT point, bw, r FROM points"):
        rows = frame[frame["point"] == point]
        assert (rows["bw"] == bw).all() and (rows["r"] == r).all()
    # Metrics are those of the metrics table, joined on the run key.
    key, dct = raw(download_db, "SELECT run_key, dct_ms FROM metrics WHERE dct_ms IS NOT NULL LIMIT 1")[0]
    assert frame.set_index("key").loc[key, "dct_ms"] == dct
    failed = frame[frame["status"] != "ok"]
    assert len(failed) == FAILURES and failed["dct_ms"].isna().all() and failed["error"].notna().all()


def test_load_status_filter(download_db):
    assert set(results.load(download_db, status="ok")["status"]) == {"ok"}
    assert len(results.load(download_db, status=["failed", "timeout"])) == FAILURES


def test_paired_ratios_match_sql_join(download_db):
    pairs = results.paired(download_db, baseline="quic", by=["point", "rep", "size"])
    expected = raw(download_db, """
        SELECT a.point, a.repetition, a.size, a.label, ma.dct_ms / mb.dct_ms
        FROM runs a JOIN metrics ma ON ma.run_key = a.key
        JOIN runs b ON b.point = a.point AND b.repetition = a.repetition AND b.size = a.size
                    AND b.label = 'quic' AND b.status = 'ok'
        JOIN metrics mb ON mb.run_key = b.key
        WHERE a.label != 'quic' AND a.status = 'ok'""")
    assert len(pairs) == len(expected) == POINTS * REPS * len(SIZES) * 2 - FAILURES
    got = {(int(p), int(r), int(s), lbl): ratio for p, r, s, lbl, ratio in
           pairs[["point", "repetition", "size", "label", "ratio"]].itertuples(index=False)}
    for point, rep, size, label, ratio in expected:
        assert got[(point, rep, size, label)] == pytest.approx(ratio)
    assert set(pairs["baseline"]) == {"quic"}
    assert {"bw", "owd", "r"} <= set(pairs.columns)  # factors of the point, for ratio-vs-factor plots
    assert (pairs["ratio"] == pairs["value"] / pairs["baseline_value"]).all()


def test_paired_other_baseline_and_label_subset(download_db):
    pairs = results.paired(results.load(download_db), baseline="quic-fec-rs", labels=["quic-fec-rlc"])
    assert set(pairs["label"]) == {"quic-fec-rlc"}
    assert len(pairs) == POINTS * REPS * len(SIZES) - FAILURES


def test_paired_messages_without_size(messages_db):
    pairs = results.paired(messages_db, baseline="udp", by=["point", "rep"], metric="bytes_app")
    frame = results.load(messages_db)
    assert len(pairs) == len(frame) - len(frame[frame["label"] == "udp"])
    udp = frame[frame["label"] == "udp"].set_index(["point", "repetition"])["bytes_app"]
    for row in pairs.itertuples():
        assert row.baseline_value == udp.loc[(row.point, row.repetition)]


def test_paired_zero_baseline_gives_nan(tmp_path, download_db):
    copy = tmp_path / "zero.sqlite"
    shutil.copy(download_db, copy)
    with sqlite3.connect(copy) as con:
        con.execute("UPDATE metrics SET dct_ms = 0 WHERE run_key IN "
                    "(SELECT key FROM runs WHERE label = 'quic' AND point = 0 AND repetition = 0)")
    pairs = results.paired(copy)
    zero = pairs[(pairs["point"] == 0) & (pairs["repetition"] == 0)]
    assert len(zero) > 0 and zero["ratio"].isna().all()
    assert pairs.loc[pairs["point"] != 0, "ratio"].notna().all()


@pytest.mark.parametrize("kwargs, message", [
    ({"baseline": "tcp"}, "baseline label 'tcp' has no runs"),
    ({"metric": "goodput"}, "unknown metric 'goodput'"),
    ({"by": ["point", "colour"]}, "cannot pair on colour"),
    ({"labels": ["nope"]}, "label(s) nope have no runs"),
])
def test_paired_bad_arguments(download_db, kwargs, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        results.paired(download_db, **kwargs)


def test_bad_databases_are_user_errors(tmp_path, download_db):
    with pytest.raises(UserError, match="no such results database"):
        results.load(tmp_path / "missing.sqlite")
    (tmp_path / "empty.sqlite").write_bytes(b"")
    with pytest.raises(UserError, match="empty file"):
        results.load(tmp_path / "empty.sqlite")
    with pytest.raises(UserError, match="is a directory"):
        results.load(tmp_path)
    (tmp_path / "text.sqlite").write_text("hello, not sqlite" * 100)
    with pytest.raises(UserError, match="not a fecbench results database"):
        results.load(tmp_path / "text.sqlite")
    with sqlite3.connect(tmp_path / "other.sqlite") as con:
        con.execute("CREATE TABLE t (x)")
    with pytest.raises(UserError, match="not a fecbench results database"):
        results.load(tmp_path / "other.sqlite")
    newer = tmp_path / "newer.sqlite"
    shutil.copy(download_db, newer)
    with sqlite3.connect(newer) as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(dbmod.SCHEMA_VERSION + 1),))
    with pytest.raises(UserError, match=f"schema version {dbmod.SCHEMA_VERSION + 1}"):
        results.load(newer)


def test_read_only_and_safe_while_a_campaign_writes(tmp_path, download_db):
    live = tmp_path / "live.sqlite"
    shutil.copy(download_db, live)
    before = len(results.load(live))
    writer = dbmod.connect(live)
    try:
        writer.execute("BEGIN IMMEDIATE")  # the runner holds the write lock, mid-transaction
        writer.execute("INSERT INTO runs (key, campaign_id, point, label, workload, status) "
                       "VALUES ('new', 1, 0, 'quic', 'download', 'pending')")
        assert len(results.load(live)) == before  # readers see the last committed state, no waiting
        writer.execute("COMMIT")
        assert len(results.load(live)) == before + 1
    finally:
        writer.close()
    with results.connect(live) as con, pytest.raises(sqlite3.OperationalError, match="readonly"):
        con.execute("DELETE FROM runs")


def test_expected_loss_rate_models():
    assert tables.expected_loss_rate({"kind": "uniform", "p": 0.03}) == 0.03
    p, r = 0.05, 0.2  # P(Bad) = p / (p + r) = 0.2
    assert tables.expected_loss_rate({"kind": "gilbert-elliott", "p": p, "r": r}) == pytest.approx(0.2)
    ge = {"model": "gilbert-elliott", "p": p, "r": r, "k": 0.99, "h": 0.1}
    expected = 0.8 * 0.01 + 0.2 * 0.9  # P(Good) (1 - k) + P(Bad) (1 - h)
    assert tables.expected_loss_rate(ge) == pytest.approx(expected)
    assert tables.expected_loss_rate({"model": ge, "seed": 3, "stream": 0}) == pytest.approx(expected)
    assert tables.expected_loss_rate('{"kind": "uniform", "p": 0.1}') == 0.1
    runner_style = {"model": "gilbert-elliott", "params": {"p": p, "r": r, "k": 0.99, "h": 0.1}, "seed": 1}
    assert tables.expected_loss_rate(runner_style) == pytest.approx(expected)
    assert tables.expected_loss_rate({"model": "none", "dropper": {}}) == 0.0
    for unknown in (None, "not json", {"kind": "trace"}, {"kind": "uniform"}):
        assert math.isnan(tables.expected_loss_rate(unknown))


def test_link_stats_and_fidelity_join_on_run_key(download_db):
    frame = results.load(download_db)
    stats = tables.link_stats(download_db)
    assert set(stats["run_key"]) == set(frame["key"])
    forward = stats[stats["direction"] == "forward"]
    assert np.allclose(forward["loss_rate"], forward["dropped"] / forward["matched"])
    assert forward["expected_loss"].notna().all()
    assert (stats.loc[stats["direction"] == "reverse", "expected_loss"] == 0).all()
    fid = tables.fidelity(download_db)
    assert set(fid["run_key"]) == set(frame["key"])
    assert np.allclose(fid["rtt_ratio"], fid["rtt_measured_ms"] / fid["rtt_configured_ms"])
    assert fid["ok"].all()


def test_tables(download_db):
    frame = results.load(download_db)
    counts = results.status_counts(frame)
    assert counts["total"].sum() == len(frame)
    assert counts.loc["quic", "ok"] == POINTS * REPS * len(SIZES)
    med = results.medians(frame, "dct_ms")
    row = med[(med["label"] == "quic") & (med["size"] == 1000)].iloc[0]
    values = frame[(frame["label"] == "quic") & (frame["size"] == 1000)]["dct_ms"]
    assert row["median"] == pytest.approx(np.median(values)) and row["runs"] == len(values)
    pairs = results.paired(frame)
    rmed = results.ratio_medians(pairs)
    sub = pairs[(pairs["label"] == "quic-fec-rs") & (pairs["size"] == 1_000_000)]["ratio"]
    got = rmed[(rmed["label"] == "quic-fec-rs") & (rmed["size"] == 1_000_000)].iloc[0]
    assert got["median"] == pytest.approx(sub.median())
    assert got["below_1"] == pytest.approx((sub < 1).mean())
    assert len(results.campaigns(download_db)) == 1
    assert results.factors(download_db) == list(FACTORS)


def test_load_has_the_design_timeout_and_status_counts_per_point(download_db):
    frame = results.load(download_db)
    # The test campaign's stored design text sets no timeout_s: the runner's default applied.
    assert set(frame["timeout_s"]) == {DEFAULT_TIMEOUT_S}
    assert dbmod.campaign_settings(None, '[design]\nname = "x"\ntimeout_s = 300\n') == {"timeout_s": 300.0}
    per_point = results.status_counts(frame, by=["point", "label"])
    assert len(per_point) == POINTS * len(DOWNLOAD_LABELS)
    assert per_point["total"].sum() == len(frame)
    assert per_point.loc[(0, "quic"), "total"] == REPS * len(SIZES)


def test_the_table_reader_checks_every_name_against_the_schema(download_db):
    """results.rows / frame: identifiers only from the database's own schema, values as parameters; a
    table an older schema lacks has no columns (the readers test for it before reading)."""
    assert "runs" in results.table_names(download_db) and "key" in results.table_columns(download_db, "runs")
    assert results.table_columns(download_db, "no_such_table") == []
    keys = [k for (k,) in raw(download_db, "SELECT key FROM runs WHERE status = 'ok' ORDER BY key")]
    assert [k for (k,) in results.rows(download_db, "runs", ["key"], where={"status": "ok"}, order_by=["key"])] == keys
    frame = results.frame(download_db, "runs", ["key", "status"], where={"status": "ok"}, order_by=["key"])
    assert list(frame.columns) == ["key", "status"] and list(frame["key"]) == keys
    assert list(results.frame(download_db, "points").columns) == results.table_columns(download_db, "points")
    for bad in ({"name": "runs; DROP TABLE runs"}, {"name": "runs", "columns": ["key, status"]},
                {"name": "runs", "columns": ["key"], "where": {"1=1 OR status": "x"}},
                {"name": "runs", "columns": ["key"], "order_by": ["key DESC"]}):
        with pytest.raises(ValueError):
            results.rows(download_db, **{"columns": ["key"], **bad})
    assert raw(download_db, "SELECT COUNT(*) FROM runs")[0][0] > 0
