"""`fecbench plan --bench`: the methods compared on the unit cube, and WSP's speed and memory, in one run.

Methods (`run_method_bench`): at n = 130 with d = 3, 4 and 6, WSP, wsp-lhs, LHS (scipy random-cd) and
scrambled Sobol (and the PyPI `maxpro` package's MaxPro and maximin Latin hypercubes when it is
installed), each measured by the planner's own metrics: maximin, worst 1-D gap, worst 2-D maximin, CD2,
MaxPro; the goals of issue 50 for wsp-lhs (maximin ≥ 0.9 × WSP's, worst gap ≤ 1.5 × LHS's, CD2 ≤ 3 ×
LHS's); and on small designs (n = 4–32, d = 1–4) wsp-lhs's maximin against LHS's.

WSP (`run_bench`): for d = 6, n = 130 and d = 8, n = 500: WSP maximin, point count, seconds and peak memory of the
whole make_plan call (candidates, d_min search, trimming and metrics), and the maximin of scipy's
LatinHypercube (optimization = "random-cd") at the same size. Peak memory is the tracemalloc peak
(Python objects and numpy arrays) during a second, identical call.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import numpy as np
from scipy.stats import qmc

from fecbench.planner.metrics import quality
from fecbench.planner.plan import make_plan
from fecbench.planner.space import Factor, Space
from fecbench.planner.wsp import min_distance

CASES = ((6, 130), (8, 500))
SEED = 1
GOAL_POINTS, GOAL_DIMS = 130, (3, 4, 6)
SMALL_POINTS, SMALL_DIMS = (4, 8, 16, 32), (1, 2, 3, 4)
METHODS = ("wsp", "wsp-lhs", "lhs", "sobol")
# The maxpro package's search: its best of BUILD random Latin hypercubes, then ANNEAL swap-annealing steps
# (a few seconds at n = 130, as wsp-lhs takes).
MAXPRO_BUILD, MAXPRO_ANNEAL = 1000, 20_000


def unit_cube(dims: int, points: int, candidates: int | None = None) -> Space:
    factors = tuple(Factor(name=f"x{i + 1}", base=f"x{i + 1}", path=None, kind="float", low=0.0, high=1.0)
                    for i in range(dims))
    return Space(method="wsp", points=points, factors=factors, candidates=candidates)


def measure(dims: int, points: int, candidates: int | None = None) -> dict[str, Any]:
    """Time one make_plan call, then repeat it under tracemalloc (which slows allocations) for memory."""
    space = unit_cube(dims, points, candidates)
    start = time.perf_counter()
    plan = make_plan(space, SEED)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    make_plan(space, SEED)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"maximin": plan.manifest["metrics"]["maximin"], "points": len(plan.points),
            "seconds": round(seconds, 3), "peak_mb": round(peak / 2 ** 20, 1),
            "candidates": plan.manifest["candidates"], "d_min": plan.manifest["d_min"],
            "passes": plan.manifest["wsp_passes"]}


def run_bench() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dims, points in CASES:
        wsp = measure(dims, points)
        lhs = qmc.LatinHypercube(dims, optimization="random-cd", rng=SEED).random(points)
        lhs_maximin = round(min_distance(lhs), 6)
        out[f"d{dims}_n{points}"] = {"wsp": wsp, "lhs": {"maximin": lhs_maximin},
                                     "ratio": round(wsp["maximin"] / lhs_maximin, 3)}
    # Memory is linear in the candidates: the same d = 8 design from 50 000 candidates.
    out["d8_n500_N50000"] = {"wsp": measure(8, 500, candidates=50_000)}
    return out


def goals_met(result: dict[str, Any]) -> dict[str, bool]:
    """The issue's goals, checked on one bench result (printed, never asserted on timing in tests)."""
    d6, d8 = result["d6_n130"]["wsp"], result["d8_n500"]["wsp"]
    return {
        "exact_points": d6["points"] == 130 and d8["points"] == 500,
        "maximin_d6>=0.55": d6["maximin"] >= 0.55,
        "maximin_d8>=0.60": d8["maximin"] >= 0.60,
        "seconds_d6<=0.5": d6["seconds"] <= 0.5,
        "seconds_d8<=3": d8["seconds"] <= 3.0,
        "N50000_peak_mb<500": result["d8_n500_N50000"]["wsp"]["peak_mb"] < 500,
        "ratio>=2.2": min(result["d6_n130"]["ratio"], result["d8_n500"]["ratio"]) >= 2.2,
    }




def _row(metrics: dict[str, Any], seconds: float) -> dict[str, Any]:
    p = metrics["projections"]
    return {"maximin": metrics["maximin"], "worst_gap": p["worst_gap"], "worst_2d": p["worst_2d_maximin"],
            "cd2": metrics["cd2"], "maxpro": p["maxpro"], "seconds": round(seconds, 2)}


def _maxpro_package(dims: int, points: int) -> dict[str, dict[str, Any]]:
    """The PyPI `maxpro` package's designs (its MaxPro and its maximin criterion), measured as ours;
    empty when it is not installed (it is no dependency of fecbench)."""
    try:
        import maxpro
    except ImportError:
        return {}
    space = unit_cube(dims, points)
    out = {}
    for criterion, minimise in (("maxpro", True), ("maximin", False)):
        start = time.perf_counter()
        design = maxpro.build_lhd(points, dims, MAXPRO_BUILD, criterion, SEED)
        design = maxpro.anneal_lhd(design, MAXPRO_ANNEAL, 1.0, 0.99, criterion, minimise, True, SEED)
        seconds = time.perf_counter() - start
        out[f"maxpro package ({criterion})"] = _row(quality(space, np.asarray(design, dtype=float)), seconds)
    return out


def run_method_bench() -> dict[str, Any]:
    """The methods at n = 130 (d = 3, 4, 6) and wsp-lhs against LHS on small designs, with the goals."""
    table: dict[str, Any] = {}
    for dims in GOAL_DIMS:
        rows = {}
        for method in METHODS:
            start = time.perf_counter()
            plan = make_plan(unit_cube(dims, GOAL_POINTS), SEED, method=method)
            rows[method] = _row(plan.manifest["metrics"], time.perf_counter() - start)
        rows.update(_maxpro_package(dims, GOAL_POINTS))
        table[f"d{dims}_n{GOAL_POINTS}"] = rows
    small = []
    for points in SMALL_POINTS:
        for dims in SMALL_DIMS:
            space = unit_cube(dims, points)
            ours, lhs = (make_plan(space, SEED, method=m).manifest["metrics"]["maximin"] for m in ("wsp-lhs", "lhs"))
            small.append({"points": points, "dims": dims, "wsp-lhs": ours, "lhs": lhs,
                          "ratio": round(ours / lhs, 3)})
    return {"n130": table, "small": small, "goals": method_goals(table, small)}


def method_goals(table: dict[str, Any], small: list[dict[str, Any]]) -> dict[str, bool]:
    """Issue 50's goals for wsp-lhs, each case measured against WSP and LHS in the same run."""
    goals = {}
    for case, rows in table.items():
        ours, wsp, lhs = rows["wsp-lhs"], rows["wsp"], rows["lhs"]
        goals[f"{case}: maximin >= 0.9 x WSP's"] = ours["maximin"] >= 0.9 * wsp["maximin"]
        goals[f"{case}: worst gap <= 1.5 x LHS's"] = ours["worst_gap"] <= 1.5 * lhs["worst_gap"]
        goals[f"{case}: CD2 <= 3 x LHS's"] = ours["cd2"] <= 3 * lhs["cd2"]
    goals["n 4-32, d 1-4: maximin >= LHS's in every case"] = all(r["wsp-lhs"] >= r["lhs"] for r in small)
    return goals
