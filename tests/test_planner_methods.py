"""Planner: LHS, Sobol, random, factorial, list, pydoe designs, constraints, mirror, augment, metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fecbench.inputs.errors import SpecError, UserError
from fecbench.planner import make_plan
from fecbench.planner.augment import augment_plan
from fecbench.planner.metrics import quality
from fecbench.planner.wsp import min_distance
from tests.test_planner_space import space_of

MIXED = """
[space]
method = "{method}"
points = {points}
candidates = 8192
constraints = {constraints}
[space.factors]
bw  = {{ low = 0.3, high = 10, scale = "log" }}
owd = {{ low = 100, high = 400, unit = "ms" }}
fec = {{ type = "choice", levels = ["rs:30,20", "rlc:3,2,20", "xor:4"] }}
n   = {{ type = "int", low = 1, high = 8 }}
queue = {{ type = "fixed", value = 50 }}
"""


def mixed(method: str = "wsp", points: int = 60, constraints: str = "[]"):
    text = MIXED.format(method=method, points=points, constraints=constraints)
    if method != "wsp":
        text = text.replace("candidates = 8192\n", "")
    return space_of(text)


@pytest.mark.parametrize("method", ["wsp", "lhs", "sobol", "random"])
def test_every_sampler_handles_numeric_int_choice_and_fixed_factors(method):
    plan = make_plan(mixed(method), seed=11)
    frame = plan.points
    assert len(frame) == 60
    assert frame["bw"].between(0.3, 10).all() and frame["owd"].between(100, 400).all()
    assert set(frame["n"]) <= set(range(1, 9)) and frame["n"].dtype.kind == "i"
    counts = frame["fec"].value_counts()
    assert set(counts.index) == {"rs:30,20", "rlc:3,2,20", "xor:4"}
    if method in ("wsp", "lhs"):  # balanced levels
        assert counts.max() - counts.min() <= (6 if method == "wsp" else 1)
    assert (frame["queue"] == 50).all()
    assert make_plan(mixed(method), seed=11).csv_text() == plan.csv_text()
    metrics = plan.manifest["metrics"]
    assert metrics["coverage"]["fec"]["covered"] == 1.0 and metrics["coverage"]["n"]["covered"] == 1.0


def test_wsp_spreads_points_better_than_random():
    wsp = make_plan(mixed("wsp"), seed=1).manifest["metrics"]
    rnd = make_plan(mixed("random"), seed=1).manifest["metrics"]
    assert wsp["maximin"] > rnd["maximin"]
    assert wsp["fill"] < rnd["fill"]


@pytest.mark.parametrize("method", ["wsp", "lhs", "sobol", "random"])
def test_constraints_hold_at_every_point(method):
    constraints = '["owd <= 100 * bw", "fec != \'xor:4\' or n >= 4"]'
    frame = make_plan(mixed(method, 40, constraints), seed=5).points
    assert len(frame) == 40
    assert (frame["owd"] <= 100 * frame["bw"]).all()
    assert ((frame["fec"] != "xor:4") | (frame["n"] >= 4)).all()


MULTIPATH = """
[space]
method = "{method}"
points = 24
mirror = true
constraints = ["owd_1 <= 2 * owd_2"]
[space.factors]
bw  = {{ low = 0.3, high = 10, scale = "log", per_path = true }}
owd = {{ low = 10, high = 100, per_path = true }}
fec = {{ levels = ["rs", "rlc"] }}
"""


@pytest.mark.parametrize("method", ["wsp", "lhs", "sobol"])
def test_mirror_adds_each_points_path_swapped_copy(method):
    space = space_of(MULTIPATH.format(method=method), paths=2)
    plan = make_plan(space, seed=2)
    frame = plan.points
    assert list(frame.columns) == ["bw_1", "bw_2", "owd_1", "owd_2", "fec"]
    assert len(frame) == 24
    first, copy = frame.iloc[0::2].reset_index(drop=True), frame.iloc[1::2].reset_index(drop=True)
    assert np.allclose(first["bw_1"], copy["bw_2"]) and np.allclose(first["owd_2"], copy["owd_1"])
    assert (first["fec"] == copy["fec"]).all()
    assert (frame["owd_1"] <= 2 * frame["owd_2"]).all()  # copies satisfy the constraint too
    if method == "wsp":  # the copies are part of the space-filling design
        assert plan.manifest["metrics"]["maximin"] >= plan.manifest["d_min"] - 1e-9


FACTORIAL = """
[space]
method = "factorial"
{points}
constraints = {constraints}
[space.factors]
bw  = {{ low = 1, high = 100, scale = "log", levels = 3 }}
owd = {{ levels = [10, 50, 200] }}
fec = {{ levels = ["rs", "rlc"] }}
n   = {{ type = "int", low = 1, high = 8, levels = [1, 8] }}
"""


def test_factorial_grid_keeps_exact_levels():
    frame = make_plan(space_of(FACTORIAL.format(points="", constraints="[]")), seed=1).points
    assert len(frame) == 3 * 3 * 2 * 2
    assert sorted(set(frame["bw"])) == [1.0, 10.0, 100.0]
    assert sorted(set(frame["owd"])) == [10, 50, 200] and sorted(set(frame["n"])) == [1, 8]
    assert len(frame.drop_duplicates()) == 36


def test_factorial_subset_and_constraints():
    space = space_of(FACTORIAL.format(points="points = 10", constraints='["owd < 200"]'))
    plan = make_plan(space, seed=1)
    frame = plan.points
    assert len(frame) == 10 and (frame["owd"] < 200).all()
    assert len(frame.drop_duplicates()) == 10
    assert plan.manifest["feasible_grid_points"] == 24


def write_csv(tmp_path, rows: str):
    (tmp_path / "points.csv").write_text(rows)
    return tmp_path / "design.toml"


LIST = """
[space]
method = "list"
file = "points.csv"
{extra}
[space.factors]
bw  = {{ low = 0.3, high = 10, per_path = true }}
fec = {{ levels = ["rs", "rlc"] }}
queue = 50
"""


def test_list_reads_validates_and_mirrors(tmp_path):
    design = write_csv(tmp_path, "bw_1,bw_2,fec\n1,2,rs\n5,0.5,rlc\n")
    import tomllib

    from fecbench.inputs.specs import Section
    from fecbench.planner import parse_space

    section = Section(tomllib.loads(LIST.format(extra="mirror = true")), design).section("space")
    frame = make_plan(parse_space(section, paths=2), seed=0).points
    assert frame.to_dict("list") == {"bw_1": [1.0, 2.0, 5.0, 0.5], "bw_2": [2.0, 1.0, 0.5, 5.0],
                                     "fec": ["rs", "rs", "rlc", "rlc"], "queue": [50] * 4}


@pytest.mark.parametrize("rows, key, words", [
    ("bw_1,bw_2,fec\n1,20,rs\n", "space.factors.bw", "outside"),
    ("bw_1,bw_2,fec\n1,2,ldpc\n", "space.factors.fec", "not a level"),
    ("bw_1,fec\n1,rs\n", "space.file", "no column for factor 'bw_2'"),
    ("bw_1,bw_2,fec,colour\n1,2,rs,red\n", "space.file", "not a declared factor"),
])
def test_list_errors_name_the_factor(tmp_path, rows, key, words):
    import tomllib

    from fecbench.inputs.specs import Section
    from fecbench.planner import parse_space

    design = write_csv(tmp_path, rows)
    section = Section(tomllib.loads(LIST.format(extra="")), design).section("space")
    with pytest.raises(SpecError) as info:
        make_plan(parse_space(section, paths=2), seed=0)
    assert info.value.key == key and words in str(info.value)


CLASSICAL = """
[space]
method = "{method}"
{extra}
[space.factors]
bw  = {{ low = 1, high = 100, scale = "log" }}
owd = {{ low = 10, high = 50 }}
n   = {{ type = "int", low = 1, high = 9 }}
"""


@pytest.mark.parametrize("method, extra, rows", [
    ("fracfact", 'generator = "a b ab"', 4),
    ("ccd", 'face = "ccf"', 2 ** 3 + 2 * 3 + 2),
    ("bbd", "center = 1", 12 + 1),
])
def test_pydoe_classical_designs_map_coded_levels_to_ranges(method, extra, rows):
    pytest.importorskip("pydoe")
    frame = make_plan(space_of(CLASSICAL.format(method=method, extra=extra)), seed=0).points
    assert len(frame) == rows
    assert set(np.round(frame["bw"], 9)) <= {1.0, 10.0, 100.0}
    assert set(frame["owd"]) <= {10.0, 30.0, 50.0} and set(frame["n"]) <= {1, 5, 9}


def test_fracfact_generator_must_match_the_factors():
    pytest.importorskip("pydoe")
    with pytest.raises(SpecError) as info:
        make_plan(space_of(CLASSICAL.format(method="fracfact", extra='generator = "a b"')), seed=0)
    assert info.value.key == "space.generator"


def test_augment_keeps_existing_points_and_adds_far_ones(tmp_path):
    space = mixed("wsp", 20)
    base = make_plan(space, seed=1)
    csv_path, _ = base.write(tmp_path)
    more = augment_plan(space, csv_path, add=10, seed=1)
    frame = more.points
    assert len(frame) == 30
    pd.testing.assert_frame_equal(frame.iloc[:20], base.points, check_dtype=False)
    embedded = space.embed(space.unit({name: frame[name].to_numpy() for name in frame.columns}))
    assert min_distance(embedded) > 0  # no new point duplicates an existing one
    # greedy farthest points: the augmented design covers the space better
    assert more.manifest["metrics"]["fill"] <= base.manifest["metrics"]["fill"]
    assert more.manifest["added_points"] == 10 and more.manifest["method"] == "wsp+augment"


def test_augment_with_mirror_needs_pairs(tmp_path):
    space = space_of(MULTIPATH.format(method="wsp"), paths=2)
    csv_path, _ = make_plan(space, seed=1).write(tmp_path)
    with pytest.raises(UserError):
        augment_plan(space, csv_path, add=3, seed=1)
    frame = augment_plan(space, csv_path, add=4, seed=1).points
    assert len(frame) == 28 and np.allclose(frame["bw_1"].iloc[24], frame["bw_2"].iloc[25])


def test_metrics_on_a_known_design():
    space = space_of("[space]\npoints = 2\n[space.factors]\nx = { low = 0, high = 1 }\ny = { low = 0, high = 1 }\n")
    unit = np.array([[0.0, 0.0], [1.0, 1.0]])
    metrics = quality(space, unit)
    assert metrics["maximin"] == pytest.approx(np.sqrt(2))
    assert metrics["fill"] == pytest.approx(1.0)          # corners (0, 1) and (1, 0)
    assert metrics["coverage"]["x"] == {"covered": 0.2, "max_gap": 1.0}
    assert metrics["cd2"] > 0


def test_choice_coverage_reports_level_shares():
    space = mixed("lhs", 30)
    coverage = make_plan(space, seed=4).manifest["metrics"]["coverage"]
    assert coverage["fec"] == {"covered": 1.0, "min_share": round(10 / 30, 4)}
    assert "max_gap" in coverage["bw"] and "min_share" not in coverage["bw"]


@pytest.mark.parametrize("method", ["wsp", "lhs", "sobol"])
def test_numeric_levels_restrict_values_for_every_method(method):
    text = f"""
[space]
method = "{method}"
points = 24
[space.factors]
owd = {{ low = 10, high = 100 }}
buffer = {{ type = "int", low = 10, high = 100, levels = [100, 10, 50] }}
rate = {{ low = 1, high = 100, scale = "log", levels = 3 }}
"""
    plan = make_plan(space_of(text), seed=2)
    frame = plan.points
    assert set(frame["buffer"]) == {10, 50, 100} and frame["buffer"].dtype.kind == "i"
    assert set(np.round(frame["rate"], 9)) == {1.0, 10.0, 100.0}
    assert plan.manifest["metrics"]["coverage"]["buffer"]["covered"] == 1.0
