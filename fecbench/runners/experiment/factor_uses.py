"""What reads each factor of a design, in which unit, and the planned values converted to it.

A factor is read by the topology (a link's rate, one-way delay or queue, per direction), the loss
section (a model's probabilities) or the competing flows (a start time, a number of copies, the flows
selected). A factor nothing reads is a mistake (a typo'd name would otherwise plan, run and export
values no run used), and so is a `unit` of another dimension than every place reading it: both are
refused naming the factor, its line and the nearest valid names. Values written in another unit of
the right dimension (owd in s, bw in kbit/s, p in %) are converted to the unit of the place that reads
them, so the points every run, the database and the analyses see are in the documented default units.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

import numpy as np

from fecbench.emulation.spec import Topology, is_queue_literal
from fecbench.inputs.errors import SpecError
from fecbench.inputs.units import Quantity, factor
from fecbench.planner import portable
from fecbench.planner.space import Factor, Space
from fecbench.runners.experiment.design import Design

#: What each place of a design reads (the docs' table of parameters lists the same).
LINK_QUANTITIES = {"bw": Quantity("rate", "Mbit/s", low=0, above=True), "owd": Quantity("time", "ms", low=0),
                   "queue": Quantity("packets", "packets", low=1)}
PROBABILITY = Quantity("probability", "", low=0, high=1)
START = Quantity("time", "s")
COUNT = Quantity("count", "", low=1)
FLOW_NAMES = Quantity("flow names", "")


#: Names people write for the topologies' factors (for "did you mean" when spelling is no guide).
SYNONYMS = {"delay": "owd", "latency": "owd", "rtt": "owd", "one_way_delay": "owd", "bandwidth": "bw",
            "rate": "bw", "capacity": "bw", "throughput": "bw", "loss": "p", "loss_rate": "p", "plr": "p",
            "buffer": "queue", "queue_size": "queue", "qlen": "queue"}


@dataclass(frozen=True)
class Use:
    where: str              # "link bottleneck forward owd", "loss.p", "flows.start_s"
    quantity: Quantity


def uses(design: Design, topology: Topology, space: Space) -> dict[str, list[Use]]:
    """Factor name (after per-path expansion) -> the places that read it."""
    found: dict[str, list[Use]] = {f.name: [] for f in space.factors}

    def add(name: str, use: Use) -> None:
        if name in found:
            found[name].append(use)
        elif topology.shared.get(name) in found:   # "owd" given for every path's "owd_i"
            found[topology.shared[name]].append(use)

    for link in topology.links:
        for direction in ("forward", "reverse"):
            shaping = getattr(link, direction)
            for key, quantity in LINK_QUANTITIES.items():
                value = getattr(shaping, key)
                if isinstance(value, str) and not is_queue_literal(value):
                    add(value, Use(f"link {link.id} {direction} {key}", quantity))
    paths = range(1, topology.paths + 1) if design.loss.per_path() else [None]
    for path in paths:
        for key, name in design.loss.factor_refs(path).items():
            add(name, Use(f"loss.{key}", PROBABILITY))
    flows = design.flows
    if flows:
        if flows.select is not None:
            add(flows.select, Use("flows.select", FLOW_NAMES))
        if isinstance(flows.copies, str):
            add(flows.copies, Use("flows.copies", COUNT))
        if isinstance(flows.start_s, str):
            add(flows.start_s, Use("flows.start_s", START))
        for spec in flows.specs:
            if isinstance(spec.start_s, str):
                add(spec.start_s, Use(f"{spec.key}.start_s", START))
    return found


def readable_names(design: Design, topology: Topology) -> list[str]:
    """Every factor name some part of a run would read (for "did you mean")."""
    names = set(topology.factors()) | set(topology.shared.values())
    for path in range(1, topology.paths + 1):
        names |= set(design.loss.factor_refs(path).values())
    names |= set(design.flows.factor_refs()) if design.flows else set()
    return sorted(names)


def per_path_twice(base: str, paths: int, valid: list[str]) -> str:
    """`per_path = true` on a factor named for one path already (`owd_2`): it made `owd_2_1`…, which nothing reads."""
    made = ", ".join(f"{base}_{p}" for p in range(1, paths + 1))
    stem = base.rstrip("0123456789").removesuffix("_")
    every = all(f"{stem}_{p}" in valid for p in range(1, paths + 1))
    whole = (f"; or name it {stem!r} with per_path = true for every path's ("
             + ", ".join(f"{stem}_{p}" for p in range(1, paths + 1)) + ")") if every else ""
    return (f"{base!r} is already one path's factor, and per_path = true makes one factor per path of it ({made}), "
            f"which nothing reads: write {base!r} without per_path{whole}")


def _factor_error(design: Design, f: Factor, problem: str, allowed: object = None) -> SpecError:
    return SpecError(design.path, f"space.factors.{f.base}", problem, allowed)


def check_and_scale(design: Design, topology: Topology, space: Space) -> dict[str, float]:
    """Refuse factors nothing reads and units that do not fit; factor name -> multiplier to the unit of
    the places reading it (only factors whose multiplier is not 1)."""
    found = uses(design, topology, space)
    valid = readable_names(design, topology)
    scales: dict[str, float] = {}
    for f in space.factors:
        readers = found[f.name]
        if not readers and f.path is not None and f.base in valid:
            raise _factor_error(design, f, per_path_twice(f.base, topology.paths, valid))
        if not readers:
            synonym = SYNONYMS.get(f.base.lower().rstrip("_0123456789"))
            close = [synonym] if synonym in valid else difflib.get_close_matches(f.base, valid, n=2, cutoff=0.5)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise _factor_error(design, f, f"unknown factor {f.base!r}: nothing reads it (not the topology "
                                f"{topology.file}, the loss section or the flows){hint}", valid or None)
        if f.kind == "choice" and any(isinstance(v, str) for v in f.levels or ()):
            if f.unit:
                raise _factor_error(design, f, f"unit {f.unit!r} on a factor whose levels are names")
            continue
        multipliers = {}
        for use in readers:
            if use.quantity is FLOW_NAMES:
                raise _factor_error(design, f, f"{use.where} needs levels that name flows, got numbers")
            if use.quantity.dimension == "packets" and f.unit and f.unit not in ("packets", "packet", "pkt"):
                raise _factor_error(design, f, f"{use.where} is a queue in packets; a queue in bytes or time is "
                                    "written as strings, e.g. levels = [\"30kB\", \"50ms\", \"bdp\"] (no unit)")
            try:
                multipliers[use.where] = factor(f.unit, use.quantity)
            except ValueError as exc:
                raise _factor_error(design, f, f"read by {use.where}: {exc}") from None
        distinct = set(multipliers.values())
        if len(distinct) > 1:
            listed = ", ".join(f"{where} ({u.quantity.describe()})" for where, u in
                               zip(multipliers, readers, strict=True))
            raise _factor_error(design, f, f"read in different units by {listed}: use one factor for each")
        scale = distinct.pop()
        if scale != 1.0:
            scales[f.name] = scale
        _check_range(design, f, scale, readers)
    return scales


def _check_range(design: Design, f: Factor, scale: float, readers: list[Use]) -> None:
    """The values a factor can take (bounds, levels, value), in its readers' unit, against what they accept."""
    values = [v for v in (f.low, f.high, f.value, *(f.levels or ())) if isinstance(v, (int, float))
              and not isinstance(v, bool)]
    if not values:
        return
    low, high = min(values) * scale, max(values) * scale
    for use in readers:
        bad = [v for v in (low, high) if not use.quantity.accepts(v)]
        if bad:
            raise _factor_error(design, f, f"read by {use.where} as {use.quantity.describe()}: its values "
                                f"{low:g}..{high:g} fall outside {use.quantity.range_text()}")


def scale_value(value: float | int | str, scale: float) -> float | int | str:
    """A planned value in the unit its readers expect (9 significant digits, as the planner's values)."""
    if isinstance(value, str) or scale == 1.0:
        return value
    scaled = float(portable.round_significant(np.asarray([float(value) * scale]))[0])
    return int(scaled) if isinstance(value, (int, np.integer)) and scaled == int(scaled) else scaled


def scaled_factor(f: Factor, scale: float) -> Factor:
    """The factor with its bounds and levels in its readers' unit (for checks against those units)."""
    if scale == 1.0:
        return f
    levels = tuple(scale_value(v, scale) for v in f.levels) if f.levels is not None else None
    return dataclasses.replace(f, low=None if f.low is None else scale_value(f.low, scale),
                               high=None if f.high is None else scale_value(f.high, scale), levels=levels,
                               value=None if f.value is None else scale_value(f.value, scale))
