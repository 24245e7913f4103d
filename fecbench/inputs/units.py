"""Dimensions and units of everything a design can set.

Every quantity has a dimension (time, rate, size, probability, count, packets) and a default unit: the
unit a number means when none is written. A factor's `unit` names the unit its values are written in;
`convert` turns them into the unit of the place that reads them, and refuses a unit of another
dimension. Sizes: kB = 1000 B and KiB = 1024 B (decimal as in the seed papers, binary when asked).
"""

from __future__ import annotations

from dataclasses import dataclass

#: unit name -> (dimension, value of one unit in the dimension's base unit: s, bit/s, B, 1, 1, packet)
UNITS: dict[str, tuple[str, float]] = {
    "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6), "µs": ("time", 1e-6),
    "min": ("time", 60.0),
    "bit/s": ("rate", 1.0), "kbit/s": ("rate", 1e3), "Mbit/s": ("rate", 1e6), "Gbit/s": ("rate", 1e9),
    "bps": ("rate", 1.0), "kbps": ("rate", 1e3), "Mbps": ("rate", 1e6), "Gbps": ("rate", 1e9),
    "B": ("size", 1.0), "kB": ("size", 1e3), "KB": ("size", 1e3), "MB": ("size", 1e6), "GB": ("size", 1e9),
    "KiB": ("size", 1024.0), "MiB": ("size", 2.0**20), "GiB": ("size", 2.0**30),
    "%": ("probability", 0.01), "1": ("probability", 1.0),
    "packets": ("packets", 1.0), "packet": ("packets", 1.0), "pkt": ("packets", 1.0),
}

#: The dimensions and the units each accepts (for messages and the docs' table).
DIMENSIONS = ("time", "rate", "size", "probability", "count", "packets")


@dataclass(frozen=True)
class Quantity:
    """What one place of a design reads: its dimension, the unit a bare number means there, and the values
    it accepts (in that unit)."""
    dimension: str
    unit: str                 # default unit ("" for probabilities and counts: plain numbers)
    low: float | None = None  # the least value accepted (None: any)
    above: bool = False       # the least value itself is refused (a rate must be > 0)
    high: float | None = None

    def describe(self) -> str:
        return f"{self.dimension} ({self.unit})" if self.unit else self.dimension

    def accepts(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.above and value == self.low)):
            return False
        return self.high is None or value <= self.high

    def range_text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.high is not None:
            return f"[{self.low:g}, {self.high:g}]{unit}"
        return f"{'>' if self.above else '≥'} {self.low:g}{unit}" if self.low is not None else "any value"


def units_of(dimension: str) -> list[str]:
    """The unit names of a dimension (a count has none: it is a plain number)."""
    return [name for name, (dim, _) in UNITS.items() if dim == dimension]


def dimension_of(unit: str) -> str | None:
    found = UNITS.get(unit)
    return found[0] if found else None


def factor(unit: str, quantity: Quantity) -> float:
    """How many of `quantity`'s default unit one `unit` is (1.0 for an empty unit).
    Raises ValueError naming the problem when the unit is unknown or of another dimension."""
    if unit in ("", quantity.unit):
        return 1.0
    found = UNITS.get(unit)
    if found is None:
        known = ", ".join(units_of(quantity.dimension)) or "none: a plain number"
        raise ValueError(f"unknown unit {unit!r} (units of {quantity.dimension}: {known})")
    dimension, scale = found
    if dimension != quantity.dimension:
        known = ", ".join(units_of(quantity.dimension)) or "none: a plain number"
        raise ValueError(f"unit {unit!r} is a {dimension}, but this is read as {quantity.describe()} "
                         f"(units of {quantity.dimension}: {known})")
    base = UNITS[quantity.unit][1] if quantity.unit else 1.0
    return scale / base
