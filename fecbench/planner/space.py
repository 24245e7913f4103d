"""The `[space]` table of a design file: factors, per-path expansion, method options, constraints.

Three representations of a point are used throughout the planner:
- natural: the values users see (Mbit/s, ms, "rs:30,20"), one column per factor;
- unit: one coordinate in [0, 1] per varying factor (log factors normalised in log space, a choice
  level i of k at its stratum centre (i + 0.5) / k), used by samplers and the discrepancy metric;
- embedded: the metric space in which distances are measured. Numeric factors keep their unit
  coordinate; a choice factor becomes a one-hot block scaled by 1/sqrt(2), so two different levels
  are always at distance 1 (the width of a numeric range) and no order is imposed on the levels.

The same design on every machine (fecbench.planner.portable): unit coordinates lie on a lattice of
step 2^-20 (so distances are exact), natural values are computed with exact operations and
fecbench's own exp/log, and every computed value is rounded to 9 significant digits.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section
from fecbench.planner import portable
from fecbench.planner.constraints import Constraint, compile_constraint
from fecbench.planner.factor import Factor, log_map

METHODS = ("wsp-lhs", "wsp", "lhs", "sobol", "random", "factorial", "list", "fracfact", "ccd", "bbd")
DEFAULT_METHOD = "wsp-lhs"   # of a design naming none: designs/README.md ("Choosing a method") says why
SAMPLED = ("wsp-lhs", "wsp", "lhs", "sobol", "random")   # need `points`; `mirror` applies
KINDS = ("float", "int", "choice", "fixed")
FACTOR_KEYS = ("type", "low", "high", "levels", "value", "scale", "unit", "per_path")
SCALES = ("linear", "log")
CLASSICAL = ("fracfact", "ccd", "bbd")  # need the optional `pydoe` package (extra `doe`)
CHOICE_COORDINATE = portable.lattice_half_sqrt2()  # ~1/√2 on the lattice: two levels ~1 apart


@dataclass(frozen=True)
class Space:
    method: str
    points: int | None
    factors: tuple[Factor, ...]
    paths: int = 1
    candidates: int | None = None
    mirror: bool = False
    constraints: tuple[Constraint, ...] = ()
    list_file: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)   # method options: generator, face, center
    file: str | None = None                                  # the design file, for error messages

    # --- names ----------------------------------------------------------------------------------
    @property
    def factor_names(self) -> list[str]:
        return [f.name for f in self.factors]

    @property
    def varying(self) -> list[Factor]:
        return [f for f in self.factors if f.varying]

    @property
    def fixed(self) -> list[Factor]:
        return [f for f in self.factors if not f.varying]

    @property
    def dimension(self) -> int:
        return len(self.varying)

    @property
    def single(self) -> bool:
        """Every factor takes one value: the design is one scenario (one point), whatever its method."""
        return self.method != "list" and not self.varying

    def error(self, key: str | None, problem: str, allowed: Any = None) -> SpecError:
        return SpecError(self.file, f"space.{key}" if key else "space", problem, allowed)

    # --- representations ------------------------------------------------------------------------
    def natural(self, unit: np.ndarray) -> dict[str, np.ndarray]:
        """Natural values (fixed factors as scalars) of an (n, dimension) array of unit coordinates."""
        values: dict[str, Any] = {f.name: f.value for f in self.fixed}
        for j, f in enumerate(self.varying):
            values[f.name] = f.natural(unit[:, j])
        return values

    def unit(self, values: dict[str, Any]) -> np.ndarray:
        """Unit coordinates (on the lattice) of natural values; the inverse of `natural` on quantised points."""
        columns = [f.lattice_unit_of(values[f.name]) for f in self.varying]
        if not columns:
            return np.zeros((len(next(iter(values.values()), [])), 0))
        return np.column_stack(columns)

    def snap(self, unit: np.ndarray) -> np.ndarray:
        """Round unit coordinates to the lattice, and to the values int and choice factors can take."""
        out = portable.lattice(unit)
        for j, f in enumerate(self.varying):
            if f.kind in ("int", "choice"):
                out[:, j] = f.lattice_unit_of(f.natural(out[:, j]))
        return out

    def embed_blocks(self) -> list[range]:
        """The embedded columns of each varying factor (a choice factor's one-hot block, else one column)."""
        ends = np.cumsum([f.embed_width() for f in self.varying]).tolist()
        return [range(end - f.embed_width(), end) for f, end in zip(self.varying, ends, strict=True)]

    def embed(self, unit: np.ndarray) -> np.ndarray:
        """Coordinates in the metric space (choice factors one-hot, levels at distance 1)."""
        blocks = []
        for j, f in enumerate(self.varying):
            if f.kind == "choice":
                k = len(f.levels)
                index = np.minimum((unit[:, j] * k).astype(np.int64), k - 1)
                block = np.zeros((len(unit), k))
                block[np.arange(len(unit)), index] = CHOICE_COORDINATE
                blocks.append(block)
            else:
                blocks.append(unit[:, j:j + 1])
        if not blocks:
            return np.zeros((len(unit), 0))
        return np.ascontiguousarray(np.hstack(blocks))

    # --- multipath mirror -----------------------------------------------------------------------
    def mirror_permutation(self) -> list[int]:
        """Index map of varying factors for the path-reversed copy of a point (path p <-> paths+1-p)."""
        position = {f.name: j for j, f in enumerate(self.varying)}
        perm = []
        for f in self.varying:
            if f.path is None:
                perm.append(position[f.name])
            else:
                perm.append(position[f"{f.base}_{self.paths + 1 - f.path}"])
        return perm

    def embed_mirror_permutation(self) -> list[int]:
        """The same permutation on embedded columns (choice blocks move as a whole)."""
        blocks = self.embed_blocks()
        return [column for j in self.mirror_permutation() for column in blocks[j]]

    def mirrored(self, unit: np.ndarray) -> np.ndarray:
        return unit[:, self.mirror_permutation()]

    # --- constraints ----------------------------------------------------------------------------
    def feasible(self, values: dict[str, Any], n: int) -> np.ndarray:
        """Boolean mask of the n points (natural values) that satisfy every constraint."""
        mask = np.ones(n, dtype=bool)
        for constraint in self.constraints:
            mask &= constraint.evaluate(values, n)
        return mask

    def feasible_unit(self, unit: np.ndarray) -> np.ndarray:
        """Feasibility of unit points; with `mirror`, a point's mirrored copy must be feasible too."""
        mask = self.feasible(self.natural(unit), len(unit))
        if self.mirror and self.constraints:
            mask &= self.feasible(self.natural(self.mirrored(unit)), len(unit))
        return mask

    # --- identity -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method, "points": self.points, "paths": self.paths,
            "candidates": self.candidates, "mirror": self.mirror,
            "constraints": [c.text for c in self.constraints],
            "factors": [f.to_json() for f in self.factors], "options": self.options,
        }
        if self.list_file is not None:
            out["list_file_sha256"] = hashlib.sha256(self.list_file.read_bytes()).hexdigest()
        return out

    def hash(self) -> str:
        """Content hash of everything that determines the design (not file names or comments)."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


# --- parsing --------------------------------------------------------------------------------------

def _number(f: Section, key: str) -> float | None:
    return f.get(key, float, None)


def _parse_factor(name: str, raw: Any, s: Section) -> list[dict[str, Any]]:
    """One declared factor -> keyword arguments of its Factor (before per-path expansion)."""
    if not isinstance(raw, dict):  # shorthand: `queue = 50` is a fixed factor
        value = s.get(name, (int, float, str, bool))  # rejects lists with a message naming the factor
        return [{"base": name, "kind": "fixed", "value": value, "per_path": False}]
    f = s.section(name)
    for key in FACTOR_KEYS:       # read first: an unknown key is named before a missing one ("hihg")
        f.get(key, object, None)
    f.done()
    levels = f.get("levels", (list, int), None)
    default_kind = "fixed" if "value" in raw else "float"
    if isinstance(levels, list) and any(isinstance(v, str) for v in levels):
        default_kind = "choice"
    kind = f.get("type", str, default_kind, choices=KINDS)
    unit = f.get("unit", str, "")
    per_path = f.get("per_path", bool, False)
    spec: dict[str, Any] = {"base": name, "kind": kind, "unit": unit, "per_path": per_path}

    if kind == "fixed":
        spec["value"] = f.get("value", (int, float, str, bool))
        f.done()
        return [spec]

    if kind == "choice":
        if not isinstance(levels, list) or not levels:
            raise f.error("levels", "a choice factor needs a non-empty list of levels")
        if any(isinstance(v, (list, dict, bool)) for v in levels):
            raise f.error("levels", "levels must be strings or numbers")
        if len(set(levels)) != len(levels):
            raise f.error("levels", f"duplicate level in {levels}")
        spec["levels"] = tuple(levels)
        if len(levels) == 1:   # a constant, kept a choice so that what reads it still sees its level
            spec["value"] = levels[0]
        f.done()
        return [spec]

    low, high = _number(f, "low"), _number(f, "high")
    scale = f.get("scale", str, "linear", choices=SCALES)
    if isinstance(levels, list):
        if not levels or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in levels):
            raise f.error("levels", "levels of a numeric factor must be a non-empty list of numbers")
        if len(set(levels)) != len(levels):
            raise f.error("levels", f"duplicate level in {levels}")
        low = min(levels) if low is None else low
        high = max(levels) if high is None else high
        if any(v < low or v > high for v in levels):
            raise f.error("levels", f"levels must lie within [low, high] = [{low}, {high}]")
    if low is None or high is None:
        raise f.error("low" if low is None else "high", "missing required key (a numeric factor needs low and high)")
    if low > high:
        raise f.error("low", f"low ({low}) must be ≤ high ({high}; equal: a constant)")
    if scale == "log" and low <= 0:
        raise f.error("low", f"a log-scale factor needs low > 0, got {low}")
    if kind == "int":
        if low != int(low) or high != int(high):
            raise f.error("low", f"an int factor needs integer bounds, got [{low}, {high}]")
        low, high = int(low), int(high)
        if isinstance(levels, list) and any(v != int(v) for v in levels):
            raise f.error("levels", "levels of an int factor must be integers")
    if isinstance(levels, int):
        if levels < 2:
            raise f.error("levels", f"needs at least 2 levels, got {levels}")
        u = np.linspace(0.0, 1.0, levels)
        grid = log_map(low, high, u) if scale == "log" else low + u * (high - low)
        levels = [int(v) for v in np.rint(grid)] if kind == "int" else \
            [float(v) for v in np.clip(portable.round_significant(grid), low, high)]
        if len(set(levels)) != len(levels):
            raise f.error("levels", f"{len(levels)} levels do not fit between {low} and {high}")
    spec.update(low=low, high=high, scale=scale,
                levels=tuple(sorted(levels)) if isinstance(levels, list) else None)
    if isinstance(levels, list) and len(levels) == 1 or levels is None and low == high:
        # One value: a constant, as if written `value` (a float as the planner wrote it before: 10 -> 10.0).
        only = levels[0] if isinstance(levels, list) else low
        spec["value"] = int(only) if kind == "int" else float(only)
    f.done()
    return [spec]


def parse_space(section: Section, paths: int = 1) -> Space:
    """Parse and validate the `[space]` table of a design file; SpecError on any bad input."""
    if not isinstance(paths, int) or paths < 1:
        raise SpecError(section.file, section.path or "space", f"paths must be an integer ≥ 1, got {paths!r}")
    method = section.get("method", str, DEFAULT_METHOD, choices=METHODS)
    points = section.get("points", int, None, min=1)
    candidates = section.get("candidates", int, None, min=1, max=5_000_000)
    mirror = section.get("mirror", bool, False)
    file = section.get("file", str, None)
    raw_constraints = section.get("constraints", list, [])
    options = {
        "generator": section.get("generator", str, None),
        "face": section.get("face", str, "ccf", choices=("ccf", "cci")),
        "center": section.get("center", int, 1, min=0, max=100),
    }
    factors_section = section.section("factors", required=True)
    section.done()   # an unknown key first: "point = 5" is a typo before it is a missing "points"
    if not factors_section.data:
        raise factors_section.error(None, "declare at least one factor")
    factors = _factors(factors_section, section, paths)
    single = method != "list" and not any(f.varying for f in factors)
    _check_points(section, method, points, factors, single, mirror, candidates)
    list_file = _list_file(section, method, file)
    _check_method(section, method, factors, single, options)
    names = [f.name for f in factors]
    constraints = []
    for i, text in enumerate(raw_constraints):
        if not isinstance(text, str):
            raise section.error(f"constraints[{i}]", f"a constraint must be a string expression, got {text!r}")
        constraints.append(compile_constraint(text, names, section.file, f"{section.key('constraints')}[{i}]"))
    return Space(method=method, points=points, factors=tuple(factors), paths=paths, candidates=candidates,
                 mirror=mirror, constraints=tuple(constraints), list_file=list_file, options=options,
                 file=str(section.file) if section.file else None)


def _factors(factors_section: Section, section: Section, paths: int) -> list[Factor]:
    """The declared factors, a per-path one repeated for each of the `paths` paths; no name twice."""
    specs: list[dict[str, Any]] = []
    for name, raw in factors_section.data.items():
        if not name.isidentifier():
            raise factors_section.error(name, "a factor name must be an identifier (letters, digits, _)")
        specs.extend(_parse_factor(name, raw, factors_section))
    factors_section.done()
    factors: list[Factor] = []
    for spec in specs:
        per_path = spec.pop("per_path")
        if per_path and paths > 1:
            for p in range(1, paths + 1):
                factors.append(Factor(name=f"{spec['base']}_{p}", path=p, **spec))
        else:
            factors.append(Factor(name=spec["base"], path=None, **spec))
    names = [f.name for f in factors]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise section.error("factors", f"factor {duplicates[0]!r} is declared twice (per-path expansion adds "
                            f"_1.._{paths})")
    return factors


def _check_points(section: Section, method: str, points: int | None, factors: list[Factor], single: bool,
                  mirror: bool, candidates: int | None) -> None:
    """`points`, `mirror` and `candidates` against the method and the factors."""
    err = section.error
    if single and points not in (None, 1):
        raise err("points", f"every factor is fixed: the design is one point, not {points} (for more runs of "
                  "it, raise design.repetitions)")
    if mirror and not any(f.path is not None for f in factors):
        raise err("mirror", "mirror = true needs per-path factors (per_path = true) and paths ≥ 2")
    if mirror and method in ("factorial", *CLASSICAL):
        raise err("mirror", f"mirror is not used by method = {method!r} (its grid is already symmetric)",
                  [*SAMPLED, "list"])
    if mirror and points is not None and method != "list" and points % 2:
        raise err("points", f"with mirror = true the design has pairs of points: points must be even, got {points}")
    if method in SAMPLED and points is None and not single:
        raise err("points", f"method = {method!r} needs the number of points")
    if candidates is not None and method not in ("wsp", "wsp-lhs"):
        raise err("candidates", "candidates is only used by method = \"wsp\" or \"wsp-lhs\"")


def _list_file(section: Section, method: str, file: str | None) -> Path | None:
    """method = "list": its points file (relative to the design file), which must exist; else no file."""
    if method != "list":
        if file is not None:
            raise section.error("file", "file is only used by method = \"list\"")
        return None
    if file is None:
        raise section.error("file", "method = \"list\" needs file = \"points.csv\"")
    base = Path(section.file).parent if section.file else Path.cwd()
    list_file = (base / file) if not Path(file).is_absolute() else Path(file)
    if not list_file.is_file():
        raise section.error("file", f"file not found: {list_file}")
    return list_file


def _check_method(section: Section, method: str, factors: list[Factor], single: bool, options: dict[str, Any]) -> None:
    """What the factorial and classical methods need (levels; numeric factors; a generator)."""
    if method == "factorial" and not single:
        for f in factors:
            if f.varying and f.levels is None:
                raise SpecError(section.file, f"space.factors.{f.base}.levels",
                                "method = \"factorial\" needs levels (a list, or a number of levels)")
    if method in CLASSICAL:
        for f in factors:
            if f.kind == "choice" and f.varying:
                raise SpecError(section.file, f"space.factors.{f.base}",
                                f"method = {method!r} handles numeric factors only; use wsp, lhs or factorial")
        if method == "fracfact" and options["generator"] is None:
            raise section.error("generator", "method = \"fracfact\" needs a generator, e.g. \"a b ab\"")
    if options["generator"] is not None and method != "fracfact":
        raise section.error("generator", "generator is only used by method = \"fracfact\"")
