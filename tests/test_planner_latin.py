"""Planner: constants however written, the wsp-lhs method, projection metrics and warnings (issue 50)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import qmc

from fecbench.planner import make_plan
from fecbench.planner.bench import method_goals, unit_cube
from fecbench.planner.metrics import quality
from fecbench.planner.projections import maxpro
from fecbench.planner.wsp import min_distance
from tests.test_planner_methods import MULTIPATH, mixed
from tests.test_planner_space import space_of

ROOT = Path(__file__).resolve().parent.parent

# The design: one varying factor (owd), the others constants, written each way a constant can be.
ONE_VARYING = """
[space]
method = "{method}"
points = 8
[space.factors]
owd = {{ low = 0.01, high = 0.3, unit = "s" }}
bw  = {bw}
p   = {p}
fec = {fec}
"""
CONSTANTS = {
    "value": ('{ value = 10.0, unit = "Mbit/s" }', "{ value = 0.01 }", '"rs:30,20"'),
    "one level": ('{ levels = [10.0], unit = "Mbit/s" }', "{ levels = [0.01] }", '{ levels = ["rs:30,20"] }'),
    "low == high": ('{ low = 10.0, high = 10.0, unit = "Mbit/s" }', "{ low = 0.01, high = 0.01 }",
                    '{ type = "choice", levels = ["rs:30,20"] }'),
    "int one level": ('{ type = "int", levels = [10], unit = "Mbit/s" }', '{ levels = [0.01], scale = "log" }',
                      '{ type = "fixed", value = "rs:30,20" }'),
}


@pytest.mark.parametrize("method", ["wsp", "lhs", "sobol", "wsp-lhs"])
def test_a_constant_is_the_same_however_it_is_written(method):
    """One level, low == high or `value`: no dimension, and the varying factor's points are identical.
    (Before: a one-level factor was a dimension of WSP's space, owd 10-14 ms then 290-299 ms; low == high
    was refused.)"""
    plans = {}
    for how, (bw, p, fec) in CONSTANTS.items():
        space = space_of(ONE_VARYING.format(method=method, bw=bw, p=p, fec=fec))
        assert [f.name for f in space.varying] == ["owd"] and space.embed(np.zeros((1, 1))).shape == (1, 1), how
        plans[how] = make_plan(space, seed=3)
    reference = plans["value"].points
    for how, plan in plans.items():
        frame = plan.points
        assert frame["owd"].tolist() == reference["owd"].tolist(), how
        assert (frame["bw"] == 10).all() and (frame["p"] == 0.01).all() and (frame["fec"] == "rs:30,20").all(), how
        assert list(plan.manifest["metrics"]["coverage"]) == ["owd"], how
    owd = np.sort(reference["owd"].to_numpy())
    assert np.diff(owd).max() < 0.29 / 4, owd   # spread over the range: no 14 -> 290 ms hole


def test_a_design_of_constants_is_one_point_and_equal_bounds_with_levels_are_refused():
    text = "[space]\n[space.factors]\nbw = { low = 5, high = 5 }\np = { levels = [0.01] }\nfec = { levels = ['rs'] }\n"
    plan = make_plan(space_of(text), seed=1)
    assert plan.points.to_dict("list") == {"bw": [5.0], "p": [0.01], "fec": ["rs"]}
    from fecbench.inputs.errors import SpecError

    with pytest.raises(SpecError) as info:
        make_plan(space_of("[space]\npoints = 3\n[space.factors]\nbw = { low = 5, high = 5, levels = 3 }\n"), 1)
    assert info.value.key == "space.factors.bw.levels" and "do not fit" in str(info.value)


def test_a_design_naming_no_method_gets_wsp_lhs_and_one_naming_wsp_keeps_it():
    assert space_of("[space]\npoints = 4\n[space.factors]\nx = { low = 0, high = 1 }\n").method == "wsp-lhs"
    assert space_of("[space]\nmethod = \"wsp\"\npoints = 4\n[space.factors]\nx = { low = 0, high = 1 }\n").method \
        == "wsp"


def _latin(unit: np.ndarray) -> bool:
    """Every column holds exactly one point in each of n equal strata."""
    n = len(unit)
    strata = np.minimum((unit * n).astype(int), n - 1)
    return all(sorted(strata[:, j].tolist()) == list(range(n)) for j in range(unit.shape[1]))


def test_wsp_lhs_is_a_latin_hypercube_nearly_as_spread_as_wsp():
    space = unit_cube(3, 40)
    ours = make_plan(space, seed=4, method="wsp-lhs")
    unit = space.unit({name: ours.points[name].to_numpy() for name in ours.points.columns})
    assert _latin(unit)
    wsp = make_plan(space, seed=4, method="wsp").manifest["metrics"]
    lhs = make_plan(space, seed=4, method="lhs").manifest["metrics"]
    metrics = ours.manifest["metrics"]
    assert metrics["maximin"] >= 0.85 * wsp["maximin"]
    assert metrics["maximin"] > 1.5 * lhs["maximin"]
    assert metrics["projections"]["worst_gap"] <= 2 / 40 + 1e-6 < wsp["projections"]["worst_gap"]
    assert ours.manifest["exchanges"] > 0 and ours.manifest["relaxed"] == 0
    assert make_plan(space, seed=4, method="wsp-lhs").csv_text() == ours.csv_text()
    assert make_plan(space, seed=5, method="wsp-lhs").csv_text() != ours.csv_text()


@pytest.mark.parametrize("points, dims", [(4, 1), (5, 2), (8, 3), (16, 2), (12, 4)])
def test_wsp_lhs_is_never_behind_lhs_on_small_designs(points, dims):
    space = unit_cube(dims, points)
    ours = make_plan(space, seed=2, method="wsp-lhs").manifest["metrics"]["maximin"]
    assert ours >= make_plan(space, seed=2, method="lhs").manifest["metrics"]["maximin"]


def test_wsp_lhs_with_choice_int_fixed_factors_and_constraints():
    constraints = '["owd <= 100 * bw", "fec != \'xor:4\' or n >= 4"]'
    plan = make_plan(mixed("wsp-lhs", 24, constraints), seed=5)
    frame = plan.points
    assert len(frame) == 24 and (frame["queue"] == 50).all()
    assert (frame["owd"] <= 100 * frame["bw"]).all() and ((frame["fec"] != "xor:4") | (frame["n"] >= 4)).all()
    assert set(frame["fec"]) == {"rs:30,20", "rlc:3,2,20", "xor:4"} and set(frame["n"]) == set(range(1, 9))
    free = make_plan(mixed("wsp-lhs", 30), seed=11).points
    assert free["fec"].value_counts().max() - free["fec"].value_counts().min() <= 1   # balanced levels


def test_wsp_lhs_mirror_is_latin_over_the_copies_too():
    space = space_of(MULTIPATH.format(method="wsp-lhs").replace('constraints = ["owd_1 <= 2 * owd_2"]\n', ""),
                     paths=2)
    plan = make_plan(space, seed=2)
    frame = plan.points
    first, copy = frame.iloc[0::2].reset_index(drop=True), frame.iloc[1::2].reset_index(drop=True)
    assert np.allclose(first["bw_1"], copy["bw_2"]) and np.allclose(first["owd_2"], copy["owd_1"])
    unit = space.unit({name: frame[name].to_numpy() for name in frame.columns})
    assert _latin(unit[:, :4])   # bw_1, bw_2, owd_1, owd_2: each of the 24 strata once, copies included


def test_projection_metrics_on_a_known_design():
    space = space_of("[space]\npoints = 3\n[space.factors]\nx = { low = 0, high = 1 }\ny = { low = 0, high = 1 }\n")
    unit = np.array([[0.1, 0.2], [0.5, 0.9], [0.8, 0.4]])
    p = quality(space, unit)["projections"]
    assert p["worst_gap"] == pytest.approx(0.5) and p["worst_gap_factor"] == "y"      # 0.4 .. 0.9
    assert p["worst_2d_maximin"] == pytest.approx(min_distance(unit)) and p["worst_2d_pair"] == ["x", "y"]
    terms = [1 / ((a[0] - b[0]) ** 2 * (a[1] - b[1]) ** 2) for a, b in combinations(unit, 2)]
    assert p["maxpro"] == pytest.approx(math.sqrt(sum(terms) / 3), rel=1e-5)
    assert maxpro(np.array([[0.1, 0.2], [0.1, 0.9]])) is None       # a shared value: infinite


def test_plan_warns_naming_the_factor_wsp_leaves_a_gap_in():
    wsp = make_plan(unit_cube(3, 130), seed=1, method="wsp").manifest["metrics"]
    assert wsp["warnings"] and all("Latin hypercube of 130 points leaves at most 1.5%" in w for w in wsp["warnings"])
    assert {w.split(":")[0] for w in wsp["warnings"]} <= {"factor x1", "factor x2", "factor x3"}
    assert make_plan(unit_cube(3, 130), seed=1, method="wsp-lhs").manifest["metrics"]["warnings"] == []
    few = make_plan(unit_cube(2, 8), seed=1, method="lhs")
    assert few.manifest["metrics"]["warnings"] == []


def test_in_units_converts_numbers_and_rehashes():
    plan = make_plan(space_of(ONE_VARYING.format(method="lhs", bw=CONSTANTS["value"][0], p="{ value = 2 }",
                                                 fec='{ levels = [1, 2] }')), seed=1)
    moved = plan.in_units({"owd": 1000.0, "p": 0.5}, {"owd": "ms", "bw": "Mbit/s", "p": "", "fec": ""})
    assert moved.points["owd"].tolist() == [float(f"{v * 1000:.9g}") for v in plan.points["owd"]]
    assert moved.points["p"].tolist() == [1] * 8 and moved.points["p"].dtype.kind == "i"
    assert moved.manifest["units"]["owd"] == "ms" and moved.manifest["converted"]["owd"]["from"] == "s"
    assert moved.manifest["points_sha256"] != plan.manifest["points_sha256"]
    assert plan.points["owd"].max() <= 0.3    # the original is untouched


def test_the_goals_compare_each_case_with_its_own_run():
    row = {"maximin": 0.2, "worst_gap": 0.015, "cd2": 0.0002}
    table = {"d3_n130": {"wsp": {**row, "maximin": 0.21}, "lhs": {**row, "maximin": 0.05, "cd2": 0.0001},
                         "wsp-lhs": row}}
    small = [{"wsp-lhs": 0.5, "lhs": 0.4}]
    assert all(method_goals(table, small).values())
    table["d3_n130"]["wsp-lhs"] = {**row, "maximin": 0.18}
    small.append({"wsp-lhs": 0.3, "lhs": 0.4})
    missed = [goal for goal, ok in method_goals(table, small).items() if not ok]
    assert missed == ["d3_n130: maximin >= 0.9 x WSP's", "n 4-32, d 1-4: maximin >= LHS's in every case"]


def test_plan_writes_points_and_manifest_in_the_networks_units(tmp_path):
    """owd written in s: points.csv holds ms, as the dry run's "what each run gets" does."""
    smoke = (ROOT / "designs" / "smoke.toml").read_text()
    design = smoke.replace('topology = "topologies/single.toml"', f'topology = "{ROOT}/topologies/single.toml"')
    design = design.replace('owd = { low = 5, high = 15, unit = "ms" }', 'owd = { low = 0.01, high = 0.3, unit = "s" }')
    design = design.replace('bw  = { low = 5, high = 20, unit = "Mbit/s" }',
                            'bw = { levels = [10.0], unit = "Mbit/s" }')
    assert "unit = \"s\"" in design and "levels = [10.0]" in design
    (tmp_path / "d.toml").write_text(design)
    out = subprocess.run([sys.executable, "-m", "fecbench", "plan", "d.toml", "--out", "o"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    frame = pd.read_csv(tmp_path / "o" / "points.csv", index_col="point")
    assert frame["owd"].between(10, 300).all() and frame["owd"].max() > 200 and (frame["bw"] == 10).all()
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["units"]["owd"] == "ms" and manifest["converted"]["owd"]["multiplier"] == 1000.0
    said = " ".join(out.stdout.split())
    first = frame["owd"].iloc[0]
    assert f"owd = {first:g}" in said or f"one-way delay {first:g} ms" in said
    more = subprocess.run([sys.executable, "-m", "fecbench", "plan", "d.toml", "--augment", "o/points.csv", "--add",
                           "2", "--out", "a"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert more.returncode == 0, more.stderr      # its own points, in ms, read back in the design's s
    augmented = pd.read_csv(tmp_path / "a" / "points.csv", index_col="point")
    pd.testing.assert_frame_equal(augmented.iloc[:len(frame)], frame)
    assert len(augmented) == len(frame) + 2 and augmented["owd"].between(10, 300).all()


def test_lhs_reference_is_scipy_random_cd():
    """The LHS every comparison uses is scipy's random-cd Latin hypercube (the `lhs` method)."""
    unit = make_plan(unit_cube(2, 10), seed=3, method="lhs").manifest["metrics"]
    direct = qmc.LatinHypercube(2, optimization="random-cd", rng=3).random(10)
    assert unit["maximin"] == pytest.approx(min_distance(direct), abs=1e-5)
