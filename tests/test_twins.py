"""Twins (issue 62 item 8): runs run again under their own key at a campaign's end (`fecbench run --twins N`),
each first outcome kept with its metrics; the report gives their spread beside every effect."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from fecbench.analysis import results
from fecbench.analysis.report import evidence, sentences
from fecbench.host import cleanup
from fecbench.runners.commands.pipeline import choose_runs
from fecbench.runners.executors import selection
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.serial import SerialExecutor
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fake_design, rows
from tests.helpers.fake_testbed import FakeTestbed


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


def _engine(prepared, db: Path, todo, **kw) -> Engine:
    executor = SerialExecutor(prepared, db, link_backend=None,
                              testbed_factory=lambda topology, values, backend: FakeTestbed(topology, values, backend))
    return Engine(prepared, db, executor, Console(quiet=True), todo=todo, **kw)


def test_twins_run_again_under_their_keys_and_the_report_measures_their_spread(tmp_path: Path) -> None:
    """Real runs of the fake implementation (no root): 8 runs, then 3 twins, then 3 more, never the same twice."""
    prepared = prepare(fake_design(tmp_path / "camp.toml", {"quic": {}, "fec": {}}, points=4))
    db = tmp_path / "camp.sqlite"
    _engine(prepared, db, choose_runs(prepared, db, set())).run(set())
    first = selection.twins(prepared, db, 3)
    assert len(first) == 3 and [r.key for r in first] == [r.key for r in selection.twins(prepared, db, 3)]  # seeded
    summary = _engine(prepared, db, first, asked=selection.TWIN).run({"ok"})
    assert summary.selected == 3
    kept = rows(db, "SELECT run_key, status, why_again FROM earlier_outcomes")
    assert sorted(r["run_key"] for r in kept) == sorted(r.key for r in first)
    assert all(r["status"] == "ok" and selection.TWIN in r["why_again"] for r in kept)
    assert selection.twinned(db) == {r.key for r in first}
    second = selection.twins(prepared, db, 3)
    assert len(second) == 3 and not {r.key for r in second} & {r.key for r in first}   # none twinned twice
    tried = evidence.attempts(db, results.load(db))
    assert tried["twin"].all() and len(tried) == 3
    spreads = evidence.twin_spreads(tried)
    assert spreads["twins"].sum() == 3 and (spreads["spread (90 %)"] >= 0).all()
    tables: dict[str, pd.DataFrame] = {}
    notes: dict[str, str] = {}
    evidence.attempts_section(tables, notes, db, results.load(db))
    assert "twins: how far a run repeats itself" in tables


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
