"""Planner: parsing of the [space] table and constraints (pure logic, no root)."""

from __future__ import annotations

import numpy as np
import pytest
import tomllib

from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section
from fecbench.planner import make_plan, parse_space
from fecbench.planner.constraints import compile_constraint

TABLE_I = """
[space]
method = "wsp"
points = 130
[space.factors]
bw  = { low = 0.3, high = 10, unit = "Mbit/s", scale = "log" }
owd = { low = 100, high = 400, unit = "ms" }
p   = { low = 0.01, high = 0.08 }
r   = { low = 0.08, high = 0.5 }
k   = { low = 0.98, high = 1.0 }
h   = { low = 0.0, high = 0.1 }
queue = 50
"""


def space_of(text: str, paths: int = 1, file: str = "design.toml"):
    return parse_space(Section(tomllib.loads(text), file).section("space"), paths=paths)


def error_of(text: str, paths: int = 1) -> SpecError:
    with pytest.raises(SpecError) as info:
        space = space_of(text, paths)
        make_plan(space, seed=1)
    return info.value


def test_table_one_parses_with_types_units_and_fixed_shorthand():
    space = space_of(TABLE_I)
    assert space.method == "wsp" and space.points == 130
    assert space.factor_names == ["bw", "owd", "p", "r", "k", "h", "queue"]
    bw = space.factors[0]
    assert (bw.kind, bw.low, bw.high, bw.scale, bw.unit) == ("float", 0.3, 10, "log", "Mbit/s")
    assert space.fixed[0].name == "queue" and space.fixed[0].value == 50
    assert space.dimension == 6


def test_per_path_factors_expand_only_with_several_paths():
    text = """
[space]
points = 10
[space.factors]
bw = { low = 1, high = 10, per_path = true }
owd = { low = 10, high = 100, per_path = true }
fec = { type = "choice", levels = ["rs:30,20", "rlc:3,2,20"] }
"""
    assert space_of(text, paths=1).factor_names == ["bw", "owd", "fec"]
    two = space_of(text, paths=2)
    assert two.factor_names == ["bw_1", "bw_2", "owd_1", "owd_2", "fec"]
    assert [f.path for f in two.factors] == [1, 2, 1, 2, None]
    three = space_of(text, paths=3)
    assert three.factor_names[:3] == ["bw_1", "bw_2", "bw_3"]
    # the mirror reverses path order: bw_1 <-> bw_3, bw_2 stays
    assert three.mirror_permutation()[:3] == [2, 1, 0]


def test_space_hash_depends_on_content_only():
    a, b = space_of(TABLE_I), space_of(TABLE_I.replace("[space]", "# comment\n[space]"))
    assert a.hash() == b.hash()
    assert a.hash() != space_of(TABLE_I.replace("points = 130", "points = 131")).hash()


@pytest.mark.parametrize("factor, key, words", [
    ("{ low = 10, high = 0.3 }", "factors.bw.low", "must be ≤ high"),
    ("{ low = 0, high = 10, scale = \"log\" }", "factors.bw.low", "low > 0"),
    ("{ low = 1, high = 10, scale = \"cubic\" }", "factors.bw.scale", "unknown value"),
    ("{ low = 1, high = 10, colour = 3 }", "factors.bw.colour", "unknown key"),
    ("{ type = \"choice\" }", "factors.bw.levels", "levels"),
    ("{ type = \"choice\", levels = [\"a\", \"a\"] }", "factors.bw.levels", "duplicate"),
    ("{ type = \"int\", low = 1.5, high = 4 }", "factors.bw.low", "integer"),
    ("{ high = 4 }", "factors.bw.low", "missing"),
    ("[1, 2]", "factors.bw", "must be"),
])
def test_bad_factor_is_a_spec_error_naming_the_factor(factor, key, words):
    text = f"[space]\npoints = 5\n[space.factors]\nbw = {factor}\nowd = {{ low = 1, high = 2 }}\n"
    error = error_of(text)
    assert error.key == f"space.{key}", str(error)
    assert words in str(error)
    assert "design.toml" in str(error)


@pytest.mark.parametrize("space_lines, key, words", [
    ("method = \"latin\"\npoints = 5", "space.method", "unknown value"),
    ("method = \"wsp\"", "space.points", "needs the number of points"),
    ("points = 5\nmirror = true", "space.mirror", "per-path"),
    ("points = 5\nfile = \"x.csv\"", "space.file", "only used by"),
    ("method = \"list\"\nfile = \"missing.csv\"", "space.file", "not found"),
    ("points = 5\nwhatever = 1", "space.whatever", "unknown key"),
    ("method = \"factorial\"", "space.factors.bw.levels", "needs levels"),
    ("points = 5\nconstraints = [\"bw <= nope\"]", "space.constraints[0]", "unknown factor 'nope'"),
    ("points = 5\nconstraints = [\"bw > 20\"]", "space.constraints", "no point of the space satisfies"),
])
def test_bad_space_is_a_spec_error(space_lines, key, words):
    text = f"[space]\n{space_lines}\n[space.factors]\nbw = {{ low = 1, high = 10 }}\nowd = {{ low = 1, high = 2 }}\n"
    error = error_of(text)
    assert error.key == key, str(error)
    assert words in str(error)


def test_mirror_needs_an_even_number_of_points():
    text = """
[space]
points = 7
mirror = true
[space.factors]
bw = { low = 1, high = 10, per_path = true }
"""
    assert error_of(text, paths=2).key == "space.points"


def test_factorial_with_more_points_than_the_grid_names_the_grid():
    text = """
[space]
method = "factorial"
points = 7
[space.factors]
bw = { levels = [1, 5, 10] }
fec = { levels = ["rs", "rlc"] }
"""
    error = error_of(text)
    assert error.key == "space.points"
    assert "3 (bw) × 2 (fec)" in str(error) and "only 6" in str(error)


def test_classical_designs_reject_choice_factors():
    text = """
[space]
method = "ccd"
[space.factors]
bw = { low = 1, high = 10 }
fec = { levels = ["rs", "rlc"] }
"""
    error = error_of(text)
    assert error.key == "space.factors.fec" and "numeric factors only" in str(error)


# --- constraints ------------------------------------------------------------------------------------

NAMES = ["owd_1", "owd_2", "fec", "bw"]


def evaluate(text: str, values: dict, n: int) -> list[bool]:
    return compile_constraint(text, NAMES, "f.toml", "space.constraints[0]").evaluate(values, n).tolist()


def test_constraints_are_vectorised_over_points():
    values = {"owd_1": np.array([100.0, 300.0, 150.0]), "owd_2": np.array([100.0, 100.0, 70.0]),
              "fec": np.array(["rs", "rlc", "rs"], dtype=object), "bw": 5.0}
    assert evaluate("owd_1 <= 2 * owd_2", values, 3) == [True, False, False]
    assert evaluate("50 < owd_2 < 100", values, 3) == [False, False, True]
    assert evaluate("fec == 'rs' and not owd_1 > 120", values, 3) == [True, False, False]
    assert evaluate("fec != 'rs' or bw >= 10", values, 3) == [False, True, False]
    assert evaluate("abs(owd_1 - owd_2) <= max(owd_2, 80) and sqrt(bw) < 3", values, 3) == [True, False, True]
    assert evaluate("bw > 1", values, 3) == [True, True, True]  # a fixed (scalar) factor broadcasts


@pytest.mark.parametrize("text, words", [
    ("__import__('os').system('true')", "only these functions"),
    ("owd_1.real > 0", "unsupported syntax"),
    ("[x for x in owd_1]", "unsupported syntax"),
    ("owd_1 if bw else owd_2", "unsupported syntax"),
    ("owd_1 <=", "invalid expression"),
    ("speed > 3", "unknown factor 'speed'"),
    ("max(owd_1) > 3", "takes 2 argument"),
    ("lambda: 1", "unsupported syntax"),
])
def test_constraints_reject_anything_but_simple_expressions(text, words):
    with pytest.raises(SpecError) as info:
        compile_constraint(text, NAMES, "f.toml", "space.constraints[0]")
    assert words in str(info.value)
    assert info.value.key == "space.constraints[0]"
