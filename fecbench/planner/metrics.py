"""Quality metrics of a design, all in normalised space (see space.py for the representations).

- maximin: smallest pairwise distance (embedded space; larger is better);
- cd2: centred L2 discrepancy of the unit coordinates (scipy; smaller is better);
- fill: fill distance estimate, i.e. the covering radius measured on a dense scrambled Sobol test
  set plus the corners of the cube (feasible test points only; smaller is better);
- coverage: per factor, the fraction of its levels (int and choice factors with at most 20 values)
  or of 10 equal-width strata of its range that hold at least one point, and the largest gap
  (unit coordinates, ends of the range included) left empty; for a choice factor, instead of the
  gap, the smallest share of the points that one level gets;
- projections: worst 1-D gap, worst 2-D maximin and the MaxPro criterion over the continuous factors,
  and `warnings` naming the factors covered far worse than by a Latin hypercube (projections.py).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.stats import qmc

from fecbench.planner.projections import projections, warnings
from fecbench.planner.space import Space
from fecbench.planner.wsp import min_distance

TEST_POINTS_LOG2 = 13      # 8192 Sobol test points for the fill distance
MAX_CORNERS = 4096
STRATA = 10


def quality(space: Space, unit: np.ndarray) -> dict[str, Any]:
    """All metrics of a design given by its unit coordinates (n, dimension)."""
    n, dims = unit.shape
    if dims == 0 or n == 0:
        return {"maximin": None, "cd2": None, "fill": None, "coverage": {}, "projections": projections(space, unit),
                "warnings": []}
    embedded = space.embed(unit)
    maximin = min_distance(embedded)
    positions = {f.name: _level_positions(f) for f in space.varying}
    metrics = {
        "maximin": None if not np.isfinite(maximin) else round(maximin, 6),
        "cd2": round(float(qmc.discrepancy(np.clip(unit, 0.0, 1.0), method="CD")), 6),
        "fill": _fill_distance(space, embedded),
        "coverage": {f.name: _coverage(unit[:, j], positions[f.name], f.kind == "choice")
                     for j, f in enumerate(space.varying)},
        "projections": projections(space, unit),
    }
    metrics["warnings"] = warnings(space, metrics, n, positions)
    return metrics


def _test_set(space: Space) -> np.ndarray:
    """Dense unit test points: scrambled Sobol (fixed seed, so designs are compared on the same set)
    plus the cube's corners, snapped to what int and choice factors can take."""
    dims = space.dimension
    sobol = qmc.Sobol(dims, scramble=True, rng=0).random_base2(TEST_POINTS_LOG2)
    if 2 ** dims <= MAX_CORNERS:
        corners = np.array(list(itertools.product((0.0, 1.0), repeat=dims)))
    else:
        corners = np.random.default_rng(0).integers(0, 2, size=(MAX_CORNERS, dims)).astype(float)
    return space.snap(np.vstack([sobol, corners]))


def _fill_distance(space: Space, embedded: np.ndarray) -> float | None:
    test = _test_set(space)
    test = test[space.feasible(space.natural(test), len(test))]
    if len(test) == 0:
        return None
    distances, _ = cKDTree(embedded).query(space.embed(test), k=1)
    return round(float(distances.max()), 6)


def _level_positions(factor: Any) -> np.ndarray | None:
    """Unit coordinates of every level of a choice factor, or value of an int factor with few values."""
    if factor.kind == "choice":
        return factor.unit_of(list(factor.levels))
    if factor.n_levels is None or factor.n_levels > 20:
        return None
    values = factor.levels if factor.levels is not None else np.arange(factor.low, factor.high + 1)
    return factor.unit_of(np.asarray(values))


def _coverage(u: np.ndarray, positions: np.ndarray | None, unordered: bool) -> dict[str, Any]:
    if positions is not None:
        hit = {int(np.argmin(np.abs(positions - x))) for x in u}
        covered = len(hit) / len(positions)
    else:
        strata = np.minimum((np.clip(u, 0, 1) * STRATA).astype(int), STRATA - 1)
        covered = len(set(strata.tolist())) / STRATA
    if unordered:  # gaps mean nothing between unordered levels: report how many points each holds
        counts = np.bincount([int(np.argmin(np.abs(positions - x))) for x in u], minlength=len(positions))
        return {"covered": round(covered, 4), "min_share": round(float(counts.min()) / len(u), 4)}
    edges = np.concatenate([[0.0], np.sort(np.clip(u, 0, 1)), [1.0]])
    return {"covered": round(covered, 4), "max_gap": round(float(np.diff(edges).max()), 6)}
