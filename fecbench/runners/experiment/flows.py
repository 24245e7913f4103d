"""Competing flows in a design: `[[flow]]` entries beside the measured (foreground) transfer, and `[flows]`.

```toml
[flows]                         # optional
select = "bg"                   # a choice factor whose value names the [[flow]] that runs at each point
                                # ("a+b": several, "none": no competing flow); default: every [[flow]] runs
copies = 1                      # copies of each selected flow: a number or an integer factor
start_s = -5                    # the default start of a flow, in s from the foreground client's start
                                # (negative: before it); a number or a factor
bin_ms = 100                    # width of the per-flow throughput bins the droppers count (fecbench.dropper)

[[flow]]
name = "quic"                   # unique; names the flow in the flows table (copies: "quic#2", ...)
impl = "fecq"                   # any implementation descriptor, with its args ...
args = { fec = "none" }
workload = "bulk"               # bulk (a download until the foreground ends: a competing transfer that
                                # fills the link) | download | upload | messages (run to completion)
size = "10MB"                   # download, upload (default: the design's first size)
start_s = -15                   # this flow's start (default [flows] start_s, else 0)
ready_packets = 0               # then wait until the links carried this many of its packets (steady state)
path = 1                        # multipath: the client's path it uses (default 1)

[[flow]]
name = "tcp"
tool = "iperf3"                 # ... or cross-traffic from iperf3 (installed by the bootstrap):
protocol = "tcp"                # tcp: bulk TCP, `cc` = cubic | bbr | reno (what the kernel has)
cc = "cubic"                    # udp: constant-rate UDP at `rate` ("5Mbit/s")
direction = "download"          # download (server → client, as the foreground's data) | upload
```

Each flow gets its own port (the foreground's port + 1000 × its rank) and its own folder in the run's
folder (its metrics path, working directory), so any implementation runs as a second instance beside
the foreground (quic-impls/README.md, "Several instances at once"). Everything a design can get wrong
here (an unknown implementation or tool, a workload it lacks, a start beyond the time limit, a path the
topology lacks, a selection factor whose levels are not flows) is a SpecError naming the key and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section, parse_size
from fecbench.runners.experiment.descriptor import Descriptor, find_descriptor

FLOW_WORKLOADS = ("bulk", "download", "upload", "messages")
TOOLS = ("iperf3",)
PROTOCOLS = ("tcp", "udp")
TCP_CCS = ("cubic", "bbr", "reno")
FLOW_DIRECTIONS = ("download", "upload")
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
BULK_SIZE = 10**9                       # a bulk flow's download: more than any run carries
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(bit|kbit|Mbit|Gbit)/s\s*$")
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "Mbit": 10**6, "Gbit": 10**9}


class DesignLimits(Protocol):
    """What the flows' checks read of the design (runners.experiment.design.Design, which imports this module)."""
    path: Path
    timeout_s: float
    port: int


@dataclass
class FlowSpec:
    """One `[[flow]]` entry as declared."""
    name: str
    key: str                            # where it is in the design (for messages): flow[0]
    workload: str
    impl: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    descriptor: Descriptor | None = None
    tool: str | None = None
    protocol: str = "tcp"
    cc: str = "cubic"
    rate_bps: int | None = None
    direction: str = "download"
    size: int | None = None
    start_s: float | str | None = None  # a number, a factor name, or None: [flows] start_s
    ready_packets: int = 0
    path: int = 1
    line: int | None = None             # its [[flow]] header's line in the design file

    @property
    def label(self) -> str:
        return self.name

    @property
    def stops_with_foreground(self) -> bool:
        """A bulk flow (or iperf3's) only competes: the run stops it when the foreground has finished."""
        return self.workload == "bulk" or self.tool is not None


@dataclass
class FlowInstance:
    """A flow as one run runs it: a copy of a spec at a point's values."""
    spec: FlowSpec
    id: str                             # "quic", "quic#2"
    rank: int                           # 1, 2, ...: its port is the foreground's + 1000 × rank
    start_s: float

    @property
    def stops_with_foreground(self) -> bool:
        return self.spec.stops_with_foreground


@dataclass
class Flows:
    """The design's competing flows: the specs and the rules that pick them per point."""
    specs: list[FlowSpec]
    select: str | None = None           # a choice factor naming the flows of each point
    copies: int | str = 1
    start_s: float | str = 0.0
    bin_ms: int = 100

    def __bool__(self) -> bool:
        return bool(self.specs)

    def factor_refs(self) -> set[str]:
        """The factors the flows depend on."""
        refs = {v for v in (self.select, self.copies, self.start_s) if isinstance(v, str)}
        return refs | {s.start_s for s in self.specs if isinstance(s.start_s, str)}

    def instances(self, values: dict[str, Any]) -> list[FlowInstance]:
        """The flows a run at these factor values runs, in start order."""
        if self.select is None:
            chosen = self.specs
        else:
            picked = str(values[self.select])
            names = [] if picked == "none" else picked.split("+")
            chosen = [s for s in self.specs if s.name in names]
        copies = int(_value(self.copies, values))
        out: list[FlowInstance] = []
        for spec in chosen:
            start = float(_value(spec.start_s if spec.start_s is not None else self.start_s, values))
            for copy in range(copies):
                out.append(FlowInstance(spec, spec.name if copy == 0 else f"{spec.name}#{copy + 1}", 0, start))
        out.sort(key=lambda f: f.start_s)
        for rank, flow in enumerate(out, 1):
            flow.rank = rank
        return out

    def canonical(self) -> dict[str, Any]:
        """What the run keys depend on (a design without flows keeps the keys it had)."""
        return {"select": self.select, "copies": self.copies, "start_s": self.start_s, "bin_ms": self.bin_ms,
                "flows": [{k: v for k, v in vars(s).items() if k not in ("descriptor", "key")} for s in self.specs]}


def _value(value: float | int | str, values: dict[str, Any]) -> float | int | str:
    return values[value] if isinstance(value, str) else value


def parse_rate(text: object, file: Path, key: str) -> int:
    """'5Mbit/s' -> 5000000 bits per second."""
    match = _RATE.match(text) if isinstance(text, str) else None
    if match is None:
        raise SpecError(file, key, f"bad rate {text!r}", "e.g. '500kbit/s', '5Mbit/s', '1Gbit/s'")
    return int(float(match.group(1)) * _RATE_UNITS[match.group(2)])


def line_of(text: str, header: str, index: int) -> int | None:
    """The line number (1-based) of the index-th (0-based) `header` of a TOML text, for messages."""
    found = [i + 1 for i, line in enumerate(text.splitlines()) if line.strip() == header]
    return found[index] if index < len(found) else None


def parse_flows(top: Section, path: Path, text: str, impl_dirs: list[Path], sizes: list[int | None]) -> Flows:
    """The design's `[flows]` and `[[flow]]` sections (empty when it has none)."""
    settings = top.section("flows")
    entries = top.sections("flow", required=False)
    if not entries:
        if settings.data:
            raise settings.error("select", "a [flows] section without any [[flow]]")
        return Flows([])
    specs: list[FlowSpec] = []
    for i, entry in enumerate(entries):
        line = line_of(text, "[[flow]]", i)
        try:
            spec = _parse_flow(entry, path, f"flow[{i}]", impl_dirs, sizes, default_name=f"flow{i + 1}")
            if any(s.name == spec.name for s in specs):
                raise entry.error("name", f"duplicate flow name {spec.name!r}")
        except SpecError as exc:  # the entry's line too: a design may have many [[flow]] entries
            raise SpecError(exc.file, exc.key, exc.problem, exc.allowed, line=line) from None
        spec.line = line
        specs.append(spec)
    flows = Flows(specs=specs, select=settings.get("select", str, None),
                  copies=settings.get("copies", (int, str), 1), start_s=settings.get("start_s", (float, str), 0.0),
                  bin_ms=settings.get("bin_ms", int, 100, min=1, max=60000))
    if isinstance(flows.copies, int) and not 1 <= flows.copies <= 16:
        raise settings.error("copies", f"must be 1 to 16, got {flows.copies}")
    settings.done()
    return flows


def _parse_flow(entry: Section, path: Path, where: str, impl_dirs: list[Path], sizes: list[int | None],
                default_name: str) -> FlowSpec:
    name = entry.get("name", str, default_name)
    if not NAME_RE.fullmatch(name):
        raise entry.error("name", f"flow name {name!r}: a letter, then letters, digits, '_' or '-'")
    impl, tool = entry.get("impl", str, None), entry.get("tool", str, None, choices=TOOLS)
    if (impl is None) == (tool is None):
        raise entry.error("impl", "give either impl (an implementation) or tool = \"iperf3\"")
    workload = "bulk" if tool else entry.get("workload", str, choices=FLOW_WORKLOADS)
    spec = FlowSpec(name=name, key=where, workload=workload,
                    start_s=entry.get("start_s", (float, str), None),
                    ready_packets=entry.get("ready_packets", int, 0, min=0, max=10**9),
                    path=entry.get("path", int, 1, min=1, max=64))
    if tool is not None:
        spec.tool = tool
        spec.protocol = entry.get("protocol", str, "tcp", choices=PROTOCOLS)
        spec.direction = entry.get("direction", str, "download", choices=FLOW_DIRECTIONS)
        if spec.protocol == "tcp":
            spec.cc = entry.get("cc", str, "cubic", choices=TCP_CCS)
        else:
            spec.rate_bps = parse_rate(entry.get("rate", str), path, entry.key("rate"))
    else:
        descriptor = find_descriptor(impl, impl_dirs, file=path, key=entry.key("impl"))
        spec.impl, spec.descriptor = impl, descriptor
        spec.args = descriptor.validate_args(entry.get("args", dict, {}), path, entry.key("args"))
        needed = "download" if spec.workload == "bulk" else spec.workload
        if needed not in descriptor.workloads:
            raise entry.error("workload", f"implementation {impl!r} does not declare workload {needed!r}",
                              descriptor.workloads)
        if spec.workload in ("download", "upload"):
            raw = entry.get("size", (str, int), None)
            spec.size = parse_size(raw, path, entry.key("size")) if raw is not None else (sizes[0] or 10**6)
        elif spec.workload == "bulk":
            spec.size = BULK_SIZE
    entry.done()
    return spec


def check_flows(flows: Flows, design: DesignLimits, factors: dict[str, Any], paths: int) -> None:
    """Checks needing the whole design: starts within the time limit, paths the topology has, the
    selection factor's levels, factor references. `factors`: name -> planner Factor."""
    file, timeout_s = design.path, design.timeout_s
    if not flows:
        return
    for ref in sorted(flows.factor_refs()):
        if ref not in factors:
            raise SpecError(file, "flows", f"unknown factor {ref!r}", sorted(factors))
    if flows.select is not None:
        levels = getattr(factors[flows.select], "levels", None)
        names = {s.name for s in flows.specs} | {"none"}
        if not levels:
            raise SpecError(file, "flows.select", f"factor {flows.select!r} must be a choice factor whose levels "
                            "name flows (or 'none')")
        for level in levels:
            unknown = [part for part in str(level).split("+") if part not in names]
            if unknown:
                raise SpecError(file, "flows.select", f"level {level!r} of factor {flows.select!r} names no "
                                f"[[flow]]: {', '.join(unknown)}", sorted(names))
    for spec in flows.specs:
        for low, high in [_range(spec.start_s if spec.start_s is not None else flows.start_s, factors)]:
            if low <= -timeout_s or high >= timeout_s:
                raise SpecError(file, f"{spec.key}.start_s", f"a start from {low:g} to {high:g} s is beyond the "
                                f"time limit timeout_s = {timeout_s:g} s (starts must lie within ±timeout_s)",
                                line=spec.line)
        if spec.path > paths:
            raise SpecError(file, f"{spec.key}.path", f"path {spec.path}: the topology has {paths} path(s)",
                            line=spec.line)
    if isinstance(flows.copies, str):
        low, high = _range(flows.copies, factors)
        if low < 1 or high > 16:
            raise SpecError(file, "flows.copies", f"factor {flows.copies!r} ranges {low:g}..{high:g}: copies "
                            "must be 1 to 16")
    if design.port + 1000 * len(flows.specs) * 16 > 65535:
        raise SpecError(file, "design.port", f"port {design.port}: competing flows take the ports above it in "
                        "steps of 1000; use a port below 48000")


def _range(value: float | int | str, factors: dict[str, Any]) -> tuple[float, float]:
    if not isinstance(value, str):
        return float(value), float(value)
    factor = factors[value]
    if getattr(factor, "levels", None):
        numbers = [float(v) for v in factor.levels]
        return min(numbers), max(numbers)
    if getattr(factor, "value", None) is not None:
        return float(factor.value), float(factor.value)
    return float(factor.low), float(factor.high)
