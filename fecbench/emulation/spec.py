"""Topology specs: nodes, links with per-direction shaping that references design factors, paths.

The model a topology file becomes (topology_file.py reads and validates the file). Values of factors are
checked when resolved.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from fecbench.inputs.errors import SpecError, UserError
from fecbench.inputs.traces import load_delays, load_trace

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,15}$")
FACTOR_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
MS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*ms\s*$")
BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|kB|KB|KiB|MB|MiB)\s*$")
BYTE_UNITS = {"B": 1, "kB": 1000, "KB": 1000, "KiB": 1024, "MB": 1_000_000, "MiB": 1 << 20}
PACKET_BYTES = 1500          # a full-size packet, for queue and BDP conversions
FRAME_BYTES = PACKET_BYTES + 14   # a full-size packet as the rate limiter counts it (Ethernet header included)
MIN_QUEUE_PACKETS = 10
MAX_LINKS = 250              # one /24 per link inside 10.0.0.0/16
SHAPING_KEYS = ("bw", "owd", "queue")


@dataclass(frozen=True)
class NodeSpec:
    name: str
    role: str                 # "host" or "router"


@dataclass
class DirectionSpec:
    """What shapes one direction of a link: literal numbers or factor names (str)."""
    bw: float | str | None = None        # Mbit/s; None = no rate limit
    owd: float | str | None = None       # ms; None = no delay
    queue: float | str | None = None     # packets, "50ms", "30kB", "bdp", factor name, or None = one BDP
    trace: Path | str | None = None      # a packet-delivery trace (inputs.traces): its file, or a factor's name
    delays: Path | str | None = None     # a delay series (inputs.traces) instead of owd: its file, or a factor


@dataclass
class LinkSpec:
    id: str
    a: str                    # the client side end (forward = a -> b)
    b: str
    forward: DirectionSpec
    reverse: DirectionSpec
    loss: bool = False

    @property
    def shaped(self) -> bool:
        return any(getattr(d, k) is not None for d in (self.forward, self.reverse)
                   for k in ("bw", "owd", "trace", "delays"))


@dataclass(frozen=True)
class Shaping:
    """Resolved shaping of one direction of one link. The router queue holds `queue` packets whatever their
    size when it was written in packets, or `queue` bytes when it was written in bytes or time ("30kB",
    "50ms" and "bdp" of the link's rate): a queue is counted as written."""
    bw: float | None          # Mbit/s
    owd: float                # ms
    queue: int                # in queue_unit
    queue_unit: str = "packets"   # packets | bytes
    trace: str | None = None  # a trace link's packet-delivery trace (absolute path): its rate; queue 0 = unlimited
    delays: str | None = None  # a delay series (absolute path) the delay follows; owd is then its least delay

    def describe_queue(self) -> str:
        if self.queue == 0:
            return "unlimited (mm-link's default)"
        return f"{self.queue} {'packet' if self.queue == 1 else 'packets'}" if self.queue_unit == "packets" \
            else f"{self.queue:,} bytes"


def first_trace_link(resolved: dict[str, dict[str, Shaping]]) -> str | None:
    """The first direction a trace or a delay series drives ("link cell, forward"), if any: it needs the delay
    element."""
    return next((f"link {link_id}, {d}" for link_id, pair in resolved.items() for d, s in pair.items()
                 if s.trace is not None or s.delays is not None), None)


def is_queue_literal(value: object) -> bool:
    """A queue written as a value, not a factor's name: "50ms", "30kB" or "bdp"."""
    return isinstance(value, str) and (value == "bdp" or bool(MS_RE.match(value)) or bool(BYTES_RE.match(value)))


@dataclass
class Topology:
    file: str
    name: str
    description: str
    client: str
    server: str
    nodes: list[NodeSpec]
    links: list[LinkSpec]
    path_nodes: list[list[str]]
    defaults: dict[str, Any] = field(default_factory=dict)
    schedule: str | None = None   # a link schedule file (as written; relative to this spec), see schedule.py
    # Per-path factor -> the name it was repeated from ("owd_2" -> "owd" for "owd_{i}"): a design that
    # gives "owd" alone gives every path the same value (homogeneous paths).
    shared: dict[str, str] = field(default_factory=dict)

    # --- what the campaign runner asks -----------------------------------------------------
    @property
    def paths(self) -> int:
        return len(self.path_nodes)

    def factors(self) -> set[str]:
        """Factor names the links reference (declared in [factors])."""
        names: set[str] = set()
        for link in self.links:
            for d in (link.forward, link.reverse):
                for key in SHAPING_KEYS:
                    value = getattr(d, key)
                    if isinstance(value, str) and not is_queue_literal(value):   # "30kB", "bdp": no factors
                        names.add(value)
                names.update(ref for ref in (d.trace, d.delays) if isinstance(ref, str))
        return names

    def lossy_links(self) -> list[str]:
        return [link.id for link in self.links if link.loss]

    def link(self, link_id: str) -> LinkSpec:
        for link in self.links:
            if link.id == link_id:
                return link
        raise UserError(f"{self.file}: no link {link_id!r} (links: {', '.join(x.id for x in self.links)})")

    def node(self, name: str) -> NodeSpec:
        return next(n for n in self.nodes if n.name == name)

    def path_links(self, index: int) -> list[tuple[LinkSpec, str]]:
        """Links of path `index` (0-based) in client-to-server order, with the direction crossed."""
        hops = self.path_nodes[index]
        out = []
        for u, v in pairwise(hops):
            link = self._link_between(u, v)
            out.append((link, "forward" if link.a == u else "reverse"))
        return out

    def _link_between(self, u: str, v: str) -> LinkSpec:
        return next(x for x in self.links if {x.a, x.b} == {u, v})

    # --- values ---------------------------------------------------------------------------
    def check_values(self, values: dict[str, Any], strict: bool = False) -> None:
        """Reject bad factor values; with strict, also names the spec does not use (--set)."""
        if strict:
            known = self.factors() | {self.shared[name] for name in self.factors() if name in self.shared}
            unknown = sorted(set(values) - known)
            if unknown:
                raise SpecError(self.file, unknown[0], "unknown factor name", sorted(known))
        self.resolve(values)

    def value_of(self, name: str, values: dict[str, Any]) -> Any:
        if name in values and values[name] is not None:
            return values[name]
        if values.get(self.shared.get(name, "")) is not None:
            return values[self.shared[name]]
        if name in self.defaults:
            return self.defaults[name]
        raise UserError(f"{self.file}: factor {name!r} has no value and no default in [factors]")

    def resolve(self, values: dict[str, Any]) -> dict[str, dict[str, Shaping]]:
        """Per link id and direction ("forward"/"reverse"), the shaping these values ask for."""
        out: dict[str, dict[str, Shaping]] = {}
        for link in self.links:
            if not link.shaped:
                continue
            pair: dict[str, Shaping] = {}
            owds: dict[str, float] = {}
            series: dict[str, str] = {}
            for dname in ("forward", "reverse"):
                d = getattr(link, dname)
                if d.delays is not None:   # a series: its least delay stands for it where one number must
                    series[dname] = self._file(d.delays, values, load_delays)
                    owds[dname] = load_delays(series[dname]).span_ms[0]
                    continue
                owds[dname] = self._number(d.owd, values, "owd", allow_zero=True) if d.owd is not None else 0.0
            for dname in ("forward", "reverse"):
                d = getattr(link, dname)
                bw = self._number(d.bw, values, "bw", allow_zero=False) if d.bw is not None else None
                rtt = owds["forward"] + owds["reverse"]
                if d.trace is not None:
                    trace, (queue, unit) = self._file(d.trace, values, load_trace), self._trace_queue(d.queue, values)
                else:
                    trace, (queue, unit) = None, self._queue(d.queue, values, bw, rtt)
                pair[dname] = Shaping(bw=bw, owd=owds[dname], queue=queue, queue_unit=unit, trace=trace,
                                      delays=series.get(dname))
            out[link.id] = pair
        return out

    def _number(self, ref: float | str, values: dict[str, Any], kind: str, allow_zero: bool) -> float:
        name = ref if isinstance(ref, str) else None
        value = self.value_of(ref, values) if name else ref
        what = f"factor {name!r}" if name else kind
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise UserError(f"{self.file}: {what} must be a number, got {value!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            bound = "≥ 0" if allow_zero else "> 0"
            unit = "ms (one-way delay)" if kind == "owd" else "Mbit/s"
            raise UserError(f"{self.file}: {what} must be {bound} {unit}, got {value!r}")
        return value

    def _queue(self, ref: float | str | None, values: dict[str, Any], bw: float | None,
               rtt_ms: float) -> tuple[int, str]:
        """(limit, unit): packets when written as a number, bytes when written as a size or a time of the
        link's rate ("50ms", "bdp": never less than MIN_QUEUE_PACKETS full frames)."""
        value: Any = ref
        if isinstance(ref, str) and not is_queue_literal(ref):
            value = self.value_of(ref, values)
        what = f"factor {ref!r}" if isinstance(ref, str) else "queue"
        forms = 'packets, "<n>ms", "<n>kB" or "bdp"'
        floor = MIN_QUEUE_PACKETS * FRAME_BYTES
        if value is None or value == "bdp":
            if bw is None:
                return 1000, "packets"
            return max(floor, math.ceil(bw * 1e6 * rtt_ms / 1e3 / 8)), "bytes"
        if isinstance(value, str):
            if m := BYTES_RE.match(value):
                size = math.ceil(float(m.group(1)) * BYTE_UNITS[m.group(2)])
                if size < FRAME_BYTES:
                    raise UserError(f"{self.file}: {what} {value!r} holds less than one full frame "
                                    f"({FRAME_BYTES} B): nothing of full size could be queued")
                return size, "bytes"
            m = MS_RE.match(value)
            if not m:
                raise UserError(f"{self.file}: {what} must be {forms}, got {value!r}")
            if bw is None:
                raise UserError(f"{self.file}: {what} in ms needs a link with a rate (bw)")
            return max(floor, math.ceil(bw * 1e6 * float(m.group(1)) / 1e3 / 8)), "bytes"
        try:
            packets = float(value)
        except (TypeError, ValueError):
            raise UserError(f"{self.file}: {what} must be {forms}, got {value!r}") from None
        # A planner's continuous value (e.g. 37.4) is rounded to whole packets.
        if not math.isfinite(packets) or round(packets) < 1:
            raise UserError(f"{self.file}: {what} must be a number of packets ≥ 1, got {value!r}")
        return int(round(packets)), "packets"

    def _file(self, ref: Path | str, values: dict[str, Any], load: Any) -> str:
        """A trace's or a delay series' file, checked by `load` (a factor's value is a path relative to this spec,
        or absolute): its absolute path."""
        path = ref if isinstance(ref, Path) else Path(self.value_of(ref, values))
        return load(path if path.is_absolute() else Path(self.file).parent / path).path

    def _trace_queue(self, ref: float | str | None, values: dict[str, Any]) -> tuple[int, str]:
        """mm-link's drop-tail, in packets or bytes as written; unwritten: unlimited, mm-link's default."""
        value = self.value_of(ref, values) if isinstance(ref, str) and not is_queue_literal(ref) else ref
        if value is None:
            return 0, "packets"
        if value == "bdp" or (isinstance(value, str) and MS_RE.match(value)):
            raise UserError(f"{self.file}: a trace link's queue {value!r} needs a rate it does not have: write it "
                            'in packets or bytes ("30kB"), or leave it out for an unlimited one')
        return self._queue(value, values, None, 0.0)

    def configured_rtt(self, index: int, resolved: dict[str, dict[str, Shaping]]) -> float:
        """Round-trip time of path `index` from the link delays alone (ms)."""
        return sum(resolved[link.id]["forward"].owd + resolved[link.id]["reverse"].owd
                   for link, _ in self.path_links(index) if link.id in resolved)

    def path_rate(self, index: int, resolved: dict[str, dict[str, Shaping]]) -> float | None:
        """Bottleneck rate (Mbit/s) of path `index` in the client-to-server direction."""
        rates = [resolved[link.id][d].bw for link, d in self.path_links(index) if link.id in resolved]
        rates = [r for r in rates if r is not None]
        return min(rates) if rates else None
