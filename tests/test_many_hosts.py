"""Many hosts without the hosts (issue 52), no root: a run lost with its worker is recorded, kept aside and
run once more within the same campaign (the contract `DaskExecutor` keeps with the engine: `Finished.again`),
once only; `fecbench compare` tells two databases' keys, loss seeds and dropper verdicts apart; the
projection of a campaign onto H hosts. The hosts themselves: tests/cluster/ (`make test-cluster`)."""

from __future__ import annotations

import io
import json
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fecbench.cli.compare import compare
from fecbench.host import cleanup
from fecbench.records import db as dbmod
from fecbench.records.status import Status
from fecbench.runners.executors.engine import Engine, Finished, Started
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.executors.selection import RunQueue
from fecbench.runners.experiment.prepare import prepare
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.outcome import Outcome
from tests.helpers.campaign import fake_design, fecbench, rows


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


class LosingExecutor:
    """Two 'workers'; the runs whose keys are in `lose` are lost with their worker every time they run, and
    handed back as DaskExecutor does: the first time with `again` (it runs them once more itself), then not."""

    name = "two workers that lose runs"

    def __init__(self, lose: set[str]) -> None:
        self.lose, self.lost_once, self.redo = lose, set(), deque()
        self.inflight: list[tuple[Run, str]] = []
        self.hosts_seen: list[tuple[str, str]] = []

    def __enter__(self) -> LosingExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self, todo: list[Run]) -> None:
        pass

    def backend(self) -> str:
        return "fake"

    def host_info(self) -> dict[str, Any]:
        return {"hosts": {"w1": {}, "w2": {}}}

    def host_info_changed(self) -> bool:
        return False

    def busy(self) -> bool:
        return bool(self.inflight or self.redo)

    def dispatch(self, queue: RunQueue) -> list[Started]:
        started = []
        for worker in ("w1", "w2"):
            if any(w == worker for _, w in self.inflight) or not (queue or self.redo):
                continue
            run = self.redo.popleft() if self.redo else queue.pop_next()
            self.inflight.append((run, worker))
            self.hosts_seen.append((run.key, worker))
            started.append(Started(run, worker, "fake"))
        return started

    def collect(self, timeout: float) -> list[Finished]:
        done = []
        for run, worker in self.inflight:
            if run.key not in self.lose:
                done.append(Finished(run, Outcome(status=Status.OK, metrics={"dct_ms": 1.0}), duration_s=0.01))
                continue
            why = f"worker {worker} died during the run"
            if run.key in self.lost_once:
                done.append(Finished(run, Outcome(status=Status.INTERRUPTED, error=why)))
            else:
                self.lost_once.add(run.key)
                self.redo.append(run)
                done.append(Finished(run, Outcome(status=Status.INTERRUPTED, error=why),
                                     again=f"interrupted: {why}; run once more"))
        self.inflight = []
        return done

    def cancel(self, reason: str) -> list[Finished]:
        return []

    def abort_reason(self) -> str | None:
        return None


def _campaign(tmp_path: Path) -> tuple[Any, Path]:
    design = fake_design(tmp_path / "camp.toml", {"a": {}, "b": {}}, points=3)
    return prepare(design), tmp_path / "camp.sqlite"


def test_a_run_lost_with_its_worker_runs_once_more_in_the_same_campaign(tmp_path: Path) -> None:
    prepared, db = _campaign(tmp_path)
    lost = prepared.runs[1]
    executor = LosingExecutor(set())
    executor.lose = {lost.key}

    class LoseOnce(LosingExecutor):
        def collect(self, timeout: float) -> list[Finished]:
            done = super().collect(timeout)
            self.lose.discard(lost.key)          # the second time it runs, its worker survives
            return done

    executor = LoseOnce({lost.key})
    summary = Engine(prepared, db, executor, SilentReporter()).run(set())
    runs = {r["key"]: r for r in rows(db, "SELECT key, status, attempts, error FROM runs")}
    assert len(runs) == len(prepared.runs) and all(r["status"] == "ok" for r in runs.values())
    assert runs[lost.key]["attempts"] == 2 and sorted(r["attempts"] for r in runs.values()).count(1) == len(runs) - 1
    earlier = rows(db, "SELECT * FROM earlier_outcomes")
    assert [(e["run_key"], e["status"], e["attempt"]) for e in earlier] == [(lost.key, "interrupted", 1)]
    assert "died during the run" in earlier[0]["error"] and "run once more" in earlier[0]["why_again"]
    # Counted once, as what it finally was; the campaign completed without a second command.
    assert summary.counts == {"ok": len(prepared.runs)} and not summary.interrupted
    assert [k for k, _ in executor.hosts_seen].count(lost.key) == 2


def test_a_run_lost_twice_stays_interrupted(tmp_path: Path) -> None:
    prepared, db = _campaign(tmp_path)
    lost = prepared.runs[0]
    summary = Engine(prepared, db, LosingExecutor({lost.key}), SilentReporter()).run(set())
    runs = {r["key"]: r for r in rows(db, "SELECT key, status, attempts FROM runs")}
    assert runs[lost.key]["status"] == "interrupted" and runs[lost.key]["attempts"] == 2
    assert all(r["status"] == "ok" for k, r in runs.items() if k != lost.key)
    assert len(rows(db, "SELECT * FROM earlier_outcomes")) == 1
    assert summary.counts == {"ok": len(prepared.runs) - 1, "interrupted": 1} and summary.interrupted


# --- fecbench compare -------------------------------------------------------------------------------

def _log(verdicts: list[int]) -> bytes:
    array = np.zeros(len(verdicts), dtype=[("len", "<u2"), ("verdict", "u1")])
    array["len"], array["verdict"] = 1200, verdicts
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def _db(path: Path, runs: dict[str, tuple[int, str, str]], logs: dict[str, list[int]]) -> Path:
    conn = dbmod.connect(path)   # the schema, empty
    conn.executemany("INSERT INTO runs (key, loss_seed, status, host) VALUES (?, ?, ?, ?)",
                     [(k, *v) for k, v in runs.items()])
    conn.executemany("INSERT INTO verdict_logs VALUES (?, 'bottleneck', 'forward', ?)",
                     [(k, _log(v)) for k, v in logs.items()])
    conn.commit()
    conn.close()
    return path


def test_compare_by_key(tmp_path: Path) -> None:
    local = _db(tmp_path / "a.sqlite", {"k1": (11, "ok", "one"), "k2": (12, "ok", "one")},
                {"k1": [0, 1, 0, 0], "k2": [1, 0]})
    # Other hosts, a run flagged there, more packets seen: the same runs on the same losses.
    hosts = _db(tmp_path / "b.sqlite", {"k1": (11, "ok", "lab2"), "k2": (12, "fidelity", "lab3")},
                {"k1": [0, 1, 0, 0, 1, 0], "k2": [1]})
    same = compare(local, hosts)
    assert same.same and same.logged == 2 and same.status_pairs == {"ok → fidelity": 1}
    assert same.hosts[1] == {"lab2": 1, "lab3": 1}
    out = fecbench("compare", str(local), str(hosts))
    assert out.returncode == 0 and "the same runs on the same losses" in out.stdout, out.stdout + out.stderr
    # A seed, a verdict and a key that differ: each named, exit status 1.
    other = _db(tmp_path / "c.sqlite", {"k1": (11, "ok", "lab2"), "k2": (99, "ok", "lab3"), "k3": (13, "ok", "x")},
                {"k1": [0, 0, 0, 0], "k2": [1, 0]})
    diff = compare(local, other)
    assert diff.seeds_differ == ["k2"] and diff.verdicts_differ == ["k1"] and diff.only_b == ["k3"]
    assert not diff.same
    out = fecbench("compare", str(local), str(other), "--json")
    assert out.returncode == 1 and json.loads(out.stdout)["seeds_differ"] == ["k2"]
    assert fecbench("compare", str(local), str(tmp_path / "none.sqlite")).returncode == 2


def test_a_design_only_the_coordinator_has_is_written_on_the_worker(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A reproduction writes its profile designs under results/ on the coordinator: a worker host without them
    writes the coordinator's text at the same path in its checkout (found by a three-host run, issue 52)."""
    from fecbench.runners.executors import dask_worker

    monkeypatch.setattr(dask_worker, "REPO_ROOT", tmp_path)
    relative = "results/reproduce/smoke/defaults/reproduce-smoke.toml"
    with pytest.raises(dask_worker.WorkerRefused, match="same path on every host"):
        dask_worker._find_design(f"/elsewhere/{relative}", relative)
    found = dask_worker._find_design(f"/elsewhere/{relative}", relative, "[design]\nname = 'x'\n")
    assert found == tmp_path / relative and found.read_text() == "[design]\nname = 'x'\n"
    # A file already there is used as it is (the identity check compares its hash with the coordinator's).
    found.write_text("other")
    assert dask_worker._find_design(f"/elsewhere/{relative}", relative, "mine").read_text() == "other"
