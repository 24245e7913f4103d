"""Prepare a campaign: parse the design, load the topology, make the plan, check every point against
the topology and the loss section, and enumerate the runs. Needs neither root nor a network, so every
mistake in a design is reported before anything runs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.emulation.spec import Topology
from fecbench.inputs.errors import SpecError, UserError, did_you_mean
from fecbench.inputs.specs import load_toml
from fecbench.runners.experiment.design import Design, parse_design
from fecbench.runners.experiment.runs import Run, enumerate_runs, estimate_seconds

if TYPE_CHECKING:   # the planner loads numpy and scipy: only when a plan is made
    from fecbench.planner.plan import Plan
    from fecbench.planner.space import Space


@dataclass
class Prepared:
    design: Design
    topology: Topology
    topology_text: str
    space: Space
    plan: Plan
    points: dict[int, dict[str, Any]]
    factor_types: dict[str, str]
    experiment_hash: str
    runs: list[Run]
    rtt_ms: dict[int, float] = field(default_factory=dict)       # per point, path 1
    rate_mbit: dict[int, float | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)             # what a user should know before running
    repetitions_as: int | None = None   # the repetitions the runs are keyed with, when not the design's (rekey)

    def rekey(self, repetitions_as: int | None) -> None:
        """Key the runs as a campaign first keyed them with `repetitions_as` repetitions (None: the design's
        own; 0: a design that wrote none; `Design.experiment_hash`): same runs, loss seeds and order."""
        self.repetitions_as = repetitions_as
        self.experiment_hash = self.design.experiment_hash(topology_key(self.design), repetitions_as)
        self.runs = enumerate_runs(self.design, self.points, self.experiment_hash)

    def estimate(self, run: Run, capped: bool = True) -> float:
        """The duration model's estimate of a run (at most its time limit unless not `capped`)."""
        if not run.impl.supports(run.workload):
            return 0.0  # recorded `unsupported` without running
        rtt = self.rtt_ms.get(run.point)
        rate = self.rate_mbit.get(run.point)
        values = dict(run.values)
        if rtt is not None:
            values = {**values, "owd": rtt / 2}
        if rate:
            values["bw"] = rate
        probe = Run(**{**run.__dict__, "values": values})
        return estimate_seconds(probe, self.design, capped=capped)


def path_of(topology: Topology, link: str) -> int | None:
    """The 1-based path a link belongs to, or None if it is on no path or on several."""
    paths = [i + 1 for i in range(topology.paths) if any(spec.id == link for spec, _ in topology.path_links(i))]
    return paths[0] if len(paths) == 1 else None


def _plain(value: object) -> object:
    return value.item() if hasattr(value, "item") else value


def unbuilt(design: Design) -> list[str]:
    """What the design's implementations (competing flows' too) lack of their binaries, each with the
    command that builds it."""
    descriptors = {str(e.descriptor.path): e.descriptor for e in design.impls}
    descriptors.update({str(s.descriptor.path): s.descriptor for s in design.flows.specs if s.descriptor})
    return [m for d in descriptors.values() if (m := d.missing_binaries()) is not None]


def prepare(design_path: str | Path, *, require_built: bool = True) -> Prepared:
    """Validate the whole design (implementations, planner, topology, loss, what reads each factor and in
    which unit) and enumerate its runs. `require_built=False` (a dry run): an implementation that is not
    built is a warning in `Prepared.warnings`, not an error."""
    from fecbench.emulation import load_topology
    from fecbench.planner import parse_space
    from fecbench.runners.experiment.factor_uses import check_and_scale, scale_value, scaled_factor
    from fecbench.runners.experiment.flows import check_flows

    design = parse_design(design_path)
    topology = load_topology(design.topology_path)
    topology_text = Path(design.topology_path).read_text()
    space = parse_space(design.space, paths=topology.paths)
    for index, entry in enumerate(design.impls):
        entry.descriptor.check_paths(entry.args, topology.paths, design.path, f"impl[{index}].args")
    factor_names = list(space.factor_names)
    link_paths = loss_link_paths(design, topology)
    _check_references(design, topology, factor_names)
    scales = check_and_scale(design, topology, space)   # every factor read somewhere, in a unit that fits
    check_flows(design.flows, design, {f.name: scaled_factor(f, scales.get(f.name, 1.0)) for f in space.factors},
                topology.paths)
    from fecbench.planner import make_plan  # here: a design refused above never imports SciPy (~1 s a process)

    plan = make_plan(space, design.seed)
    frame = plan.points

    factor_types: dict[str, str] = {}
    for name in frame.columns:
        kind = frame[name].dtype.kind
        factor_types[str(name)] = "REAL" if kind in "biuf" else "TEXT"
    # The points in the units their readers expect (owd written in s: ms here), as every run applies them.
    points = {int(idx): {str(k): scale_value(_plain(v), scales.get(str(k), 1.0)) for k, v in row.items()}
              for idx, row in frame.iterrows()}
    warnings = unbuilt(design)
    if warnings and require_built:
        raise SpecError(design.path, "impl", "; ".join(warnings))

    rtt_ms: dict[int, float] = {}
    rate_mbit: dict[int, float | None] = {}
    for point, values in points.items():
        try:
            resolved = topology.resolve(values)
        except UserError as exc:
            raise SpecError(design.path, f"point {point}", f"the topology rejects this point: {exc}") from None
        for path in set(link_paths.values()):
            for name, value in design.loss.values(values, path).items():
                if not 0.0 <= value <= 1.0 or math.isnan(value):
                    raise SpecError(design.path, f"loss.{name}",
                                    f"point {point}: probability {value!r} outside [0, 1]")
        rtt_ms[point] = topology.configured_rtt(0, resolved)
        rate_mbit[point] = topology.path_rate(0, resolved)

    experiment_hash = design.experiment_hash(topology_key(design))
    runs = enumerate_runs(design, points, experiment_hash)
    return Prepared(design=design, topology=topology, topology_text=topology_text, space=space, plan=plan,
                    points=points, factor_types=factor_types, experiment_hash=experiment_hash, runs=runs,
                    rtt_ms=rtt_ms, rate_mbit=rate_mbit, warnings=warnings)


def topology_key(design: Design) -> str:
    """The topology as the experiment hash reads it: the parsed spec, not its text (editing a comment must
    not orphan the results already obtained)."""
    return json.dumps(load_toml(design.topology_path), sort_keys=True, default=str)


def loss_link_paths(design: Design, topology: Topology) -> dict[str, int | None]:
    """The links the loss section puts droppers on -> the path each is on (checked against the topology)."""
    lossy = topology.lossy_links()
    links = design.loss.links if design.loss.links is not None else lossy
    for link in links:
        if link not in lossy:
            raise SpecError(design.path, "loss.links", f"no lossy link {link!r} in {design.topology_path} "
                            f"(droppers sit on links marked loss = true){did_you_mean(link, lossy)}", lossy)
    if design.loss.model != "none" and not links:
        raise SpecError(design.path, "loss.model", f"the topology {design.topology_path} has no lossy link "
                        "(mark one with loss = true, or list links in loss.links)")
    link_paths = {link: path_of(topology, link) for link in links}
    for link, path in link_paths.items():
        if design.loss.per_path() and path is None:
            raise SpecError(design.path, "loss", f"'{{path}}' is used but link {link!r} is not on exactly one path")
    return link_paths


def _check_references(design: Design, topology: Topology, factor_names: list[str]) -> None:
    """Every factor the topology, the loss section and the flows name must come from the space (or, for
    the topology, have a default there)."""
    defaults = getattr(topology, "defaults", {}) or {}
    for name in sorted(topology.factors()):
        if name not in factor_names and topology.shared.get(name) not in factor_names and name not in defaults:
            raise SpecError(design.path, "space.factors",
                            f"the topology {design.topology_path} uses factor {name!r}, which the space does "
                            "not define", factor_names)
    paths = range(1, topology.paths + 1) if design.loss.per_path() else [None]
    for path in paths:
        for key, name in design.loss.factor_refs(path).items():
            if name not in factor_names:
                raise SpecError(design.path, f"loss.{key}", f"unknown factor {name!r}"
                                f"{did_you_mean(name, factor_names)}", factor_names)
    for ref in sorted(design.flows.factor_refs()) if design.flows else []:
        if ref not in factor_names:
            raise SpecError(design.path, "flows", f"unknown factor {ref!r}{did_you_mean(ref, factor_names)}",
                            factor_names)
