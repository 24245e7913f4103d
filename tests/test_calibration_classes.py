"""`fecbench reproduce --jobs auto` calibrates each workload class on its own (issue 67 item 1): a pack whose
designs differ in workload class runs each class on the networks its own calibration chose, the first class's
choice planning the batches; --jobs N and a cluster calibrate nothing. The calibration itself is stood in for
(`calibrations.for_campaign`: tests/test_calibrations.py measures it)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fecbench.runners.executors import Machine, calibrations
from fecbench.runners.experiment.prepare import prepare
from fecbench.verdicts import execute
from tests.helpers.campaign import fake_design


def _campaign(tmp_path: Path, name: str, labels: dict[str, dict[str, str]]) -> Any:
    prepared = prepare(fake_design(tmp_path / f"{name}.toml", labels, points=4, name=name))
    return SimpleNamespace(prepared=prepared, statuses={}), SimpleNamespace(db=tmp_path / f"{name}.sqlite")


def test_each_workload_class_is_calibrated_once_and_runs_on_its_own_choice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = {"one": 6, "two": 2}
    calls: list[str] = []

    def for_campaign(prepared: Any, db: Path, backend: Any, console: Any, **kw: Any) -> dict[str, Any]:
        calls.append(prepared.design.name)
        return {"chosen": chosen[prepared.design.name], "rows": []}

    monkeypatch.setattr(calibrations, "for_campaign", for_campaign)
    # Another implementation label set: another workload class (`calibrations.workload_class`).
    first, first_target = _campaign(tmp_path, "one", {"quic": {}, "fec": {}})
    again, again_target = _campaign(tmp_path, "again", {"quic": {}, "fec": {}})
    second, second_target = _campaign(tmp_path, "two", {"quic": {}})
    monkeypatch.setattr(calibrations, "workload_class",
                        lambda prepared, backend: {"impls": len(prepared.design.impls)})
    machine = Machine(jobs=None)
    runs = list(first.prepared.runs)
    assert execute.settle(machine, first, first_target, runs, None) is True
    assert machine.jobs == 6 and execute.networks(machine, first) == 6
    assert execute.settle(machine, again, again_target, list(again.prepared.runs), None) is False   # same class
    assert execute.networks(machine, again) == 6
    assert execute.settle(machine, second, second_target, list(second.prepared.runs), None) is True
    assert execute.networks(machine, second) == 2 and execute.networks(machine) == 6   # the first plans batches
    assert calls == ["one", "two"] and len(machine.by_class) == 2
    fixed = Machine(jobs=3)
    assert execute.settle(fixed, first, first_target, runs, None) is False and execute.networks(fixed, second) == 3
    assert calls == ["one", "two"]
