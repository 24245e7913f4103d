"""A campaign extended (issue 62, item 4): a design given more repetitions keeps the keys of the runs its
database holds and runs only the new repetitions; a design whose repetitions did not change keeps its own keys;
the new runs' keys are those `fecbench reproduce` gives the design's seed stream continued."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from fecbench.host import cleanup
from fecbench.host.paths import REPO_ROOT
from fecbench.records.status import Status
from fecbench.runners.commands.pipeline import choose_runs
from fecbench.runners.executors.dask_worker import identity
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.executors.selection import continue_recorded
from fecbench.runners.executors.serial import SerialExecutor
from fecbench.runners.experiment.prepare import prepare
from fecbench.runners.experiment.runs import loss_seed
from fecbench.runners.run.recorder import Recorder, read_statuses
from fecbench.verdicts.campaign import Campaign as ReproduceCampaign
from fecbench.verdicts.seeds import extension_run
from tests.helpers.campaign import fake_design, fecbench, rows
from tests.helpers.fake_testbed import FakeTestbed


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


def _with_repetitions(source: Path, target: Path, repetitions: int) -> Path:
    text = re.sub(r"(?m)^repetitions = \d+$", f"repetitions = {repetitions}", source.read_text())
    target.write_text(text)
    return target


def _recorded_as_done(design: Path, db: Path) -> set[str]:
    """The design's runs recorded in `db` as if a campaign had run them all (ok), without running them."""
    prepared = prepare(design, require_built=False)
    Recorder.open(db, prepared, "netem", {}, {}).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET status = ?, attempts = 1", (Status.OK,))
    conn.commit()
    conn.close()
    return {run.key for run in prepared.runs}


def test_the_smoke_design_with_one_more_repetition_has_16_runs_to_do_on_its_database(tmp_path: Path) -> None:
    smoke = _with_repetitions(REPO_ROOT / "designs" / "smoke.toml", tmp_path / "smoke.toml", 1)
    db = tmp_path / "smoke.sqlite"
    done = _recorded_as_done(smoke, db)
    assert len(done) == 16
    _with_repetitions(smoke, smoke, 2)
    out = fecbench("run", str(smoke), "--db", str(db), "--dry-run", columns=250)
    assert out.returncode == 0, out.stderr
    assert "smoke: 16 of 32 run(s) to do" in out.stdout, out.stdout
    assert "keep the keys of its first design (repetitions = 1)" in out.stdout
    # the runs to do are repetition 1 of every point, label and size; those done keep their keys
    prepared = prepare(smoke, require_built=False)
    continue_recorded(prepared, db)
    keys = {run.key for run in prepared.runs}
    assert done <= keys and len(keys) == 32
    assert {run.repetition for run in prepared.runs if run.key not in done} == {1}
    assert set(read_statuses(db)) == done


def test_a_design_whose_repetitions_did_not_change_keeps_its_own_keys(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "camp.toml", {"ok": {}})
    db = tmp_path / "camp.sqlite"
    _recorded_as_done(design, db)
    prepared = prepare(design, require_built=False)
    own = [run.key for run in prepared.runs]
    assert continue_recorded(prepared, db) is None and [run.key for run in prepared.runs] == own
    # another change to the experiment (the seed) still makes every run new: nothing found, nothing rekeyed
    design.write_text(design.read_text().replace("seed = 3", "seed = 4").replace("repetitions = 1",
                                                                                 "repetitions = 2"))
    other = prepare(design, require_built=False)
    mine = [run.key for run in other.runs]
    assert continue_recorded(other, db) is None and [run.key for run in other.runs] == mine
    assert other.repetitions_as is None


def test_fewer_repetitions_find_the_runs_of_the_first_ones(tmp_path: Path) -> None:
    design = _with_repetitions(fake_design(tmp_path / "camp.toml", {"ok": {}}), tmp_path / "camp.toml", 3)
    db = tmp_path / "camp.sqlite"
    done = _recorded_as_done(design, db)
    _with_repetitions(design, design, 2)
    prepared = prepare(design, require_built=False)
    assert continue_recorded(prepared, db) == 3
    assert {run.key for run in prepared.runs} < done


def test_extending_a_campaign_runs_only_the_new_repetitions_with_reproduces_keys(tmp_path: Path) -> None:
    """Real runs of the fake implementation (no root): one repetition, then two on the same database."""
    design = fake_design(tmp_path / "camp.toml", {"ok": {}, "fec": {}}, points=2)
    db = tmp_path / "camp.sqlite"

    def run(path: Path) -> tuple[Any, Any]:
        prepared = prepare(path)
        todo = choose_runs(prepared, db, set())
        executor = SerialExecutor(prepared, db, link_backend=None,
                                  testbed_factory=lambda topology, values, backend: FakeTestbed(topology, values,
                                                                                               backend))
        return prepared, Engine(prepared, db, executor, SilentReporter(), todo=todo).run(set())

    first_prepared, summary = run(design)
    assert summary.selected == 4
    first = {r["key"]: r for r in rows(db, "SELECT * FROM runs")}
    assert {r["status"] for r in first.values()} == {"ok"}
    # what `fecbench reproduce` would add as the design's seed stream continued, before the design changes
    reproduce = ReproduceCampaign("default", "camp", db, first_prepared, read_statuses(db))
    continued = {extension_run(reproduce, run.point, 1, run.size, run.label).key for run in first_prepared.runs}

    _with_repetitions(design, design, 2)
    prepared, summary = run(design)
    assert summary.selected == 4 and prepared.repetitions_as == 1
    after = {r["key"]: r for r in rows(db, "SELECT * FROM runs")}
    assert len(after) == 8 and {r["status"] for r in after.values()} == {"ok"}
    for key, row in first.items():   # the runs done before: same keys, not run again
        assert after[key] == row
    new = {key: row for key, row in after.items() if key not in first}
    assert {row["repetition"] for row in new.values()} == {1}
    assert set(new) == continued
    assert all(row["loss_seed"] == loss_seed(3, row["point"], 1) for row in new.values())
    # a Dask worker preparing the design keys its runs as the coordinator does
    worker = prepare(design)
    assert identity(worker, {})["experiment_hash"] != identity(prepared, {})["experiment_hash"]
    worker.rekey(identity(prepared, {})["repetitions_as"])
    assert identity(worker, {}) == identity(prepared, {})
    assert [run.key for run in worker.runs] == [run.key for run in prepared.runs]
