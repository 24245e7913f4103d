"""How well a design covers each factor and each pair of factors (its projections), and when to warn.

Most responses in these studies depend strongly on one or two factors, so a design is judged on its
projections too, not only on its distances in the full space:
- worst 1-D gap: over the continuous factors, the largest empty stretch of a factor's range (unit
  coordinates, ends included); a Latin hypercube of n points leaves at most 2/n;
- worst 2-D maximin: over pairs of continuous factors, the smallest distance between two points seen on
  that pair's plane (unit coordinates);
- MaxPro (Joseph, Gul & Ba, Biometrika 2015): psi = (mean over pairs of 1 / prod_k (x_ik - x_jk)^2)^(1/d)
  over the continuous factors (smaller is better; None when two points share a value of one).

A continuous factor is a float factor without explicit levels, or an int factor with at least n values.
`warnings` names each varying factor whose coverage or gap is far worse than a Latin hypercube of the
same size is sure to give (coverage below 3/4 of its, or a gap over 2.5 times its bound); not for a design
with constraints, which may keep a factor off part of its range.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from fecbench.planner import portable
from fecbench.planner.space import Factor, Space
from fecbench.planner.wsp import min_distance

STRATA = 10                # coverage counts 10 equal strata of a continuous factor (metrics.py)
COVERAGE_SHARE = 0.75      # warn below this share of a Latin hypercube's coverage
GAP_TIMES = 2.5            # warn above this many times a Latin hypercube's largest gap (2/n)


def continuous(factor: Factor, n: int) -> bool:
    """A factor whose values are not a few levels shared by many points (its projections can spread)."""
    if factor.kind == "choice" or factor.levels is not None:
        return False
    return factor.kind == "float" or factor.n_levels is None or factor.n_levels >= n


def projections(space: Space, unit: np.ndarray) -> dict[str, Any]:
    """Worst 1-D gap, worst 2-D maximin and MaxPro over the continuous factors of a design."""
    n = len(unit)
    columns = [j for j, f in enumerate(space.varying) if continuous(f, n)]
    names = [space.varying[j].name for j in columns]
    out: dict[str, Any] = {"worst_gap": None, "worst_gap_factor": None, "worst_2d_maximin": None,
                           "worst_2d_pair": None, "maxpro": None}
    if not columns or n < 2:
        return out
    u = np.clip(unit[:, columns], 0.0, 1.0)
    gaps = [float(np.diff(np.concatenate([[0.0], np.sort(u[:, k]), [1.0]])).max()) for k in range(len(columns))]
    worst = int(np.argmax(gaps))
    out.update(worst_gap=round(gaps[worst], 6), worst_gap_factor=names[worst], maxpro=maxpro(u))
    if len(columns) >= 2:
        pairs = [(min_distance(u[:, [a, b]]), (names[a], names[b]))
                 for a, b in itertools.combinations(range(len(columns)), 2)]
        distance, pair = min(pairs, key=lambda p: p[0])
        out.update(worst_2d_maximin=round(distance, 6), worst_2d_pair=list(pair))
    return out


def maxpro(u: np.ndarray) -> float | None:
    """The MaxPro criterion of unit coordinates (n, d), 6 significant digits; None if two points share a
    value of a factor (the criterion is infinite). Summed in log space (exact operations and fecbench's own
    exp and log, math.fsum), so its value is the same on every CPU."""
    n, d = u.shape
    i, j = np.triu_indices(n, 1)
    squares = np.square(u[i] - u[j])
    if (squares == 0).any():
        return None
    logs = np.asarray(portable.log(squares))
    exponents = -logs[:, 0]                 # log of 1 / prod_k (x_ik - x_jk)^2, summed in a fixed order
    for k in range(1, d):
        exponents = exponents - logs[:, k]
    top = float(exponents.max())
    total = math.fsum(np.asarray(portable.exp(exponents - top)).tolist()) / len(exponents)
    value = float(portable.exp((top + float(portable.log(total))) / d))
    return float(f"{value:.6g}")


def lhs_coverage(n: int, positions: np.ndarray | None) -> float | None:
    """What any Latin hypercube of n points covers of a factor (its levels, or its 10 strata): all of them
    once n is at least twice their number (each then holds a whole stratum of the hypercube); below,
    nothing is sure (None)."""
    cells = len(positions) if positions is not None else STRATA
    return 1.0 if n >= 2 * cells else None


def warnings(space: Space, metrics: dict[str, Any], n: int, positions: dict[str, np.ndarray | None]) -> list[str]:
    """One line per varying factor whose coverage or largest gap is far worse than a Latin hypercube's."""
    out: list[str] = []
    coverage = metrics.get("coverage") or {}
    if n < 2 or space.constraints:   # constraints may keep a factor off part of its range: no reference
        return out
    bound = 2.0 / n
    for f in space.varying:
        c = coverage.get(f.name)
        if c is None:
            continue
        lhs = lhs_coverage(n, positions.get(f.name))
        if lhs is not None and c["covered"] < COVERAGE_SHARE * lhs:
            what = "levels" if positions.get(f.name) is not None else f"{STRATA} equal strata of its range"
            out.append(f"factor {f.name}: its points cover {c['covered']:.0%} of its {what}; a Latin hypercube of "
                       f"{n} points covers {lhs:.0%} (method = \"wsp-lhs\" or \"lhs\" spread every factor)")
        elif continuous(f, n) and "max_gap" in c and c["max_gap"] > GAP_TIMES * bound:
            out.append(f"factor {f.name}: no point in {c['max_gap']:.1%} of its range; a Latin hypercube of {n} "
                       f"points leaves at most {bound:.1%} (method = \"wsp-lhs\" or \"lhs\" spread every factor)")
    return out
