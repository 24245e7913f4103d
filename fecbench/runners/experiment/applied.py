"""What each run will get, as the network and the endpoints apply it: every shaped link's rate, one-way
delay and queue per direction, the loss model on each lossy link with its parameters, long-run loss and
mean burst, the workload, and the implementation's arguments and argv. Shown by `fecbench plan` and
`fecbench run --dry-run`, and recorded with every run (runs.applied_json), so that what ran can be read
back in one place.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from fecbench.runners.experiment import implied
from fecbench.runners.experiment.argv_template import render
from fecbench.runners.experiment.prepare import Prepared, loss_link_paths
from fecbench.runners.experiment.runs import Run

if TYPE_CHECKING:
    from fecbench.emulation.layout import Layout

#: Where a run's own files go, in argv shown before the run exists.
RUN_DIR = "<run dir>"


def links_at(prepared: Prepared, values: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per shaped link and direction: rate (Mbit/s, None: unlimited), the rate limiter's burst (bytes), one-way
    delay (ms), queue (its limit in queue_unit: packets or bytes, as written)."""
    from fecbench.emulation.layout import tbf_burst

    resolved = prepared.topology.resolve(values)
    return {link: {direction: {"rate_mbit": s.bw, "burst_bytes": tbf_burst(s.bw) if s.bw is not None else None,
                               "owd_ms": s.owd, "queue": s.queue, "queue_unit": s.queue_unit}
                   for direction, s in pair.items()} for link, pair in resolved.items()}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def loss_at(prepared: Prepared, values: dict[str, Any]) -> dict[str, Any]:
    """The loss section at a point: per lossy link (both directions or the listed ones), the model."""
    loss = prepared.design.loss
    out: dict[str, Any] = {"model": loss.model, "directions": loss.directions, "links": {}}
    if loss.model == "none":
        return out
    for link, path in loss_link_paths(prepared.design, prepared.topology).items():
        model = loss.model_at(values, path)
        out["links"][link] = {"params": {k: v for k, v in model.as_dict().items() if k != "model"},
                              "long_run_loss": model.loss_rate(), "mean_burst": _finite(model.mean_burst())}
    return out


def workload_of(prepared: Prepared, run: Run) -> dict[str, Any]:
    return {**prepared.design.workload.params(), "size": run.size}


def argv_of(prepared: Prepared, run: Run, layout: Layout | None = None) -> dict[str, list[str]]:
    """The server's and the client's argv as the runner renders them (addresses from the topology's
    layout, the run's port; its own folder shown as RUN_DIR)."""
    from fecbench.emulation.layout import make_layout

    design, entry = prepared.design, run.impl
    layout = layout or make_layout(prepared.topology, "x")
    workload = design.workload
    values: dict[str, Any] = {
        "dir": str(entry.descriptor.dir), "server_address": layout.server_address,
        "client_address": layout.client_addresses[0], "client_addresses": ",".join(layout.client_addresses),
        "server_addresses": ",".join(layout.server_addresses), "port": design.port + run.index % 1000,
        "workload": run.workload, "size": run.size if run.size is not None else "", "rate": workload.rate,
        "packets": workload.packets, "duration": f"{workload.duration:g}", "buffer": workload.buffer,
        "metrics_path": f"{RUN_DIR}/metrics.json", "download_path": f"{RUN_DIR}/download", "run_dir": RUN_DIR,
        "www_dir": f"{RUN_DIR}/www", "seed": run.loss_seed, "timeout_s": f"{design.timeout_s:g}",
        "page_file": workload.page_file(RUN_DIR), **workload.placeholders(run.size),
    }
    descriptor = entry.descriptor
    values.update({key: str(path or descriptor.resolve(getattr(descriptor, key)) or getattr(descriptor, key))
                   for key, path in descriptor.binaries().items()})
    arg_lists = descriptor.arg_lists(entry.args, values)
    out = {"server": render(descriptor.server_argv, values, arg_lists)}
    if run.workload in descriptor.client_argv:
        out["client"] = render(descriptor.client_argv[run.workload], values, arg_lists)
    return out


class Applier:
    """`applied` for every run of a campaign: the layout made once, links and losses once per point."""

    def __init__(self, prepared: Prepared) -> None:
        from fecbench.emulation.layout import make_layout

        self.prepared = prepared
        self.layout = make_layout(prepared.topology, "x")
        self.per_point: dict[int, tuple[Any, Any]] = {}

    def applied(self, run: Run) -> dict[str, Any]:
        """Everything a run gets, complete, in one JSON-able dict (recorded as runs.applied_json)."""
        prepared = self.prepared
        if run.point not in self.per_point:
            self.per_point[run.point] = (links_at(prepared, run.values), loss_at(prepared, run.values))
        links, loss = self.per_point[run.point]
        return {"point": run.point, "values": run.values, "links": links, "loss": loss,
                "workload": workload_of(prepared, run),
                "impl": {"name": run.impl.name, "label": run.label, "args": run.impl.args,
                         "argv": argv_of(prepared, run, self.layout)},
                "timeout_s": prepared.design.timeout_s, "loss_seed": run.loss_seed}


def describe_point(prepared: Prepared, point: int) -> list[str]:
    """Lines of text: what every run at a point gets from the network (links, losses) and the workload."""
    values = prepared.points[point]
    lines = [f"point {point}: " + ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                                            for k, v in values.items())]
    for link, pair in links_at(prepared, values).items():
        for direction, s in pair.items():
            rate = ("unlimited" if s["rate_mbit"] is None
                    else f"{s['rate_mbit']:g} Mbit/s (burst {s['burst_bytes']:,} bytes)")
            lines.append(f"  link {link} {direction}: rate {rate}, one-way delay {s['owd_ms']:g} ms, "
                         f"queue {s['queue']:,} {s['queue_unit']}")
    loss = loss_at(prepared, values)
    if loss["model"] == "none":
        lines.append("  losses: none (no dropper drops)")
    for link, model in loss["links"].items():
        params = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in model["params"].items())
        burst = "-" if model["mean_burst"] is None else f"{model['mean_burst']:.3g}"
        lines.append(f"  loss on {link} ({', '.join(loss['directions'])}): {loss['model']} {params}; long-run loss "
                     f"{model['long_run_loss']:.4g}, mean burst {burst} packets")
    workload = prepared.design.workload
    parts = [f"{k} {v}" for k, v in workload.params().items() if k != "kind"]
    if workload.sizes != [None]:
        parts.append("sizes " + ", ".join(f"{s} B" for s in workload.sizes if s is not None))
    lines.append(f"  workload: {workload.kind}" + (f" ({'; '.join(parts)})" if parts else ""))
    return lines + describe_schedule(prepared, point)


#: Events of a run's link schedule shown per run in `plan` and `run --dry-run`; repetitions shown when each
#: draws its own.
SCHEDULE_EVENTS, SCHEDULE_RUNS = 12, 3


def describe_schedule(prepared: Prepared, point: int) -> list[str]:
    """The link schedule as a point's runs get it: each event's time and what is in force after it, up to the
    design's time limit; once when every run gets the same, else per repetition (its own loss seed draws)."""
    from fecbench.emulation.schedule import describe_state, timeline

    schedule = prepared.design.schedule
    if schedule is None:
        return []
    base = {(link, d): s for link, pair in prepared.topology.resolve(prepared.points[point]).items()
            for d, s in pair.items()}
    seeds = sorted({(run.repetition, run.loss_seed) for run in prepared.runs if run.point == point})
    per_run = schedule.draws_per_run()
    lines = [f"  link schedule {schedule.file}: " + ("each repetition its own draws (random phase or outage "
             "lengths, from its loss seed)" if per_run else "the same for every run at this point")]
    for repetition, seed in seeds[:SCHEDULE_RUNS] if per_run else seeds[:1]:
        # One line per action, "both" where its directions end in the same state.
        events: list[tuple[Any, str, str]] = []
        for action, direction, state in timeline(schedule.actions(prepared.design.timeout_s, seed), base):
            text = describe_state(state)
            if events and events[-1][0] is action and events[-1][2] == text:
                events[-1] = (action, "both", text)
            else:
                events.append((action, direction, text))
        if per_run:
            lines.append(f"   repetition {repetition} (loss seed {seed}):")
        for action, direction, text in events[:SCHEDULE_EVENTS]:
            lines.append(f"    {action.at_s:8.3f} s {action.kind:<12} {action.link} {direction}: {text}")
        if len(events) > SCHEDULE_EVENTS:
            lines.append(f"    … {len(events) - SCHEDULE_EVENTS} more events up to timeout_s = "
                         f"{prepared.design.timeout_s:g} s")
    if per_run and len(seeds) > SCHEDULE_RUNS:
        lines.append(f"   … and {len(seeds) - SCHEDULE_RUNS} more repetitions, each its own draws")
    return lines


def describe_impls(prepared: Prepared) -> list[str]:
    """Each label's arguments and argv (as its first run at the first point renders them)."""
    lines = []
    first: dict[str, Run] = {}
    for run in sorted(prepared.runs, key=lambda r: r.index):
        first.setdefault(run.label, run)
    for label, run in first.items():
        lines.append(f"{label}: {run.impl.name} " + implied.shown(run.impl.descriptor.implies, run.impl.args))
        if not run.impl.supports(run.workload):
            lines.append(f"  does not declare workload {run.workload!r}: its runs are recorded unsupported")
            continue
        for role, argv in argv_of(prepared, run).items():
            lines.append(f"  {role}: {' '.join(argv)}")
    return lines
