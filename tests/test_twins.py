"""Twins (issue 62 item 8, issue 68 item 2): runs run again under their own key at a campaign's end (`fecbench run
--twins N`), each twin recorded beside its run (the twins table), never in its place: every table keyed by a run and
every analysis see the run's own outcome. The report gives their spread beside every effect, and `fecbench run
--twins` prints it once enough twins ended ok (`evidence.MIN_TWINS`).

Real runs of the fake implementation on the in-memory testbed (no root), through the executor `make_executor`
builds (`serial.SerialExecutor`, its testbed swapped) and the real engine, recorder and SQLite."""

from __future__ import annotations

import inspect
import io
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from fecbench.analysis import ratios, results
from fecbench.analysis.report import evidence, sentences
from fecbench.cli import run as run_cli
from fecbench.host import cleanup
from fecbench.records import db as dbmod
from fecbench.runners.commands import pipeline
from fecbench.runners.executors import Machine, make_executor, selection, serial
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.experiment.prepare import Prepared, prepare
from fecbench.verdicts import samples
from tests.helpers.campaign import fake_design, rows
from tests.helpers.fake_testbed import FakeTestbed

QUIET = SilentReporter()
#: Every table whose rows are a run's (keyed by run_key), and the runs table itself.
RUN_TABLES = ("runs", "metrics", "link_stats", "fidelity", "endpoint_timing", "link_events", "flows", "artifacts",
              "earlier_outcomes")


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


class Fake:
    """The in-memory testbed of every executor built, and what the twins meet once `twins` is set: a network
    whose measured RTT misses the design at `bad_bw` (flagged `fidelity`), and clients given `--level` that fail."""

    def __init__(self) -> None:
        self.twins = False
        self.bad_bw: float | None = None

    def measured_rtt(self, values: dict[str, Any]) -> float | None:
        return 1000.0 if self.twins and values["bw"] == self.bad_bw else None

    def on_start(self, role: str, argv: list[str]) -> None:
        if self.twins and role == "client" and "--level" in argv:
            argv += ["--behave", "fail"]      # the argv the process starts with (the last --behave counts)

    def factory(self, topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        return FakeTestbed(topology, values, backend, measured_rtt=self.measured_rtt, on_start=self.on_start)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Fake:
    fake = Fake()

    class FakeSerial(serial.SerialExecutor):
        def __init__(self, prepared: Prepared, db_path: Path, **kw: Any) -> None:
            super().__init__(prepared, db_path, testbed_factory=fake.factory, **kw)

    monkeypatch.setattr(serial, "SerialExecutor", FakeSerial)   # what make_executor builds
    return fake


def _campaign(tmp_path: Path, labels: dict[str, dict[str, str]], points: int) -> tuple[Prepared, Path]:
    """A campaign of the fake implementation run to its end, as `fecbench run` executes it (all runs ok)."""
    prepared = prepare(fake_design(tmp_path / "camp.toml", labels, points=points, timeout_s=10))
    db = tmp_path / "camp.sqlite"
    Engine(prepared, db, make_executor(prepared, db, Machine(), 1, None, QUIET), QUIET).run(set())
    assert {r["status"] for r in rows(db, "SELECT status FROM runs")} == {"ok"}
    return prepared, db


def _snapshot(db: Path) -> dict[str, list[dict[str, Any]]]:
    return {table: sorted(rows(db, f"SELECT * FROM {table}"), key=repr) for table in RUN_TABLES}


def _analyses(db: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """What analyses read: the runs frame, the pairs a comparison makes, and a claim's runs (verdict samples: each
    run's row and whether it was run again after a failure or a flag)."""
    frame = results.load(db)
    data = samples.Data(db)
    index = pd.DataFrame([{**row, "retried": data.retried(row)} for row in data.index().values()])
    return frame, ratios.pairs(frame, baseline="quic", metric="dct_ms"), index


def test_twins_are_recorded_beside_their_runs_which_stay_as_they_were(tmp_path: Path, fake: Fake) -> None:
    """8 runs, then 3 twins, then 3 more, never the same run twice: each twin in the twins table with its metrics,
    its run folder apart; every table of the runs unchanged; the report reads twin ÷ run."""
    prepared, db = _campaign(tmp_path, {"quic": {}, "fec": {}}, points=4)
    before = _snapshot(db)
    first = selection.twins(prepared, db, 3)
    assert len(first) == 3 and [r.key for r in first] == [r.key for r in selection.twins(prepared, db, 3)]  # seeded
    fake.twins = True
    summary = pipeline.twins(prepared, db, 3, Machine(keep_logs=True), 1, QUIET)
    assert summary is not None and summary.selected == 3 and summary.counts == Counter({"ok": 3})
    assert _snapshot(db) == before            # the runs, their metrics and checks: as the runs left them
    twins = rows(db, "SELECT * FROM twins")
    assert sorted(t["run_key"] for t in twins) == sorted(r.key for r in first)
    assert all(t["twin"] == 1 and t["attempt"] == 1 and t["status"] == "ok" and t["host"] == "fakehost"
               and json.loads(t["metrics_json"])["dct_ms"] > 0 and json.loads(t["json"])["endpoints"]["ok"]
               for t in twins)
    for run in first:    # the twin's run folder apart from the run's (--keep-logs kept it)
        assert (serial.twin_log_root(db) / run.key[:16]).is_dir()
        assert not (serial.log_root_for(db) / run.key[:16]).exists()
    assert selection.twinned(db) == {r.key for r in first}
    second = selection.twins(prepared, db, 3)
    assert len(second) == 3 and not {r.key for r in second} & {r.key for r in first}   # none twinned twice
    tried = evidence.attempts(db, results.load(db))
    assert tried["twin"].all() and sorted(tried["key"]) == sorted(r.key for r in first)
    run_dct = {r["run_key"]: r["dct_ms"] for r in rows(db, "SELECT run_key, dct_ms FROM metrics")}
    twin_dct = {t["run_key"]: json.loads(t["metrics_json"])["dct_ms"] for t in twins}
    for row in tried.to_dict("records"):    # earlier: the run; final: its twin
        assert row["earlier dct_ms"] == run_dct[row["key"]] and row["final dct_ms"] == twin_dct[row["key"]]
    spreads = evidence.twin_spreads(tried)
    assert spreads["twins"].sum() == 3 and (spreads["spread (90 %)"] >= 0).all()
    tables: dict[str, pd.DataFrame] = {}
    notes: dict[str, str] = {}
    evidence.attempts_section(tables, notes, db, results.load(db))
    assert "twins: how far a run repeats itself" in tables and "attempts compared (runs run again)" not in tables


def test_a_twin_flagged_or_failing_leaves_its_run_ok_and_every_analysis_as_it_was(tmp_path: Path,
                                                                                   fake: Fake) -> None:
    """Every run of 2 points × 2 labels twinned: at one point the network misses the design (both twins flagged
    `fidelity`, re-run once as twins, flagged again), at the other the `fec` client fails. The runs stay ok with
    their metrics; the runs frame, a comparison's pairs and the verdicts' samples are as before."""
    prepared, db = _campaign(tmp_path, {"quic": {}, "fec": {"level": "1"}}, points=2)
    before, analysed = _snapshot(db), _analyses(db)
    fake.bad_bw = next(iter(prepared.points.values()))["bw"]
    fake.twins = True
    summary = pipeline.twins(prepared, db, 4, Machine(), 1, QUIET, reruns=1)
    assert summary is not None and summary.counts == Counter({"fidelity": 2, "failed": 1, "ok": 1})
    assert summary.retried == 2
    assert _snapshot(db) == before
    assert {r["status"] for r in rows(db, "SELECT status FROM runs")} == {"ok"}
    for was, now in zip(analysed, _analyses(db), strict=True):
        pd.testing.assert_frame_equal(now, was)
    twins = rows(db, "SELECT t.*, r.point, r.label FROM twins t JOIN runs r ON r.key = t.run_key "
                     "ORDER BY r.point, r.label, t.attempt")
    bad = next(p for p, values in prepared.points.items() if values["bw"] == fake.bad_bw)
    flagged = [t for t in twins if t["point"] == bad]
    assert len(flagged) == 4 and all(t["status"] == "fidelity" and t["twin"] == 1 for t in flagged)
    assert [t["attempt"] for t in flagged] == [1, 2, 1, 2]
    assert all("fidelity: re-run 1 of at most 1" in (t["why_again"] or "") for t in flagged if t["attempt"] == 1)
    other = {t["label"]: t for t in twins if t["point"] != bad}
    assert other["quic"]["status"] == "ok" and other["fec"]["status"] == "failed"
    assert "client exited with status 1" in other["fec"]["error"]
    assert selection.twinned(db) == {r.key for r in prepared.runs}   # flagged or failed, each run has its twin
    tried = evidence.attempts(db, results.load(db))
    assert evidence.twin_summary(tried) == {"metric": "dct_ms", "twins": 4, "ok": 1, "re-run": 2}


def test_run_twins_prints_the_spread_only_from_the_minimum_of_ok_twins(tmp_path: Path, fake: Fake,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`fecbench run --twins N`'s end: below MIN_TWINS ok twins, how many more it needs; at MIN_TWINS, the median and
    10th–90th percentiles of twin ÷ run and the share within 5 %, as computed here from the tables."""
    out = io.StringIO()
    monkeypatch.setattr(run_cli, "console", Console(file=out, width=500))
    prepared, db = _campaign(tmp_path, {"quic": {}, "fec": {}}, points=6)
    fake.twins = True
    below = evidence.MIN_TWINS - 1
    run_cli._twins(prepared, db, below, Machine(), 1, reruns=0)
    said = out.getvalue()
    assert f"twins: {below} asked, {below} run again under their keys (ok {below})" in said
    assert f"twins: {below} of the campaign's {below} twin(s) ended ok beside their runs" in said
    assert (f"their spread is printed from {evidence.MIN_TWINS} ok twins on (fewer: one twin would set its "
            f"interval), 1 more needed: fecbench run {prepared.design.path} --db {db} --twins 1 (or more") in said
    assert "median" not in said and "percentile" not in said
    out.seek(0)
    out.truncate()
    run_cli._twins(prepared, db, 1, Machine(), 1, reruns=0)
    said = out.getvalue()
    run_dct = {r["run_key"]: r["dct_ms"] for r in rows(db, "SELECT run_key, dct_ms FROM metrics")}
    ratio = np.array([json.loads(t["metrics_json"])["dct_ms"] / run_dct[t["run_key"]]
                      for t in rows(db, "SELECT run_key, metrics_json FROM twins WHERE status = 'ok'")])
    assert len(ratio) == evidence.MIN_TWINS
    p10, median, p90 = np.quantile(ratio, [0.1, 0.5, 0.9])
    within = np.mean(np.abs(ratio - 1) <= 0.05)
    assert (f"twins: {evidence.MIN_TWINS} of the campaign's {evidence.MIN_TWINS} twin(s) ended ok beside their runs; "
            f"dct_ms, twin ÷ run: median {median:.3f}, 10th–90th percentile {p10:.3f}–{p90:.3f}, {within:.0%} within "
            f"5% of their run (at least {evidence.MIN_TWINS} ok twins needed") in said
    few = {"ok": 3, "twins": 4, "re-run": 1}     # and when the campaign has too few ok runs left to twin
    assert evidence.twin_summary_text(few, "X --twins", 0).endswith(
        f"{evidence.MIN_TWINS - 3} more needed: no ok run of the campaign is left to twin (more repetitions or points "
        "first)")
    assert evidence.twin_summary_text(few, "X --twins", 2).endswith("X --twins 2, the ok runs left to twin, is not "
                                                                    "enough")
    help_text = inspect.signature(run_cli.run).parameters["twins"].default.help
    assert f"at least {evidence.MIN_TWINS} twins ended ok" in help_text and "beside its run" in help_text


def test_the_twins_of_a_database_recorded_before_still_count(tmp_path: Path, fake: Fake) -> None:
    """A database of schema 8, whose twins ran in their runs' place (each first outcome kept in earlier_outcomes,
    why_again naming `TWIN`): its twinned runs are not twinned again, the report reads them as twins, and new twins
    (the database upgraded) are recorded beside their runs and counted with them."""
    prepared, db = _campaign(tmp_path, {"quic": {}, "fec": {}}, points=4)
    old = selection.twins(prepared, db, 3)
    executor = make_executor(prepared, db, Machine(), 1, None, QUIET)   # as fecbench did it before schema 9
    Engine(prepared, db, executor, QUIET, todo=old, asked=selection.TWIN).run({"ok"})
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE twins")
        conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    assert selection.twinned(db) == {r.key for r in old}
    tried = evidence.attempts(db, results.load(db))
    assert tried["twin"].all() and sorted(tried["key"]) == sorted(r.key for r in old)
    fake.twins = True
    summary = pipeline.twins(prepared, db, 8, Machine(), 1, QUIET)
    assert summary is not None and summary.selected == 5
    new = {t["run_key"] for t in rows(db, "SELECT run_key FROM twins")}
    assert len(new) == 5 and not new & {r.key for r in old}
    assert dbmod.schema_version(dbmod.open_readonly(db)) == dbmod.SCHEMA_VERSION
    tried = evidence.attempts(db, results.load(db))
    assert tried["twin"].sum() == 8 and evidence.twin_summary(tried)["twins"] == 8
    assert selection.twins(prepared, db, 3) == []


def test_an_effect_smaller_than_the_twins_spread_is_said_to_be() -> None:
    twins = pd.DataFrame({"label": ["fec", "quic"], "size": 1000, "twins": [5, 5], "spread (90 %)": [0.08, 0.12]})
    ratio = [0.95] * 6
    points = pd.DataFrame({"label": "fec", "size": 1000, "workload": "download", "point": range(6), "seeds": 12,
                           "ratio": ratio, "ratio_low": ratio, "ratio_high": ratio, "state": "exact",
                           "ci_low": np.nan, "ci_high": np.nan})
    pairs = pd.DataFrame({"label": "fec", "size": 1000, "outcome": ["finished"] * 72, "excluded_why": None})
    said = sentences.downloads(points, pairs, "quic", twins)[0]
    assert "twins (the same key run twice, 10) differ by up to 12.0% (90 %): the effect is smaller than that" in said
    big = sentences.downloads(points.assign(ratio=0.7, ratio_low=0.7, ratio_high=0.7), pairs, "quic", twins)[0]
    assert "differ by up to 12.0% (90 %)" in big and "smaller than that" not in big
    assert "twins" not in sentences.downloads(points, pairs, "quic")[0]
