"""Planner: the same design on every CPU (fecbench.planner.portable).

What differs between CPUs is the last bit of transcendental functions: numpy's float64 `power` runs
Intel's SVML on AVX-512 machines and the C library elsewhere, and the design pinned on such a machine
was this machine's design with one log-scaled value one unit in the last place lower. So: the planner
calls no such function but its own (checked statically), its own are accurate, a one-ulp change of
any value it computes leaves the written design unchanged, and a planner with numpy's and glibc's
CPU-specific code paths switched off gives the same design.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import subprocess
import sys
from decimal import Decimal, getcontext
from pathlib import Path

import numpy as np
import pytest

from fecbench.planner import make_plan, portable
from fecbench.planner.space import log_map
from tests.test_planner_space import space_of

ROOT = Path(__file__).resolve().parent.parent
# Every kind of value the planner computes: a log float, a log int, a linear float, a choice, and
# constraints calling log10, exp and a fractional power.
MIXED = """
[space]
method = "wsp"
points = 24
candidates = 4096
constraints = ["log10(bw) + exp(-10 * p) < 1.5", "queue ** 0.5 >= 2"]
[space.factors]
bw = { low = 0.3, high = 10, scale = "log" }
owd = { low = 5, high = 400 }
p = { low = 0.0, high = 0.1 }
queue = { type = "int", low = 2, high = 2000, scale = "log" }
fec = { type = "choice", levels = ["none", "rs:30,20", "xor:4"] }
"""
MIXED_SEED = 11
# sha256 of points.csv of MIXED with MIXED_SEED: the same on every machine (numpy 2.4, scipy 1.17).
MIXED_SHA256 = "81b03ac6d686cdb3433c0dea2d4f6c2b881bf48dff15c5b4f9d1082a4c6133b5"
# The same space planned by wsp-lhs (WSP, Latin strata, exchanges and moves drawn from PCG64 integers,
# integer distances): pinned likewise.
MIXED_LHS = MIXED.replace('method = "wsp"', 'method = "wsp-lhs"')
MIXED_LHS_SHA256 = "cbb0486a8605c32120f3fab7eb5f4c5c13c7ca2b2f69db98b5813de166f0898a"
# Calls that differ between CPUs in their last bit (numpy picks loops by CPU; glibc picks FMA variants).
TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "power", "float_power", "pow",
                  "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
                  "arcsinh", "arccosh", "arctanh", "cbrt", "hypot", "logaddexp", "logaddexp2", "erf",
                  "gamma", "lgamma", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh"}


def significant_digits(value: float) -> int:
    return len(repr(float(value)).split("e")[0].replace("-", "").replace(".", "").strip("0"))


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.array([math.ulp(w) for w in want])


def test_own_exp_log_and_power_are_within_two_ulps_of_the_exact_values():
    getcontext().prec = 50
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-30, 30, 400), rng.uniform(-700, 700, 100), [0.0, 1.0, -1.0]])
    assert ulps(portable.exp(x), np.array([float(Decimal(v).exp()) for v in x.tolist()])).max() <= 2
    y = np.concatenate([np.exp(rng.uniform(-700, 700, 300)), rng.uniform(0.5, 2.0, 200), [1e-310, 1.7e308]])
    want = np.array([float(Decimal(v).ln()) for v in y.tolist()])
    assert ulps(portable.log(y)[want != 0], want[want != 0]).max() <= 2
    assert portable.log(1.0) == 0.0 and portable.log10(1000.0) == 3.0 and portable.power(2.0, 10) == 1024.0
    assert portable.power(2, 3) == 8 and portable.power(9.0, -0.5) == pytest.approx(1 / 3, rel=1e-15)
    assert np.array_equal(portable.power(np.array([-2.0, 4.0]), 3), [-8.0, 64.0])
    specials = portable.log(np.array([0.0, -1.0, np.inf, np.nan]))
    assert specials[0] == -np.inf and np.isnan(specials[1]) and specials[2] == np.inf and np.isnan(specials[3])
    assert list(portable.exp(np.array([-np.inf, np.inf, 1000.0]))) == [0.0, np.inf, np.inf]


def test_round_significant_prints_nine_digits_and_ties_to_even():
    values = [6.1771586724402265, 6.177158672440226, -0.000123456789876, 3.14159265358979e-20, 1.23456789e35,
              0.0, 123456789.5, 123456788.5, 0.3, 10.0, 2.5e-9]
    got = [repr(v) for v in portable.round_significant(np.array(values)).tolist()]
    assert got == ["6.17715867", "6.17715867", "-0.00012345679", "3.14159265e-20", "1.23456789e+35", "0.0",
                   "123456790.0", "123456788.0", "0.3", "10.0", "2.5e-09"]
    assert np.isnan(portable.round_significant(np.array([np.nan]))[0])


def test_the_planner_calls_no_cpu_dependent_function():
    """numpy's and the C library's exp, log, power, … (and ** on floats) only in portable.py."""
    found = []
    for path in sorted((ROOT / "fecbench" / "planner").glob("*.py")):
        if path.name == "portable.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in TRANSCENDENTAL
                    and isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy", "math", "scipy")):
                found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and not (
                    isinstance(node.left, ast.Constant) and isinstance(node.left.value, int)):
                found.append(f"{path.name}:{node.lineno} ** (use np.square or portable.power)")
    assert not found, found


def test_a_one_ulp_change_of_exp_log_and_every_value_before_rounding_leaves_the_design_unchanged(monkeypatch):
    """The last bit of exp and log (what differs between CPUs) and of every value before it is rounded
    to 9 digits, one ulp up and one down: the mapping's raw values change, the written design does not.
    (A constraint holding exactly at its boundary, e.g. queue ** 1.5 >= 8 at queue = 4, would change:
    there the guarantee is that fecbench's own functions give the same bits everywhere.)"""
    space = space_of(MIXED)
    reference = make_plan(space, MIXED_SEED).csv_text()
    u = np.linspace(0.0, 1.0, 101)
    raw = log_map(0.3, 10.0, u)
    exp, log, rounding = portable.exp, portable.log, portable.round_significant
    for towards in (np.inf, -np.inf):
        monkeypatch.setattr(portable, "exp", lambda x, t=towards: np.nextafter(exp(x), t)[()])
        monkeypatch.setattr(portable, "log", lambda x, t=towards: np.nextafter(log(x), t)[()])
        monkeypatch.setattr(portable, "round_significant", lambda x, t=towards: rounding(np.nextafter(x, t)))
        assert not np.array_equal(log_map(0.3, 10.0, u), raw), "the perturbation did not reach the mapping"
        assert make_plan(space, MIXED_SEED).csv_text() == reference
        monkeypatch.undo()


def test_the_same_design_with_numpys_and_glibcs_cpu_specific_code_switched_off():
    """A planner process whose numpy runs only its baseline loops (every dispatched target the machine
    has, e.g. AVX2 or AVX-512, disabled) and whose C library uses no FMA or AVX2 variant gives the same
    design, byte for byte, as this process (which uses them). On an AVX-512 machine the old planner
    failed this: numpy's power there is SVML, its baseline the C library's."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    found = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    script = ("import hashlib, sys\nfrom tests.test_planner_portable import MIXED, MIXED_LHS, MIXED_SEED, space_of\n"
              "from tests.test_planner_wsp import small_table_one\nfrom fecbench.planner import make_plan\n"
              "for space, seed in ((space_of(MIXED), MIXED_SEED), (small_table_one(), 2019), "
              "(space_of(MIXED_LHS), MIXED_SEED)):\n"
              "    print(make_plan(space, seed).manifest['points_sha256'])\n")
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(found),
           "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    from tests.test_planner_wsp import small_table_one

    here = [make_plan(space_of(MIXED), MIXED_SEED).manifest["points_sha256"],
            make_plan(small_table_one(), 2019).manifest["points_sha256"],
            make_plan(space_of(MIXED_LHS), MIXED_SEED).manifest["points_sha256"]]
    print(f"disabled numpy targets {found or 'none (baseline only here)'}: {json.dumps(out.stdout.split())}")
    assert out.stdout.split() == here


def test_the_mixed_design_is_pinned():
    plan = make_plan(space_of(MIXED), MIXED_SEED)
    assert hashlib.sha256(plan.csv_text().encode()).hexdigest() == plan.manifest["points_sha256"] == MIXED_SHA256
    values = plan.points
    assert values["queue"].dtype.kind == "i" and (values["queue"] >= 4).all()
    for column in ("bw", "owd", "p"):   # at most 9 significant digits, as written
        assert max(significant_digits(v) for v in values[column]) <= portable.SIGNIFICANT_DIGITS


def test_the_mixed_design_by_wsp_lhs_is_pinned():
    plan = make_plan(space_of(MIXED_LHS), MIXED_SEED)
    assert hashlib.sha256(plan.csv_text().encode()).hexdigest() == plan.manifest["points_sha256"] == \
        MIXED_LHS_SHA256
    assert plan.manifest["relaxed"] == 0 and plan.manifest["exchanges"] > 0
