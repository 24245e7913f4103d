"""What a design states is what every run applies: random valid designs (seeded) go through validation
and run preparation, and every value they state — a factor in the unit it is written in, a literal loss
parameter, a size, an implementation argument — must reach the applied settings of every run at its point
(runs.applied_json: links per direction, losses, workload, argv), converted to the unit the network uses.

On main 2b8babd a factor's `unit` was never read (owd = 0.3 s ran at 0.3 ms): the last test here runs the
same property with the unit conversion switched off and checks that it fails, so the property can fail.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from fecbench.host.paths import REPO_ROOT
from fecbench.inputs.errors import UserError
from fecbench.inputs.specs import parse_size
from fecbench.runners.experiment import factor_uses
from fecbench.runners.experiment.applied import Applier
from fecbench.runners.experiment.checks import validate

SINGLE = REPO_ROOT / "topologies" / "single.toml"
MULTIPATH = REPO_ROOT / "topologies" / "multipath.toml"
#: unit -> how many of the network's unit (ms, Mbit/s, probability) one of it is
TIME_UNITS = {"s": 1000.0, "ms": 1.0, "us": 0.001}
RATE_UNITS = {"bit/s": 1e-6, "kbit/s": 1e-3, "Mbit/s": 1.0, "Gbit/s": 1e3}
PROBABILITY_UNITS = {"": 1.0, "%": 0.01}
SIZE_UNITS = {"B": 1, "kB": 1000, "KiB": 1024, "MB": 10**6}


def _number(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 3)


def _factor(rng: random.Random, name: str, unit: str, low: float, high: float) -> tuple[str, dict[str, Any]]:
    """A factor in `unit` over [low, high] (in that unit): fixed, levels or a range; its TOML and its spec."""
    shape = rng.choice(["value", "levels", "range"])
    unit_text = f', unit = "{unit}"' if unit else ""
    if shape == "value":
        value = _number(rng, low, high)
        return f"{name} = {{ value = {value}{unit_text} }}", {"unit": unit, "varies": False}
    if shape == "levels":
        levels = sorted({_number(rng, low, high) for _ in range(rng.randint(1, 3))})
        return f"{name} = {{ levels = {levels}{unit_text} }}", {"unit": unit, "varies": len(levels) > 1}
    a, b = sorted((_number(rng, low, high), _number(rng, low, high)))
    b = b if b > a else a + 1
    scale = rng.choice(["linear", "log"])
    return f"{name} = {{ low = {a}, high = {b}, scale = \"{scale}\"{unit_text} }}", {"unit": unit, "varies": True}


def random_design(rng: random.Random, folder: Path, index: int) -> tuple[Path, dict[str, Any]]:
    """A valid design with random factors, units, loss section, sizes and implementations; what it states."""
    multipath = rng.random() < 0.35
    stated: dict[str, Any] = {"factors": {}, "multipath": multipath}
    lines = []
    per_path = multipath and rng.random() < 0.5
    for name, units, low_ms, high_ms in (("owd", TIME_UNITS, 1.0, 40.0), ("bw", RATE_UNITS, 2.0, 50.0)):
        unit = rng.choice(list(units))
        scale = units[unit]
        text, spec = _factor(rng, name, unit, low_ms / scale, high_ms / scale)
        if per_path:
            text = text[:-2] + ", per_path = true }"
        lines.append(text)
        stated["factors"][name] = {**spec, "to_network": scale}
    if rng.random() < 0.5:
        lines.append(f"queue = {rng.randint(10, 200)}")
        stated["queue_literal"] = True
    model = rng.choice(["uniform", "gilbert-elliott", "none"])
    loss_lines = [f'model = "{model}"']
    stated["loss"] = {"model": model, "literal": {}}
    if model != "none":
        unit = rng.choice(list(PROBABILITY_UNITS))
        scale = PROBABILITY_UNITS[unit]
        text, spec = _factor(rng, "p", unit, 0.001 / scale, 0.08 / scale)
        lines.append(text)
        stated["factors"]["p"] = {**spec, "to_network": scale}
        loss_lines.append('p = "p"')
        if model == "gilbert-elliott":
            r = _number(rng, 0.1, 0.9)
            loss_lines.append(f"r = {r}")
            stated["loss"]["literal"]["r"] = r
    sizes = [f"{rng.randint(1, 40)}{rng.choice(list(SIZE_UNITS))}" for _ in range(rng.randint(1, 2))]
    sizes = list(dict.fromkeys(sizes))
    stated["sizes"] = [parse_size(s, folder, "sizes") for s in sizes]
    if len(set(stated["sizes"])) != len(stated["sizes"]):
        sizes, stated["sizes"] = sizes[:1], stated["sizes"][:1]
    impls = []
    fecs = rng.sample(["none", "rs:30,20", "xor:4", "rlc:3,2,20"], rng.randint(1, 2))
    for i, fec in enumerate(fecs):
        args = f'fec = "{fec}"' + (', multipath = "on"' if multipath else "")
        impls.append(f'[[impl]]\nname = "fecq"\nlabel = "l{i}"\nargs = {{ {args} }}\n')
    stated["impl_args"] = {f"l{i}": fec for i, fec in enumerate(fecs)}
    topology = MULTIPATH if multipath else SINGLE
    varies = any(spec["varies"] for spec in stated["factors"].values())
    points = f"points = {rng.randint(2, 4)}\n" if varies else ""   # all fixed: one point, no count to give
    text = (f'[design]\nname = "prop{index}"\ntopology = "{topology}"\nseed = {rng.randint(0, 10**6)}\n'
            f"repetitions = {rng.randint(1, 2)}\ntimeout_s = 600\n\n"
            f'[space]\nmethod = "{rng.choice(["wsp", "lhs", "sobol"])}"\n{points}'
            "[space.factors]\n" + "\n".join(lines) + "\n\n[loss]\n" + "\n".join(loss_lines) + "\n\n"
            f'[workload]\nkind = "download"\nsizes = {sizes}\n\n' + "\n".join(impls))
    path = folder / f"prop{index}.toml"
    path.write_text(text)
    return path, stated


def _links_of(name: str, path: int | None, multipath: bool) -> list[str]:
    """The topology's links reading factor `name` (of path `path` for a per-path value)."""
    if not multipath:
        return ["bottleneck"]
    return [f"path{path}"] if path is not None else ["path1", "path2"]


def check_property(path: Path, stated: dict[str, Any]) -> int:
    """Every stated value reaches every run's applied settings; returns the runs checked."""
    prepared = validate(path, dry_run=True)
    planned = prepared.plan.points          # the planner's values, in the units the design wrote
    applier = Applier(prepared)
    checked = 0
    for run in prepared.runs:
        applied = applier.applied(run)
        row = planned.loc[run.point]
        for column in planned.columns:
            base, _, suffix = str(column).partition("_")
            if base == "queue":
                continue           # a literal number of packets: checked below
            spec = stated["factors"][base]
            expected = float(row[column]) * spec["to_network"]
            where = int(suffix) if suffix else None
            if base in ("owd", "bw"):
                key = "owd_ms" if base == "owd" else "rate_mbit"
                for link in _links_of(base, where, stated["multipath"]):
                    for direction in ("forward", "reverse"):
                        got = applied["links"][link][direction][key]
                        assert got == pytest.approx(expected, rel=1e-6), (path.name, run.point, link, base, got,
                                                                         expected, spec["unit"])
            elif base == "p":
                for link, model in applied["loss"]["links"].items():
                    assert model["params"]["p"] == pytest.approx(expected, rel=1e-6), (path.name, link, model)
        for link, model in applied["loss"]["links"].items():
            for name, value in stated["loss"]["literal"].items():
                assert model["params"][name] == pytest.approx(value), (path.name, link, name)
        if stated.get("queue_literal"):
            written = int(path.read_text().split("queue = ")[1].split("\n")[0])
            for pair in applied["links"].values():
                assert all((d["queue"], d["queue_unit"]) == (written, "packets") for d in pair.values())
        assert applied["loss"]["model"] == stated["loss"]["model"]
        assert applied["workload"]["size"] in stated["sizes"]
        argv = " ".join(applied["impl"]["argv"]["client"])
        assert f"--fec {stated['impl_args'][run.label]}" in argv and f"--size {run.size}" in argv
        checked += 1
    assert {r.size for r in prepared.runs} == set(stated["sizes"])
    return checked


def test_every_stated_value_reaches_every_run(tmp_path: Path) -> None:
    rng = random.Random(33)
    checked = 0
    for index in range(40):
        path, stated = random_design(rng, tmp_path, index)
        checked += check_property(path, stated)
    assert checked > 200


def test_the_property_fails_when_units_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """main 2b8babd's behaviour (a factor's unit never read) breaks the property: the test can fail."""
    def ignore_units(*args: Any) -> dict[str, float]:
        return {}

    monkeypatch.setattr(factor_uses, "check_and_scale", ignore_units)
    rng = random.Random(33)
    failures = 0
    for index in range(40):
        path, stated = random_design(rng, tmp_path, index)
        try:
            check_property(path, stated)
        except (AssertionError, UserError):   # a value applied in the wrong unit, or refused in it
            failures += 1
    assert failures > 0
