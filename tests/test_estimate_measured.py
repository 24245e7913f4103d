"""Estimates learn from the campaign's own runs (issue 62 item 5): once some are done, a run's estimate is what its
point's runs of the same label and size measured (else the model times their label and size's measured ÷ modelled),
not the model at the time limit; the dry run's table and its total say so."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from fecbench.host import cleanup
from fecbench.runners.experiment.estimate import estimate_campaign
from fecbench.runners.experiment.prepare import prepare
from fecbench.runners.run.recorder import Recorder
from tests.helpers.campaign import fake_design, fecbench


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    monkeypatch.setenv("FECBENCH_HISTORY", str(tmp_path / "history.txt"))


def test_the_campaigns_own_durations_replace_the_model(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "camp.toml", {"a": {}}, points=2, sizes='["1MB"]', timeout_s=60)
    design.write_text(design.read_text().replace("repetitions = 1", "repetitions = 4"))
    db = tmp_path / "camp.sqlite"
    prepared = prepare(design, require_built=False)
    Recorder.open(db, prepared, "netem", {}, {}).close()
    first, second = sorted({run.point for run in prepared.runs})
    done = [run for run in prepared.runs if run.point == first and run.repetition < 3]
    done += [run for run in prepared.runs if run.point == second and run.repetition == 0]
    measured = {run.key: (2.0 + run.repetition) * (1 if run.point == first else 5) for run in done}
    with sqlite3.connect(db) as conn:
        conn.executemany("UPDATE runs SET status = 'ok', duration_s = ? WHERE key = ?",
                         [(seconds, key) for key, seconds in measured.items()])
    todo = [run for run in prepared.runs if run.key not in measured]
    estimate = estimate_campaign(prepared, todo, 1, db)
    by_point = {run.point: estimate.per_run[run.key] for run in todo}
    assert by_point[first] == 3.0              # the median of its point's three measured runs
    assert by_point[second] == 10.0            # its point's one measured run
    assert estimate.own_runs == 4 and "from the 4 run(s) of this campaign already measured" in estimate.text()
    assert estimate.serial_s == pytest.approx(3.0 + 3 * 10.0)
    # A point none of whose runs is done: the model times the label and size's measured ÷ modelled.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET status = 'pending', duration_s = NULL WHERE point = ?", (second,))
    ratio = sorted(measured[r.key] / prepared.estimate(r) for r in done if r.point == first)[1]
    again = estimate_campaign(prepared, [r for r in prepared.runs if r.point == second], 1, db)
    model = prepared.estimate(todo[-1])
    assert list(again.per_run.values()) == [pytest.approx(model * ratio)] * 4 and ratio != 1
    out = fecbench("run", str(design), "--db", str(db), "--dry-run", columns=250)
    assert out.returncode == 0, out.stderr
    assert "from the 3 run(s) of this campaign already measured" in " ".join(out.stdout.split())
    shown = re.findall(r"│\s+(\d+\.\d)\s+│\s+(?:pending|new)", out.stdout)
    assert shown and {float(s) for s in shown} != {round(prepared.estimate(todo[-1]), 1)}, out.stdout
