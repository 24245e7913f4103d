"""`fecbench plan --bench`: WSP on the unit cube against scipy's LHS, in one run.

For d = 6, n = 130 and d = 8, n = 500: WSP maximin, point count, seconds and peak memory of the
whole make_plan call (candidates, d_min search, trimming and metrics), and the maximin of scipy's
LatinHypercube (optimization = "random-cd") at the same size. Peak memory is the tracemalloc peak
(Python objects and numpy arrays) during a second, identical call.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

from scipy.stats import qmc

from fecbench.planner.plan import make_plan
from fecbench.planner.space import Factor, Space
from fecbench.planner.wsp import min_distance

CASES = ((6, 130), (8, 500))
SEED = 1


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


