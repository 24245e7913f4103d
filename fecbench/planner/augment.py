"""Augment an existing design: add K points, one at a time, each as far as possible from all others."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree
from scipy.stats import qmc

from fecbench.inputs.errors import UserError
from fecbench.planner.plan import Plan, build_plan, default_candidates, listed_points
from fecbench.planner.space import Space


def augment_plan(space: Space, existing: str | Path, add: int, seed: int) -> Plan:
    """The existing points (validated like method = "list") followed by `add` new points.

    Greedy farthest-point selection over seeded scrambled-Sobol candidates: each new point maximises
    its distance to the existing and already added points (with `mirror`, a point and its copy are
    added together, so `add` must be even). Memory stays linear in the number of candidates.
    """
    path = Path(existing)
    if not path.is_file():
        raise UserError(f"--augment: file not found: {path}")
    if add < 1:
        raise UserError(f"--add must be ≥ 1, got {add}")
    per_point = 2 if space.mirror else 1
    if add % per_point:
        raise UserError(f"--add {add}: with mirror = true points come in pairs, so --add must be even")
    listed = dataclasses.replace(space, method="list", list_file=path, points=None, mirror=False)
    old_unit, old_values = listed_points(listed)
    if len(old_unit) == 0:
        raise UserError(f"--augment: {path} holds no points")

    n_candidates = space.candidates or default_candidates(len(old_unit) + add)
    raw = qmc.Sobol(space.dimension, scramble=True, rng=seed).random_base2((n_candidates - 1).bit_length())
    unit = space.snap(raw[:n_candidates])
    unit = unit[space.feasible_unit(unit)]
    if len(unit) == 0:
        raise space.error("constraints", "no candidate point satisfies the constraints")
    embedded = space.embed(unit)
    perm = space.embed_mirror_permutation() if space.mirror else None
    nearest, _ = cKDTree(space.embed(old_unit)).query(embedded, k=1)
    chosen: list[int] = []
    for _ in range(add // per_point):
        i = int(np.argmax(nearest))
        if nearest[i] <= 0.0:
            raise UserError(f"--add {add}: only {len(chosen) * per_point} new distinct points fit among "
                            f"{len(unit)} feasible candidates")
        chosen.append(i)
        centres = [embedded[i]] + ([embedded[i][perm]] if perm is not None else [])
        for centre in centres:
            nearest = np.minimum(nearest, np.sqrt(np.square(embedded - centre).sum(axis=1)))
    new_unit = unit[chosen]
    if space.mirror:
        pairs = np.empty((2 * len(new_unit), new_unit.shape[1]))
        pairs[0::2], pairs[1::2] = new_unit, space.mirrored(new_unit)
        new_unit = pairs
    new_values = space.natural(new_unit)
    values = {}
    for f in space.factors:
        if f.varying:
            values[f.name] = np.concatenate([np.asarray(old_values[f.name], dtype=new_values[f.name].dtype),
                                             new_values[f.name]])
        else:
            values[f.name] = f.value
    info = {"augmented_from": str(path), "existing_points": len(old_unit), "added_points": add,
            "candidates": n_candidates}
    plan = build_plan(space, seed, np.vstack([old_unit, new_unit]), values, info)
    plan.manifest["method"] = f"{space.method}+augment"
    return plan
