"""Design files: parsing and whole-file validation before anything runs.

```toml
[design]
name = "smoke"                          # default: the file's stem; the database is results/<name>.sqlite
topology = "topologies/single.toml"     # relative to the design file, then the current folder, then the checkout
repetitions = 1
seed = 1                                # design seed: plan and loss seeds (common random numbers) derive from it
timeout_s = 60                          # per process (server and client), per run
order = "random"                        # random (seeded by `seed`) | sequential
fidelity = "per-point"                  # per-point | per-run | off: RTT check of the network
fidelity_rate = false                   # also probe each path's rate (~1 s of UDP): must reach 85 %
impl_dirs = []                          # extra folders holding <name>/impl.toml (relative to the design file)
port = 4433                             # first server port; each run uses port + (its index % 1000)
verdict_log = false                     # keep the dropper's per-packet verdict log of every run
endpoint_bound_ms = 2.0                 # optional: a run whose endpoints' p99 wake-up latency exceeds it is
                                        # flagged `fidelity` (default FECBENCH_ENDPOINT_BOUND_MS, else 2 ms;
                                        # fecbench/timekeeping/endpoint_timing.py)
schedule = "topologies/schedules/starlink-handover.toml"  # optional: a link schedule (time-varying links,
                                        # fecbench/emulation/schedule.py); time 0 = each run's client start

[space]  …                              # the planner's input (fecbench.planner)

[loss]                                  # on every lossy link of the topology (or `links`), both directions
model = "gilbert-elliott"               # none | uniform | gilbert-elliott | trace
p = "p"                                 # a factor name or a number; ge: p, r, k (default 1), h (default 0);
                                        # "p_{path}": the factor of the lossy link's path (multipath)
r = "r"
k = "k"
h = "h"
directions = ["forward", "reverse"]
# trace: file = "traces/x.txt" (packet indices to drop)

[workload]
kind = "download"                       # download | upload | reqresp | messages | page
sizes = ["1kB", "50kB"]                 # download, upload, reqresp: kB = 1000 B, KiB = 1024 B
# reqresp: exchanges = 10, request = "size", response = "100B" ("size": the run's size)
# messages: rate = 30, packets = 8, duration = 25, buffer = 4
# page: page = "corpus:nghttp2.org" (or a HAR / Epload / fecbench-page-1 file; pages/README.md), no sizes

[[impl]]
name = "fecq"                           # a descriptor in quic-impls/<name>/impl.toml
label = "quic-fec"                      # unique per design; what analyses compare (default: name)
args = { fec = "rs:30,20" }             # declared by the descriptor's [args]
baseline = "quic"                       # optional: the label it is compared with (default: the label of the
                                        # same implementation that differs only in FEC)
```
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.dropper.models import MODELS, model_class
from fecbench.host.paths import REPO_ROOT
from fecbench.inputs.directions import LINK_DIRECTIONS
from fecbench.inputs.errors import SpecError, UserError, did_you_mean
from fecbench.inputs.specs import DEFAULT_TIMEOUT_S, Section, load_toml, parse_size, spec_hash, tomllib
from fecbench.pages import corpus
from fecbench.pages.graph import PageError, PageGraph
from fecbench.runners.experiment import implied
from fecbench.runners.experiment.capture import CapturePolicy, parse_capture
from fecbench.runners.experiment.descriptor import Descriptor, find_descriptor
from fecbench.runners.experiment.flows import Flows, parse_flows

if TYPE_CHECKING:
    from fecbench.dropper import LossModel
    from fecbench.emulation.schedule import Schedule

LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
ORDERS = ("random", "sequential")
FIDELITY_MODES = ("per-point", "per-run", "off")


@dataclass
class LossSpec:
    model: str
    params: dict[str, float | str]       # a number, or the name of a factor
    directions: list[str]
    links: list[str] | None               # None: the topology's lossy links
    trace_file: Path | None = None
    # Frames shorter than this pass the dropper without an index (ACK-only and probe packets do not shift which
    # data packet the n-th verdict hits: designs/README.md, "Twins"); 0, the default: every packet takes one.
    min_bytes: int = 0

    def factor_refs(self, path: int | None = None) -> dict[str, str]:
        """Parameter -> factor name; "{path}" in a name is the lossy link's path (p = "p_{path}")."""
        refs = {}
        for name, value in self.params.items():
            if isinstance(value, str):
                refs[name] = value.replace("{path}", str(path)) if path is not None else value
        return refs

    def per_path(self) -> bool:
        return any(isinstance(v, str) and "{path}" in v for v in self.params.values())

    def values(self, point: dict[str, Any], path: int | None = None) -> dict[str, float]:
        refs = self.factor_refs(path)
        return {name: float(point[refs[name]]) if name in refs else float(value)
                for name, value in self.params.items()}

    def model_at(self, point: dict[str, Any], path: int | None = None) -> LossModel:
        """The dropper's loss model (fecbench.dropper.LossModel) at a point's values, on a link of `path`."""
        return model_class(self.model).from_params(self.values(point, path), file=self.trace_file)


WORKLOAD_KINDS = ("download", "upload", "reqresp", "messages", "page")


@dataclass
class Workload:
    kind: str
    sizes: list[int | None]               # [None] for messages
    rate: int = 30
    packets: int = 8
    duration: float = 25.0
    buffer: int = 4
    exchanges: int = 10                   # reqresp: sequential exchanges per run
    request: int | None = None            # reqresp: bytes per request/response; None = the run's size
    response: int | None = None
    page: str = ""                        # page: the design's value (corpus:NAME or a file)
    page_graph: PageGraph | None = None   # page: the graph it names (its bytes are the run's size)

    def params(self) -> dict[str, Any]:
        if self.kind in ("download", "upload"):
            return {"kind": self.kind}
        if self.kind == "page" and self.page_graph is not None:
            return {"kind": self.kind, "page": self.page, "page_sha256": self.page_graph.digest()}
        if self.kind == "reqresp":
            return {"kind": self.kind, "exchanges": self.exchanges,
                    "request": "size" if self.request is None else self.request,
                    "response": "size" if self.response is None else self.response}
        return {"kind": self.kind, "rate": self.rate, "packets": self.packets, "duration": self.duration,
                "buffer": self.buffer}

    def exchange_sizes(self, size: int | None) -> tuple[int, int]:
        """reqresp: (request, response) bytes of a run of this size."""
        return (size or 0) if self.request is None else self.request, \
            (size or 0) if self.response is None else self.response

    def page_file(self, run_dir: Path | str) -> str:
        """page: where a run's graph is written for its client ({page_file}, fecbench-page-1); "" otherwise."""
        return str(Path(run_dir) / "page.json") if self.kind == "page" else ""

    def placeholders(self, size: int | None) -> dict[str, Any]:
        """A run's {exchanges}, {request}, {response} (bytes) for reqresp; "" for other workloads."""
        if self.kind != "reqresp":
            return {"exchanges": "", "request": "", "response": ""}
        request, response = self.exchange_sizes(size)
        return {"exchanges": self.exchanges, "request": request, "response": response}


@dataclass
class ImplEntry:
    name: str
    label: str
    args: dict[str, Any]                  # validated, with the descriptor's defaults filled in
    descriptor: Descriptor
    baseline: str | None = None           # the label it is compared with (None: its own stack without FEC)

    def supports(self, workload: str) -> bool:
        """Whether the implementation declares the workload; its runs are `unsupported` otherwise."""
        return workload in self.descriptor.workloads


@dataclass
class Design:
    path: Path
    text: str
    data: dict[str, Any]
    name: str
    topology_path: Path
    repetitions: int
    seed: int
    timeout_s: float
    order: str
    fidelity: str
    fidelity_rate: bool
    port: int
    verdict_log: bool
    impl_dirs: list[Path]
    space: Section
    loss: LossSpec
    workload: Workload
    impls: list[ImplEntry] = field(default_factory=list)
    schedule: Schedule | None = None      # a link schedule (fecbench.emulation.schedule)
    endpoint_bound_ms: float | None = None  # None: FECBENCH_ENDPOINT_BOUND_MS, else the default
    flows: Flows = field(default_factory=lambda: Flows([]))  # competing flows (fecbench.runners.experiment.flows)
    capture: CapturePolicy = field(default_factory=CapturePolicy)  # what runs keep to explain themselves

    @property
    def hash(self) -> str:
        """Hash of the design file's text (recorded with the campaign)."""
        return spec_hash(self.text)

    def experiment_hash(self, topology_text: str, repetitions_as: int | None = None) -> str:
        """Hash of what defines the experiment a run belongs to: everything but the implementation list
        and run-control settings, plus the topology spec. Adding an implementation or changing the
        timeout keeps the keys (and the results) of the runs already done.

        `repetitions` is hashed as the design writes it, unless `repetitions_as` says what a campaign's
        runs were first keyed with (its design then wrote another number; 0: it wrote none):
        `executors.selection.continue_recorded` finds it in the database, so that a campaign given more
        (or fewer) repetitions keeps the keys of the runs it holds and adds only the new repetitions."""
        design = {k: v for k, v in self.data.get("design", {}).items()
                  if k not in ("timeout_s", "order", "fidelity", "fidelity_rate", "port", "impl_dirs",
                               "verdict_log", "endpoint_bound_ms")}
        if repetitions_as is not None:
            design.pop("repetitions", None)
            if repetitions_as:
                design["repetitions"] = repetitions_as
        content = {"design": design, "space": self.data.get("space"), "loss": self.data.get("loss"),
                   "workload": self.workload.params(), "topology": topology_text}
        if self.schedule is not None:  # only then: the keys of designs without a schedule stay as they were
            content["schedule"] = self.schedule.canonical()
        if self.flows:  # likewise
            content["flows"] = self.flows.canonical()
        return spec_hash(json.dumps(content, sort_keys=True, default=str))

    def settings(self) -> dict[str, Any]:
        """The design's settings after defaults, as the campaign records them (campaigns.settings_json): what
        analyses need (the time limit, the bounds) without parsing the design again."""
        return {"timeout_s": self.timeout_s, "repetitions": self.repetitions, "seed": self.seed,
                "order": self.order, "fidelity": self.fidelity, "fidelity_rate": self.fidelity_rate,
                "port": self.port, "verdict_log": self.verdict_log, "endpoint_bound_ms": self.endpoint_bound_ms,
                "topology": str(self.topology_path), "workload": self.workload.params(),
                "loss": {"model": self.loss.model, "params": self.loss.params, "directions": self.loss.directions,
                         "links": self.loss.links},
                "impls": {e.label: {"name": e.name, "args": e.args, "fec_args": e.descriptor.fec_args,
                                    **({"baseline": e.baseline} if e.baseline else {}),
                                    **({"implied": made} if (made := implied.implied(e.descriptor.implies, e.args))
                                       else {}),
                                    **({"unavailable": e.descriptor.unavailable_metrics}
                                       if e.descriptor.unavailable_metrics else {})} for e in self.impls},
                "flows": self.flows.canonical() if self.flows else None, "capture": self.capture.settings(),
                "schedule": self.schedule.canonical() if self.schedule is not None else None}

    def default_db(self) -> Path:
        return Path("results") / f"{self.name}.sqlite"


def resolve_path(value: str, design_path: Path) -> Path:
    """A path written in a design: relative to the design file, else the current folder, else the checkout."""
    candidate = Path(value)
    if candidate.is_absolute():
        return candidate
    for base in (design_path.parent, Path.cwd(), REPO_ROOT):
        if (base / candidate).exists():
            return (base / candidate).resolve()
    return (design_path.parent / candidate).resolve()


def _parse_loss(section: Section, file: Path) -> LossSpec:
    model = section.get("model", str, "none", choices=list(MODELS))
    loss_model = MODELS[model]
    params: dict[str, float | str] = {}
    for parameter in loss_model.parameters:
        value = section.get(parameter.name, (str, float), parameter.default)
        if value is None:
            raise section.error(parameter.name, f"missing required key for model {model!r} ({parameter.meaning})")
        if not isinstance(value, str):  # a number here, a factor's name otherwise (checked at each point)
            try:
                parameter.check(value)
            except UserError as exc:
                raise section.error(parameter.name, str(exc)) from None
        params[parameter.name] = value
    directions = section.get("directions", list, list(LINK_DIRECTIONS))
    for d in directions:
        if d not in LINK_DIRECTIONS:
            raise section.error("directions", f"unknown direction {d!r}", LINK_DIRECTIONS)
    links = section.get("links", list, None)
    trace_file = None
    if loss_model.file_key:
        trace_file = resolve_path(section.get(loss_model.file_key, str), file)
        if not trace_file.is_file():
            raise section.error(loss_model.file_key, f"{model} file {trace_file} not found")
    min_bytes = section.get("min_bytes", int, 0, min=0, max=65535)   # a frame's length (0: every packet)
    section.done()
    return LossSpec(model=model, params=params, directions=directions, links=links, trace_file=trace_file,
                    min_bytes=min_bytes)


def _exchange_size(section: Section, file: Path, key: str) -> int | None:
    """A reqresp request or response size: bytes, or "size" (the run's size: None)."""
    value = section.get(key, (str, int), "size")
    return None if value == "size" else parse_size(value, file, section.key(key))


def _parse_workload(section: Section, file: Path) -> Workload:
    kind = section.get("kind", str, choices=WORKLOAD_KINDS)
    if kind in ("download", "upload", "reqresp"):
        sizes_raw = section.get("sizes", list)
        if not sizes_raw:
            raise section.error("sizes", "needs at least one size")
        sizes: list[int | None] = [parse_size(v, file, f"{section.key('sizes')}[{i}]")
                                   for i, v in enumerate(sizes_raw)]
        if len(set(sizes)) != len(sizes):
            raise section.error("sizes", "duplicate size")
        workload = Workload(kind=kind, sizes=sizes)
        if kind == "reqresp":
            workload.exchanges = section.get("exchanges", int, 10, min=1, max=100000)
            workload.request = _exchange_size(section, file, "request")
            workload.response = _exchange_size(section, file, "response")
            if workload.request is not None and workload.response is not None:
                raise section.error("request", "one of request and response must be \"size\" (the sizes vary it)")
        section.done()
        return workload
    if kind == "page":
        return _parse_page(section, file)
    workload = Workload(
        kind=kind, sizes=[None],
        rate=section.get("rate", int, 30, min=1, max=10000),
        packets=section.get("packets", int, 8, min=1, max=1000),
        duration=float(section.get("duration", float, 25.0, min=0.1, max=86400)),
        buffer=section.get("buffer", int, 4, min=0, max=100000),
    )
    section.done()
    return workload


def _parse_page(section: Section, file: Path) -> Workload:
    """A page-load workload: `page` names the corpus's page or a file (HAR, Epload, fecbench-page-1);
    `page_objects`, an Epload graph's objects' folder. The run's size is the page's bytes."""
    value = section.get("page", str)
    objects = section.get("page_objects", str, None)
    try:
        graph, _ = corpus.resolve(value, resolve_path(value, file), resolve_path(objects, file) if objects else None)
    except PageError as exc:
        raise section.error("page", str(exc)) from None
    section.done()
    return Workload(kind="page", sizes=[graph.app_bytes()], page=value, page_graph=graph)


def written_repetitions(text: str) -> int:
    """The `repetitions` a design's text writes in its [design] table (0: none, or not a design text)."""
    try:
        value = tomllib.loads(text).get("design", {}).get("repetitions", 0)
    except (tomllib.TOMLDecodeError, AttributeError):
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parse_design(path: str | Path) -> Design:
    """Parse and validate a design file as a whole (implementations included; planner and topology
    are checked by `fecbench.runners.experiment.prepare.prepare`)."""
    path = Path(path)
    data = load_toml(path)
    text = path.read_text()
    top = Section(data, path)

    d = top.section("design", required=True)
    name = d.get("name", str, path.stem)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise d.error("name", f"bad name {name!r}: letters, digits, '.', '_', '-' only")
    topology_path = resolve_path(d.get("topology", str), path)
    if not topology_path.is_file():
        raise d.error("topology", f"topology spec {topology_path} not found")
    repetitions = d.get("repetitions", int, 1, min=1, max=10000)
    seed = d.get("seed", int, min=0, max=2**63 - 1)
    timeout_s = float(d.get("timeout_s", float, DEFAULT_TIMEOUT_S, min=0.1, max=86400))
    order = d.get("order", str, "random", choices=ORDERS)
    fidelity = d.get("fidelity", str, "per-point", choices=FIDELITY_MODES)
    fidelity_rate = d.get("fidelity_rate", bool, False)
    if fidelity_rate and fidelity == "off":
        raise d.error("fidelity_rate", "a rate probe needs the fidelity check: set fidelity to per-point or per-run")
    port = d.get("port", int, 4433, min=1024, max=64000)
    verdict_log = d.get("verdict_log", bool, False)
    impl_dirs = [resolve_path(p, path) for p in d.get("impl_dirs", list, [])]
    schedule_path = d.get("schedule", str, None)
    endpoint_bound = d.get("endpoint_bound_ms", float, None, min=0.001, max=60000)
    d.done()

    space = top.section("space", required=True)
    loss = _parse_loss(top.section("loss"), path)
    schedule = _parse_schedule(schedule_path, path, topology_path, loss.model)
    workload = _parse_workload(top.section("workload", required=True), path)

    impls: list[ImplEntry] = []
    for entry in top.sections("impl", required=True):
        impl_name = entry.get("name", str)
        descriptor = find_descriptor(impl_name, impl_dirs, file=path, key=entry.key("name"))
        label = entry.get("label", str, impl_name)
        if not LABEL_RE.fullmatch(label):
            # Labels name report figures and files, and are typed on command lines (--baseline).
            raise entry.error("label", f"label {label!r}: use letters, digits, '.', '_', '-' and '+' "
                              "(it names figures and files)")
        if any(e.label == label for e in impls):
            raise entry.error("label", f"duplicate label {label!r}: every [[impl]] needs its own label")
        args = descriptor.validate_args(entry.get("args", dict, {}), path, entry.key("args"))
        baseline = entry.get("baseline", str, None)
        entry.done()
        impls.append(ImplEntry(name=impl_name, label=label, args=args, descriptor=descriptor, baseline=baseline))
    if not impls:
        raise top.error("impl", "needs at least one [[impl]]")
    labels = [e.label for e in impls]
    for index, e in enumerate(impls):
        if e.baseline is not None and (e.baseline not in labels or e.baseline == e.label):
            raise SpecError(path, f"impl[{index}].baseline", f"baseline {e.baseline!r} is not another label of "
                            f"this design{did_you_mean(e.baseline, labels)}", [x for x in labels if x != e.label])
    flows = parse_flows(top, path, text, impl_dirs, workload.sizes)
    capture = parse_capture(top.section("capture"))
    # An implementation without the workload runs as `unsupported` (recorded, like exit status 127);
    # a design none of whose implementations has it is a mistake.
    if not any(workload.kind in e.descriptor.workloads for e in impls):
        raise top.error("workload", f"no implementation of this design declares workload {workload.kind!r} "
                        "(capabilities.workloads of " + ", ".join(str(e.descriptor.path) for e in impls) + ")")
    top.done()

    return Design(path=path, text=text, data=data, name=name, topology_path=topology_path,
                  repetitions=repetitions, seed=seed, timeout_s=timeout_s, order=order, fidelity=fidelity,
                  fidelity_rate=fidelity_rate, port=port, verdict_log=verdict_log, impl_dirs=impl_dirs,
                  space=space, loss=loss, workload=workload, impls=impls, schedule=schedule,
                  endpoint_bound_ms=None if endpoint_bound is None else float(endpoint_bound), flows=flows,
                  capture=capture)


def _parse_schedule(value: str | None, path: Path, topology_path: Path, loss_model: str) -> Schedule | None:
    """The link schedule of the design, else of its topology (`[topology] schedule`), checked against
    the topology and the design's loss model; None without one."""
    from fecbench.emulation import load_topology
    from fecbench.emulation.schedule import load_schedule

    base, key = path, "design.schedule"
    if value is None:  # a quick look first: most topologies have no schedule
        value = load_toml(topology_path).get("topology", {}).get("schedule")
        if value is None:
            return None
        base, key = topology_path, "topology.schedule"
    topology = load_topology(topology_path)
    schedule_path = resolve_path(value, base)
    if not schedule_path.is_file():
        raise SpecError(base, key, f"schedule file {schedule_path} not found")
    schedule = load_schedule(schedule_path)
    schedule.check_topology(topology, loss_model, design=path)
    return schedule


def find_label(design: Design, label: str) -> ImplEntry:
    for entry in design.impls:
        if entry.label == label:
            return entry
    raise SpecError(design.path, "impl.label", f"unknown label {label!r}", [e.label for e in design.impls])
