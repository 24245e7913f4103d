"""make_plan: turn a parsed Space and a seed into design points, a manifest and quality metrics."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import platform
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import qmc

from fecbench.inputs.errors import SpecError, UserError
from fecbench.planner import portable
from fecbench.planner.latin import latin_design
from fecbench.planner.metrics import quality
from fecbench.planner.space import CLASSICAL, Space
from fecbench.planner.wsp import wsp_design

MAX_DRAW = 2 ** 22  # largest batch drawn when constraints reject most points


@dataclass
class Plan:
    space: Space
    points: pd.DataFrame     # one row per point, index "point" = 0..n-1, natural units
    manifest: dict[str, Any]
    unit: np.ndarray | None = None   # the points' unit coordinates (n, varying factors), for plots

    def csv_text(self) -> str:
        buffer = io.StringIO()
        self.points.to_csv(buffer, lineterminator="\n")
        return buffer.getvalue()

    def in_units(self, scales: dict[str, float], units: dict[str, str]) -> Plan:
        """The plan with each factor multiplied into the unit the network applies (`scales`: multipliers by
        factor name, `units`: those units' names), rounded to 9 significant digits as each run gets it
        (runners.experiment.factor_uses.scale_value); names (choice levels) stay. Metrics are unchanged
        (they are computed in unit coordinates)."""
        frame = self.points.copy()
        converted = {}
        for name, scale in scales.items():
            if scale == 1.0 or name not in frame.columns:
                continue
            frame[name] = _scaled(frame[name], scale)
            converted[name] = {"from": self.manifest.get("units", {}).get(name, ""), "multiplier": scale}
        plan = Plan(space=self.space, points=frame, manifest=dict(self.manifest), unit=self.unit)
        plan.manifest["units"] = {**self.manifest.get("units", {}), **units}
        plan.manifest["converted"] = converted
        plan.manifest["points_sha256"] = hashlib.sha256(plan.csv_text().encode()).hexdigest()
        return plan

    def write(self, directory: str | Path) -> tuple[Path, Path]:
        """Write points.csv and manifest.json into directory (created if needed)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        csv_path, manifest_path = directory / "points.csv", directory / "manifest.json"
        csv_path.write_text(self.csv_text())
        manifest_path.write_text(json.dumps(self.manifest, indent=2, sort_keys=True) + "\n")
        return csv_path, manifest_path


def _scaled(column: pd.Series, scale: float) -> Any:
    """Numbers times `scale`, 9 significant digits; whole numbers stay integers where they were."""
    if column.dtype == object:   # choice levels: numbers among them are converted, names not
        return [v if isinstance(v, str) else _scaled(pd.Series([v]), scale)[0] for v in column]
    values = portable.round_significant(column.to_numpy(dtype=float) * scale)
    if column.dtype.kind in "iu" and np.all(values == np.rint(values)):
        return values.astype(np.int64)
    return values


def default_candidates(n: int) -> int:
    """Candidates drawn by WSP: more raise maximin, at a linear cost in time and memory."""
    return max(2 ** 16, 128 * n)


def make_plan(space: Space, seed: int, *, method: str | None = None) -> Plan:
    """Make the design; `method` overrides the space's method (used by --compare)."""
    if method is not None and method != space.method:
        space = dataclasses.replace(space, method=method, candidates=None)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"the design seed must be an integer ≥ 0, got {seed!r}")
    info: dict[str, Any] = {}
    if space.single:   # every factor fixed (or given one level): a single scenario
        return build_plan(space, seed, np.zeros((1, space.dimension)), None, info)
    if space.method == "wsp":
        unit = _wsp(space, seed, info)
    elif space.method == "wsp-lhs":
        unit = _wsp_lhs(space, seed, info)
    elif space.method in ("lhs", "sobol", "random"):
        unit = _sampled(space, seed)
    elif space.method == "factorial":
        return build_plan(space, seed, *_factorial(space, info), info)
    elif space.method == "list":
        return build_plan(space, seed, *listed_points(space), info)
    else:
        unit = _classical(space, info)
    return build_plan(space, seed, unit, None, info)


# --- methods (each returns unit coordinates, snapped) ---------------------------------------------

def _base_count(space: Space) -> int:
    return space.points // 2 if space.mirror else space.points


def _add_mirrors(space: Space, unit: np.ndarray) -> np.ndarray:
    """Each point followed by its path-reversed copy."""
    if not space.mirror:
        return unit
    pairs = np.empty((2 * len(unit), unit.shape[1]))
    pairs[0::2], pairs[1::2] = unit, space.mirrored(unit)
    return pairs


def _unsatisfiable(space: Space, found: int, wanted: int, tried: int) -> SpecError:
    if found == 0:
        texts = "; ".join(c.text for c in space.constraints)
        return space.error("constraints", f"no point of the space satisfies the constraints ({texts}; "
                                          f"{tried} points tried)")
    return space.error("points", f"only {found} distinct feasible points found among {tried}, "
                                 f"{wanted} requested (raise candidates, relax constraints or ask fewer points)")


def _wsp(space: Space, seed: int, info: dict[str, Any]) -> np.ndarray:
    return _add_mirrors(space, _wsp_base(space, seed, info)[0])


def _wsp_lhs(space: Space, seed: int, info: dict[str, Any]) -> np.ndarray:
    """WSP's design made a Latin hypercube and optimised for maximin (latin.py)."""
    base, candidates = _wsp_base(space, seed, info)
    result = latin_design(space, base, candidates, seed)
    info["wsp_d_min"] = info.pop("d_min")      # the start's, not a bound of this design's distances
    info.update(exchanges=result.exchanges, moves=result.moves, proposals=result.proposals,
                relaxed=result.relaxed)
    return result.unit


def _wsp_base(space: Space, seed: int, info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """WSP's points (without mirrored copies) and the feasible candidates they were chosen from."""
    n_candidates = space.candidates or default_candidates(space.points)
    m = (n_candidates - 1).bit_length()   # 2^m >= n_candidates
    raw = qmc.Sobol(space.dimension, scramble=True, rng=seed).random_base2(m)[:n_candidates]
    unit = space.snap(raw)
    feasible = space.feasible_unit(unit)
    unit = unit[feasible]
    if len(unit) == 0:
        raise _unsatisfiable(space, 0, space.points, n_candidates)
    start_order = np.argsort(np.square(unit - 0.5).sum(axis=1), kind="stable")
    mirror = space.embed_mirror_permutation() if space.mirror else None
    try:
        result = wsp_design(space.embed(unit), space.points, start_order, mirror)
    except ValueError:
        raise _unsatisfiable(space, len(np.unique(unit, axis=0)), space.points, n_candidates) from None
    info.update(candidates=n_candidates, feasible_candidates=int(len(unit)), d_min=round(result.d_min, 9),
                wsp_passes=result.passes, trimmed=result.trimmed)
    return unit[result.indices], unit


def _sampled(space: Space, seed: int) -> np.ndarray:
    """LHS, scrambled Sobol or uniform random; with constraints, the first feasible points of a larger draw."""
    dims, wanted = space.dimension, _base_count(space)
    if space.method == "sobol":
        engine = qmc.Sobol(dims, scramble=True, rng=seed)
        size = 1 << (wanted - 1).bit_length()
        unit = engine.random_base2(size.bit_length() - 1)
    else:
        size = wanted
        unit = _draw(space.method, dims, size, seed, optimise=True)
    while True:
        snapped = space.snap(unit)
        feasible = snapped[space.feasible_unit(snapped)]
        if len(feasible) >= wanted:
            return _add_mirrors(space, feasible[:wanted])
        if len(unit) >= MAX_DRAW:
            raise _unsatisfiable(space, len(feasible), wanted, len(unit))
        if space.method == "sobol":  # continue the same sequence (doubling keeps powers of two)
            unit = np.vstack([unit, engine.random_base2(len(unit).bit_length() - 1)])
        else:
            size = len(unit) * 4
            unit = _draw(space.method, dims, size, seed, optimise=False)


def _draw(method: str, dims: int, size: int, seed: int, optimise: bool) -> np.ndarray:
    if method == "lhs":
        # random-cd improves the centred discrepancy; skipped for the large draws constraints need.
        return qmc.LatinHypercube(dims, optimization="random-cd" if optimise else None, rng=seed).random(size)
    return np.random.default_rng(seed).random((size, dims))


def _subset(space: Space, values: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """The given rows of natural values (fixed factors stay scalars)."""
    return {name: (column[rows] if isinstance(column, np.ndarray) else column) for name, column in values.items()}


def _factorial(space: Space, info: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """The full grid of levels (or a space-filling subset of it); exact natural values are kept."""
    grid = list(itertools.product(*(f.levels for f in space.varying)))
    values = {f.name: np.array([row[j] for row in grid], dtype=object if f.kind == "choice" else float)
              for j, f in enumerate(space.varying)}
    values.update({f.name: f.value for f in space.fixed})
    keep = np.flatnonzero(space.feasible(values, len(grid)))
    values = _subset(space, values, keep)
    unit = space.unit(values)
    sizes = " × ".join(f"{len(f.levels)} ({f.name})" for f in space.varying)
    if len(unit) == 0:
        raise _unsatisfiable(space, 0, space.points or 1, len(grid))
    info.update(grid_points=len(grid), feasible_grid_points=int(len(unit)))
    wanted = space.points or len(unit)
    if wanted > len(unit):
        raise space.error("points", f"{wanted} points requested but the factorial grid {sizes} has only "
                                    f"{len(unit)} feasible points")
    if wanted == len(unit):
        return unit, values
    start_order = np.argsort(np.square(unit - 0.5).sum(axis=1), kind="stable")
    result = wsp_design(space.embed(unit), wanted, start_order)  # a space-filling subset of the grid
    info.update(d_min=round(result.d_min, 9), wsp_passes=result.passes)
    rows = np.sort(result.indices)
    return unit[rows], _subset(space, values, rows)


def listed_points(space: Space) -> tuple[np.ndarray, dict[str, Any]]:
    """Points from a CSV file, validated against the factor declarations and constraints."""
    path = space.list_file
    try:
        # Text first, numbers by Python's float(): correctly rounded, so the same file gives the same
        # values everywhere (pandas' own parser may be a unit in the last place off).
        table = pd.read_csv(path, keep_default_na=False, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise space.error("file", f"cannot read {path} as CSV: {exc}") from None
    if "point" in table.columns:
        table = table.drop(columns="point")
    known = set(space.factor_names)
    unknown = [c for c in table.columns if c not in known]
    if unknown:
        raise space.error("file", f"{path}: column {unknown[0]!r} is not a declared factor", sorted(known))
    missing = [f.name for f in space.varying if f.name not in table.columns]
    if missing:
        raise space.error("file", f"{path}: no column for factor {missing[0]!r}")
    values: dict[str, Any] = {}
    for f in space.factors:
        key = f"factors.{f.base}"
        if not f.varying:
            if f.name in table.columns and not all(_same(v, f.value) for v in table[f.name]):
                raise space.error(key, f"{path}: column {f.name!r} must hold the fixed value {f.value!r}")
            values[f.name] = f.value
            continue
        column = table[f.name]
        if f.kind == "choice":
            by_text = {str(level): level for level in f.levels}
            bad = [v for v in column if str(v) not in by_text]
            if bad:
                raise space.error(key, f"{path}: {f.name} = {bad[0]!r} is not a level", list(f.levels))
            values[f.name] = np.array([by_text[str(v)] for v in column], dtype=object)
            continue
        numbers = np.array([_float(v) for v in column], dtype=float)
        row = next((i for i, v in enumerate(numbers) if not (f.low <= v <= f.high)), None)
        if row is not None:
            raise space.error(key, f"{path} row {row}: {f.name} = {column.iloc[row]!r} is outside "
                                   f"[{f.low}, {f.high}]")
        if f.kind == "int":
            if not np.all(numbers == np.rint(numbers)):
                raise space.error(key, f"{path}: {f.name} must hold integers")
            numbers = numbers.astype(np.int64)
        values[f.name] = numbers
    bad_rows = np.flatnonzero(~space.feasible(values, len(table)))
    if len(bad_rows):
        texts = "; ".join(c.text for c in space.constraints)
        raise space.error("constraints", f"{path} row {bad_rows[0]} violates the constraints ({texts})")
    if space.mirror:  # each row followed by its path-reversed copy
        perm = space.mirror_permutation()
        doubled = _subset(space, values, np.repeat(np.arange(len(table)), 2))  # fancy indexing copies
        for j, f in enumerate(space.varying):
            doubled[f.name][1::2] = values[space.varying[perm[j]].name]
        values = doubled
    unit = space.unit(values)
    if space.points is not None and space.points != len(unit):
        raise space.error("points", f"points = {space.points} but {path} gives {len(unit)} points")
    return unit, values


def _same(text: str, value: Any) -> bool:
    """A listed cell holds a constant's value (a number as a number: "10" is 10.0)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _float(text) == value
    return text == str(value)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")  # reported as outside [low, high]


def _classical(space: Space, info: dict[str, Any]) -> np.ndarray:
    """Two-level fractional factorial, central composite or Box-Behnken designs (pydoe)."""
    try:
        import pydoe
    except ImportError:
        raise UserError(f"method = {space.method!r} needs the optional package pydoe: "
                        "pip install 'fecbench[doe]'") from None
    dims = space.dimension
    if space.method == "fracfact":
        generator = space.options["generator"]
        if len(generator.split()) != dims:
            raise space.error("generator", f"{generator!r} has {len(generator.split())} columns for "
                                           f"{dims} varying factors")
        try:
            coded = pydoe.fracfact(generator)
        except Exception as exc:  # pydoe raises ValueError/IndexError on malformed generators
            raise space.error("generator", f"pydoe cannot build {generator!r}: {exc}") from None
    elif space.method == "ccd":
        if dims < 2:
            raise space.error("method", "a central composite design needs at least 2 varying factors")
        center = space.options["center"]
        coded = pydoe.ccdesign(dims, center=(center, center), face=space.options["face"])
    else:
        if dims < 3:
            raise space.error("method", "a Box-Behnken design needs at least 3 varying factors")
        coded = pydoe.bbdesign(dims, center=space.options["center"])
    unit = space.snap(np.clip((np.asarray(coded, dtype=float) + 1.0) / 2.0, 0.0, 1.0))
    unit = unit[space.feasible_unit(unit)]
    if len(unit) == 0:
        raise _unsatisfiable(space, 0, len(coded), len(coded))
    if space.points is not None and space.points != len(unit):
        raise space.error("points", f"points = {space.points} but the {space.method} design has "
                                    f"{len(unit)} feasible points (omit points to take them all)")
    info["pydoe"] = version("pydoe")
    return unit


# --- assembling the plan --------------------------------------------------------------------------

def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__, "pandas": pd.__version__}
    for package in ("scipy", "fecbench"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "unknown"
    return out


def build_plan(space: Space, seed: int, unit: np.ndarray, values: dict[str, Any] | None,
           info: dict[str, Any] | None = None) -> Plan:
    """The plan from unit coordinates, and the exact natural values when the method has them."""
    info = {} if info is None else info
    values = space.natural(unit) if values is None else values
    columns: dict[str, Any] = {}
    for f in space.factors:
        column = values[f.name]
        if not f.varying:
            column = [f.value] * len(unit)
        elif f.kind == "choice":
            column = list(column)
        columns[f.name] = column
    frame = pd.DataFrame(columns, index=pd.RangeIndex(len(unit), name="point"))
    plan = Plan(space=space, points=frame, manifest={}, unit=unit)
    plan.manifest = {
        "method": space.method,
        "seed": seed,
        "points": len(unit),
        "factors": space.factor_names,
        "units": {f.name: f.unit for f in space.factors},
        "paths": space.paths,
        "mirror": space.mirror,
        "constraints": [c.text for c in space.constraints],
        "candidates": info.pop("candidates", None),
        "d_min": info.pop("d_min", None),
        **info,
        "metrics": quality(space, unit),
        "space_hash": space.hash(),
        "resolution": {"unit_lattice_step": f"2^-{portable.LATTICE_BITS}",
                       "significant_digits": portable.SIGNIFICANT_DIGITS},
        "points_sha256": hashlib.sha256(plan.csv_text().encode()).hexdigest(),
        "versions": _versions(),
    }
    if space.method in CLASSICAL:
        plan.manifest["versions"]["pydoe"] = plan.manifest.pop("pydoe")
    return plan
