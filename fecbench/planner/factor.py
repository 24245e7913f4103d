"""One factor of a design space after per-path expansion: its kind, its range or levels, and the maps
between its natural values and unit coordinates (the representations: fecbench.planner.space)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fecbench.planner import portable


def log_map(low: float, high: float, u: Any) -> np.ndarray:
    """low * (high / low) ** u, with exact operations and fecbench's own exp and log (portable.py)."""
    return low * np.asarray(portable.exp(np.asarray(u, dtype=float) * portable.log(high / low)))


@dataclass(frozen=True)
class Factor:
    name: str                      # column name after per-path expansion (bw_1)
    base: str                      # name as declared (bw)
    path: int | None               # 1..paths for a per-path factor, else None
    kind: str                      # float | int | choice | fixed
    low: float | None = None
    high: float | None = None
    scale: str = "linear"
    unit: str = ""
    levels: tuple | None = None    # choice levels, or the only values a numeric factor may take
    value: Any = None              # fixed factors, and the one value of a factor that can take only one

    @property
    def varying(self) -> bool:
        """False for a constant however it is written: `value`, one level, or low == high. A constant is
        no dimension of the design (WSP would spread points along an axis mapping to one value)."""
        return self.kind != "fixed" and self.value is None

    @property
    def n_levels(self) -> int | None:
        """Number of distinct values the factor can take (None for a continuous factor)."""
        if self.levels is not None:
            return len(self.levels)
        if self.kind == "int":
            return int(self.high - self.low) + 1
        return None

    # --- unit <-> natural ---------------------------------------------------------------------
    def natural(self, u: np.ndarray) -> np.ndarray:
        """Map unit coordinates (any in [0, 1]) to natural values, quantising int and choice factors."""
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        if self.levels is not None:  # choice levels, or the explicit levels of a numeric factor
            k = len(self.levels)
            index = np.minimum((u * k).astype(np.int64), k - 1)
            dtype = {"choice": object, "int": np.int64}.get(self.kind, float)
            return np.asarray(self.levels, dtype=dtype)[index]
        if self.kind == "int":
            if self.scale == "log":
                raw = np.rint(log_map(self.low, self.high, u))
            else:
                raw = self.low + np.floor(u * (self.high - self.low + 1))
            return np.clip(raw, self.low, self.high).astype(np.int64)
        if self.scale == "log":
            return np.clip(portable.round_significant(log_map(self.low, self.high, u)), self.low, self.high)
        return np.clip(portable.round_significant(self.low + u * (self.high - self.low)), self.low, self.high)

    def unit_of(self, values: Any) -> np.ndarray:
        """Unit coordinates of natural values (choice level i of k -> (i + 0.5) / k)."""
        if self.kind == "choice":
            index = {level: i for i, level in enumerate(self.levels)}
            return np.array([(index[v] + 0.5) / len(self.levels) for v in values], dtype=float)
        v = np.asarray(values, dtype=float)
        if self.high == self.low:
            return np.full(v.shape, 0.5)
        if self.scale == "log":
            return np.asarray(portable.log(v / self.low)) / portable.log(self.high / self.low)
        return (v - self.low) / (self.high - self.low)

    def lattice_unit_of(self, values: Any) -> np.ndarray:
        """Unit coordinates of values on the lattice, from which `natural` gives the values back
        (an int factor with a wide range may need its coordinate moved by a lattice step or two)."""
        u = portable.lattice(self.unit_of(values))
        if self.kind != "int" or self.levels is not None:
            return u
        v = np.asarray(values)
        for _ in range(4):
            back = self.natural(u)
            low, high = back < v, back > v
            if not (low.any() or high.any()):
                break
            u = np.clip(u + portable.LATTICE_STEP * (low.astype(float) - high.astype(float)), 0.0, 1.0)
        return u

    def embed_width(self) -> int:
        return len(self.levels) if self.kind == "choice" else 1

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "kind": self.kind}
        for key in ("low", "high", "value"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.kind in ("float", "int"):
            out["scale"] = self.scale
        if self.levels is not None:
            out["levels"] = list(self.levels)
        if self.unit:
            out["unit"] = self.unit
        return out
