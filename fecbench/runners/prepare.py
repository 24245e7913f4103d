"""Prepare a campaign: parse the design, load the topology, make the plan, check every point against
the topology and the loss section, and enumerate the runs. Needs neither root nor a network, so every
mistake in a design is reported before anything runs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench.errors import SpecError, UserError
from fecbench.runners.design import Design, parse_design
from fecbench.runners.runs import Run, enumerate_runs, estimate_seconds
from fecbench.specs import load_toml


@dataclass
class Prepared:
    design: Design
    topology: Any
    topology_text: str
    space: Any
    plan: Any
    points: dict[int, dict[str, Any]]
    factor_types: dict[str, str]
    experiment_hash: str
    runs: list[Run]
    rtt_ms: dict[int, float] = field(default_factory=dict)       # per point, path 1
    rate_mbit: dict[int, float | None] = field(default_factory=dict)

    def estimate(self, run: Run) -> float:
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
        return estimate_seconds(probe, self.design)


def path_of(topology: Any, link: str) -> int | None:
    """The 1-based path a link belongs to, or None if it is on no path or on several."""
    paths = [i + 1 for i in range(topology.paths) if any(spec.id == link for spec, _ in topology.path_links(i))]
    return paths[0] if len(paths) == 1 else None


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def prepare(design_path: str | Path) -> Prepared:
    """Validate the whole design (implementations, planner, topology, loss) and enumerate its runs."""
    from fecbench.planner import make_plan, parse_space
    from fecbench.topologies import load_topology

    design = parse_design(design_path)
    topology = load_topology(design.topology_path)
    topology_text = Path(design.topology_path).read_text()
    space = parse_space(design.space, paths=topology.paths)
    for entry in design.impls:
        entry.descriptor.check_paths(entry.args, topology.paths, design.path, f"impl.{entry.label}.args")
    from fecbench.runners.flows import check_flows

    check_flows(design.flows, design, {f.name: f for f in space.factors}, topology.paths)
    plan = make_plan(space, design.seed)
    frame = plan.points
    factor_names = list(space.factor_names)

    factor_types: dict[str, str] = {}
    for name in frame.columns:
        kind = frame[name].dtype.kind
        factor_types[str(name)] = "REAL" if kind in "biuf" else "TEXT"
    points = {int(idx): {str(k): _plain(v) for k, v in row.items()} for idx, row in frame.iterrows()}

    # Every factor the topology and the loss section use must come from the space (or a topology default).
    defaults = getattr(topology, "defaults", {}) or {}
    for name in sorted(topology.factors()):
        if name not in factor_names and topology.shared.get(name) not in factor_names and name not in defaults:
            raise SpecError(design.path, "space.factors",
                            f"the topology {design.topology_path} uses factor {name!r}, which the space does "
                            "not define", factor_names)
    lossy = topology.lossy_links()
    links = design.loss.links if design.loss.links is not None else lossy
    for link in links:
        if link not in lossy:
            raise SpecError(design.path, "loss.links", f"no lossy link {link!r} in {design.topology_path} "
                            "(droppers sit on links marked loss = true)", lossy)
    if design.loss.model != "none" and not links:
        raise SpecError(design.path, "loss.model", f"the topology {design.topology_path} has no lossy link "
                        "(mark one with loss = true, or list links in loss.links)")
    link_paths = {link: path_of(topology, link) for link in links}
    for link, path in link_paths.items():
        if design.loss.per_path() and path is None:
            raise SpecError(design.path, "loss", f"'{{path}}' is used but link {link!r} is not on exactly one path")
        for key, name in design.loss.factor_refs(path).items():
            if name not in factor_names:
                raise SpecError(design.path, f"loss.{key}", f"unknown factor {name!r}", factor_names)

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

    # The parsed topology, not its text: editing a comment must not orphan the results already obtained.
    experiment_hash = design.experiment_hash(json.dumps(load_toml(design.topology_path), sort_keys=True,
                                                        default=str))
    runs = enumerate_runs(design, points, experiment_hash)
    return Prepared(design=design, topology=topology, topology_text=topology_text, space=space, plan=plan,
                    points=points, factor_types=factor_types, experiment_hash=experiment_hash, runs=runs,
                    rtt_ms=rtt_ms, rate_mbit=rate_mbit)
