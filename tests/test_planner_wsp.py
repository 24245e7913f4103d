"""Planner: the WSP algorithm — exact counts, distances, trimming, reproducibility (pure logic)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist

from fecbench.planner import make_plan
from fecbench.planner.bench import unit_cube
from fecbench.planner.wsp import min_distance, trim, with_mirrors, wsp_design, wsp_pass
from tests.test_planner_space import TABLE_I, space_of

# sha256 of points.csv for Table I, 40 points, 8192 candidates, seed 2019 (numpy 2.4, scipy 1.17,
# pandas 3.1), the same on every x86-64 and arm64 CPU (fecbench.planner.portable; the hash pinned before,
# 770f88ed…, was this design with one value computed by numpy's AVX-512 `power`). A change here means
# the same spec and seed no longer give the same design.
PINNED_SHA256 = "5ac83a308ac3e14d6968203e6df82fb9cf5ed61124b7d372cbe2571ecdca598d"
# The Pythons constraints.txt pins (make constraints), each with the same numpy and scipy as the hash.
SUPPORTED_PYTHONS = ("3.11", "3.12", "3.13")
PINNED_VERSIONS = {"numpy": "2.4", "scipy": "1.17"}
CONSTRAINTS = Path(__file__).resolve().parent.parent / "constraints.txt"


def _pins(python: str) -> dict[str, str]:
    """constraints.txt's exact versions for one Python: {normalised name: version}."""
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        m = re.fullmatch(r'([A-Za-z0-9._-]+)==(\S+) ; python_version == "(\d+\.\d+)"', line.strip())
        if m and m.group(3) == python:
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


def small_table_one():
    return space_of(TABLE_I.replace("points = 130", "points = 40\ncandidates = 8192"))


@pytest.mark.parametrize("python", SUPPORTED_PYTHONS)
def test_every_supported_python_pins_the_hashs_numpy_and_scipy(python):
    pins = _pins(python)
    for module, minor in PINNED_VERSIONS.items():
        assert module in pins, f"constraints.txt pins no {module} for Python {python}: run make constraints"
        assert ".".join(pins[module].split(".")[:2]) == minor, (python, module, pins[module])
    assert {m: pins[m] for m in PINNED_VERSIONS} == {m: _pins("3.11")[m] for m in PINNED_VERSIONS}


@pytest.mark.skipif(f"{sys.version_info.major}.{sys.version_info.minor}" not in SUPPORTED_PYTHONS,
                    reason="not a supported Python (constraints.txt pins 3.11, 3.12 and 3.13)")
def test_wsp_design_is_pinned_bit_for_bit():
    # On a supported Python this never skips: the venv must hold constraints.txt's numpy and scipy
    # (make venv installs them), and with them the design is this one, bit for bit.
    pins = _pins(f"{sys.version_info.major}.{sys.version_info.minor}")
    installed = {m: importlib.metadata.version(m) for m in PINNED_VERSIONS}
    assert installed == {m: pins[m] for m in PINNED_VERSIONS}, \
        f"installed {installed}, constraints.txt pins {pins}: run make venv"
    plan = make_plan(small_table_one(), seed=2019)
    csv = plan.csv_text()
    assert hashlib.sha256(csv.encode()).hexdigest() == plan.manifest["points_sha256"]
    assert plan.manifest["points_sha256"] == PINNED_SHA256


def test_same_seed_same_points_other_seed_other_points():
    space = small_table_one()
    a, b, c = make_plan(space, 7), make_plan(space, 7), make_plan(space, 8)
    assert a.csv_text() == b.csv_text()
    assert a.manifest == b.manifest
    assert a.csv_text() != c.csv_text()


def test_plan_frame_shape_and_manifest():
    plan = make_plan(small_table_one(), seed=3)
    frame = plan.points
    assert list(frame.columns) == ["bw", "owd", "p", "r", "k", "h", "queue"]
    assert frame.index.name == "point" and list(frame.index) == list(range(40))
    assert (frame["queue"] == 50).all()
    assert frame["bw"].between(0.3, 10).all() and frame["owd"].between(100, 400).all()
    # log scale: the geometric middle of bw splits the points about evenly
    below = (frame["bw"] < np.sqrt(0.3 * 10)).sum()
    assert 12 <= below <= 28
    m = plan.manifest
    assert m["method"] == "wsp" and m["seed"] == 3 and m["points"] == 40 and m["candidates"] == 8192
    assert m["metrics"]["maximin"] >= m["d_min"] - 1e-9
    assert set(m["versions"]) >= {"numpy", "scipy", "pandas", "python", "fecbench"}
    assert len(m["space_hash"]) == 64


def test_plan_write_round_trips(tmp_path):
    import json

    import pandas as pd

    plan = make_plan(small_table_one(), seed=3)
    csv_path, manifest_path = plan.write(tmp_path / "x-plan")
    back = pd.read_csv(csv_path, index_col="point")
    pd.testing.assert_frame_equal(back, plan.points, check_dtype=False)
    assert json.loads(manifest_path.read_text())["points_sha256"] == plan.manifest["points_sha256"]


@settings(max_examples=25, deadline=None)
@given(dims=st.integers(1, 4), n=st.integers(1, 60), seed=st.integers(0, 2 ** 32 - 1))
def test_wsp_gives_exactly_n_points_at_least_d_min_apart(dims, n, seed):
    candidates = np.random.default_rng(seed).random((2048, dims))
    order = np.argsort(((candidates - 0.5) ** 2).sum(axis=1), kind="stable")
    result = wsp_design(candidates, n, order)
    chosen = candidates[result.indices]
    assert len(result.indices) == n == len(set(result.indices.tolist()))
    if n > 1:
        assert pdist(chosen).min() >= result.d_min - 1e-12


@settings(max_examples=25, deadline=None)
@given(dims=st.integers(1, 5), d_min=st.floats(0.05, 0.8), seed=st.integers(0, 2 ** 32 - 1))
def test_one_pass_keeps_points_farther_than_d_min_and_covers_the_candidates(dims, d_min, seed):
    candidates = np.random.default_rng(seed).random((500, dims))
    kept = wsp_pass(np.ascontiguousarray(candidates.T), 0, d_min, limit=10 ** 9)
    chosen = candidates[kept]
    if len(kept) > 1:
        assert pdist(chosen).min() > d_min
    # every candidate was removed by some kept point: it lies within d_min of the design
    nearest = np.sqrt(((candidates[:, None, :] - chosen[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
    assert nearest.max() <= d_min
    assert kept[0] == 0


def test_pass_moves_to_the_nearest_survivor():
    line = np.array([[0.0], [0.1], [0.35], [0.5], [0.95]])
    assert wsp_pass(np.ascontiguousarray(line.T), 0, 0.2, limit=10) == [0, 2, 4]


@settings(max_examples=20, deadline=None)
@given(extra=st.integers(1, 20), seed=st.integers(0, 2 ** 32 - 1))
def test_trim_reaches_n_and_never_lowers_the_minimum_distance(extra, seed):
    points = np.random.default_rng(seed).random((30 + extra, 3))
    keep = trim(points, 30)
    assert len(keep) == 30 == len(set(keep.tolist()))
    assert min_distance(points[keep]) >= min_distance(points)


def test_mirrored_wsp_keeps_copies_apart_too():
    rng = np.random.default_rng(5)
    candidates = rng.random((4096, 4))           # columns: bw_1, bw_2, owd_1, owd_2
    perm = [1, 0, 3, 2]
    order = np.argsort(((candidates - 0.5) ** 2).sum(axis=1), kind="stable")
    result = wsp_design(candidates, 40, order, mirror=perm)
    assert len(result.indices) == 20
    full = with_mirrors(candidates[result.indices], np.asarray(perm))
    assert pdist(full).min() >= result.d_min - 1e-12


def test_wsp_beats_lhs_on_the_unit_cube():
    from scipy.stats import qmc

    plan = make_plan(unit_cube(4, 60, candidates=16384), seed=1)
    lhs = qmc.LatinHypercube(4, optimization="random-cd", rng=1).random(60)
    assert len(plan.points) == 60
    assert plan.manifest["metrics"]["maximin"] > 1.8 * min_distance(lhs)


def test_memory_is_linear_in_candidates():
    # 60 000 candidates: an N x N float matrix would need 27 GiB; the whole plan must stay small.
    tracemalloc.start()
    try:
        plan = make_plan(unit_cube(3, 20, candidates=60_000), seed=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(plan.points) == 20
    assert peak < 100 * 2 ** 20


def test_too_few_distinct_candidates_is_a_clear_error():
    from fecbench.inputs.errors import SpecError

    text = """
[space]
points = 9
[space.factors]
n = { type = "int", low = 1, high = 2 }
fec = { levels = ["rs", "rlc", "xor"] }
"""
    with pytest.raises(SpecError) as info:
        make_plan(space_of(text), seed=1)
    assert info.value.key == "space.points" and "only 6 distinct" in str(info.value)


@pytest.mark.slow
def test_bench_reaches_the_quality_and_memory_goals():
    from fecbench.planner.bench import run_bench

    result = run_bench()
    for case, n in (("d6_n130", 130), ("d8_n500", 500)):
        assert set(result[case]) >= {"wsp", "lhs"}
        assert set(result[case]["wsp"]) >= {"maximin", "points", "seconds", "peak_mb"}
        assert result[case]["wsp"]["points"] == n
        assert result[case]["wsp"]["maximin"] >= 2.2 * result[case]["lhs"]["maximin"]
    assert result["d6_n130"]["wsp"]["maximin"] >= 0.55
    assert result["d8_n500"]["wsp"]["maximin"] >= 0.60
    assert result["d8_n500_N50000"]["wsp"]["peak_mb"] < 500   # memory, not time: tests never assert on time
