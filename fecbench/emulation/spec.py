"""Topology specs: nodes, links with per-direction shaping that references design factors, paths.

A spec is validated completely when loaded (names, ends, paths, factor references, literal
values), so that nothing is built from a bad file. Values of factors are checked when resolved.

Repetition: `[topology] paths = N` repeats every node, link, path and factor whose text contains
`{i}` for i = 1..N, which is how a multipath spec says "N disjoint paths".
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from fecbench.emulation.repeat import expand_repetitions
from fecbench.inputs.errors import SpecError, UserError
from fecbench.inputs.specs import Section, load_toml

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
        return any(getattr(d, k) is not None for d in (self.forward, self.reverse) for k in ("bw", "owd"))


@dataclass(frozen=True)
class Shaping:
    """Resolved shaping of one direction of one link. The router queue holds `queue` packets whatever their
    size when it was written in packets, or `queue` bytes when it was written in bytes or time ("30kB",
    "50ms" and "bdp" of the link's rate): a queue is counted as written."""
    bw: float | None          # Mbit/s
    owd: float                # ms
    queue: int                # in queue_unit
    queue_unit: str = "packets"   # packets | bytes

    def describe_queue(self) -> str:
        return f"{self.queue} {'packet' if self.queue == 1 else 'packets'}" if self.queue_unit == "packets" \
            else f"{self.queue:,} bytes"


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
                    if isinstance(value, str) and not MS_RE.match(value):
                        names.add(value)
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
            pair = {}
            owds = {}
            for dname in ("forward", "reverse"):
                d = getattr(link, dname)
                owds[dname] = self._number(d.owd, values, "owd", allow_zero=True) if d.owd is not None else 0.0
            for dname in ("forward", "reverse"):
                d = getattr(link, dname)
                bw = self._number(d.bw, values, "bw", allow_zero=False) if d.bw is not None else None
                rtt = owds["forward"] + owds["reverse"]
                queue, unit = self._queue(d.queue, values, bw, rtt)
                pair[dname] = Shaping(bw=bw, owd=owds[dname], queue=queue, queue_unit=unit)
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

    def configured_rtt(self, index: int, resolved: dict[str, dict[str, Shaping]]) -> float:
        """Round-trip time of path `index` from the link delays alone (ms)."""
        return sum(resolved[link.id]["forward"].owd + resolved[link.id]["reverse"].owd
                   for link, _ in self.path_links(index) if link.id in resolved)

    def path_rate(self, index: int, resolved: dict[str, dict[str, Shaping]]) -> float | None:
        """Bottleneck rate (Mbit/s) of path `index` in the client-to-server direction."""
        rates = [resolved[link.id][d].bw for link, d in self.path_links(index) if link.id in resolved]
        rates = [r for r in rates if r is not None]
        return min(rates) if rates else None


# --- loading ---------------------------------------------------------------------------------


def _ref(sec: Section, key: str, kind: str, declared: dict[str, Any]) -> float | str | None:
    """A shaping value: a literal number, a literal "50ms" queue, or a declared factor's name."""
    value = sec.get(key, (float, int, str), None)
    if value is None:
        return None
    if isinstance(value, str):
        if kind == "queue" and is_queue_literal(value):
            return value
        if not FACTOR_RE.match(value) or value not in declared:
            raise sec.error(key, f"unknown factor name {value!r}", sorted(declared) or "declare it in [factors]")
        return value
    if kind == "owd" and value < 0:
        raise sec.error(key, f"a delay must be ≥ 0 ms, got {value!r}")
    if kind == "bw" and value <= 0:
        raise sec.error(key, f"a bandwidth must be > 0 Mbit/s, got {value!r}")
    if kind == "queue" and (value < 1 or value != int(value)):
        raise sec.error(key, f"a queue must be a whole number of packets ≥ 1, got {value!r}")
    return value


def _direction(sec: Section, declared: dict[str, Any], base: DirectionSpec | None = None) -> DirectionSpec:
    base = base or DirectionSpec()
    out = DirectionSpec(**{k: getattr(base, k) for k in SHAPING_KEYS})
    for key in SHAPING_KEYS:
        if key in sec:
            setattr(out, key, _ref(sec, key, key, declared))
    return out


def _check_factor_default(sec: Section, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise sec.error(name, f"a factor default must be a number or a string, got {value!r}")
    family = name.split("_")[0]
    if isinstance(value, (int, float)):
        if family == "bw" and value <= 0:
            raise sec.error(name, f"a bandwidth must be > 0 Mbit/s, got {value!r}")
        if value < 0:
            raise sec.error(name, f"must be ≥ 0, got {value!r}")


def load_topology(path: str | Path, paths: int | None = None) -> Topology:
    """Load and validate a topology spec; `paths` overrides `[topology] paths` (N-path specs)."""
    path = Path(path)
    root = Section(load_toml(path), path)
    name, description, schedule, client, server, n = _header(root.section("topology", required=True), path, paths)
    # Expand {i} repetitions on the raw data, then validate it as if written out.
    shared = expand_repetitions(root.data, n)
    declared = _factors(root.section("factors"))
    nodes = _nodes(root.sections("node", required=True))
    roles = {nd.name: nd.role for nd in nodes}
    for key, who in (("client", client), ("server", server)):
        if roles.get(who) != "host":
            raise SpecError(path, f"topology.{key}", f"{who!r} must be a node with role = \"host\"",
                            sorted(nd for nd, r in roles.items() if r == "host"))
    links = _links(root.sections("link", required=True), path, roles, declared)
    path_nodes = [_path(sec, client, server, roles, links) for sec in root.sections("path", required=True)]
    # Forward = the direction paths cross a link from the client (as in set_loss), whatever the
    # order of `ends`: orient every link that way ([link.forward] already means client -> server).
    for hops in path_nodes:
        for u, v in pairwise(hops):
            link = next(x for x in links if {x.a, x.b} == {u, v})
            if link.b == u:
                link.a, link.b = link.b, link.a
    _check_connected(path, roles, links)
    root.done()
    return Topology(str(path), name, description, client, server, nodes, links, path_nodes, declared, schedule,
                    shared)


def _header(top: Section, path: Path, paths: int | None) -> tuple[str, str, str | None, str, str, int]:
    """[topology]: name, description, schedule, the client and server nodes, the number of paths."""
    name = top.get("name", str, path.stem)
    description = top.get("description", str, "")
    schedule = top.get("schedule", str, None)
    if schedule is not None and not (path.parent / schedule).is_file() and not Path(schedule).is_file():
        raise top.error("schedule", f"schedule file {schedule!r} not found (relative to {path.parent})")
    client = top.get("client", str, "client")
    server = top.get("server", str, "server")
    n = top.get("paths", int, 1, min=1, max=16)
    if paths is not None:
        if paths < 1 or paths > 16:
            raise SpecError(path, "topology.paths", f"must be between 1 and 16, got {paths}")
        n = paths
    top.done()
    return name, description, schedule, client, server, n


def _factors(fsec: Section) -> dict[str, Any]:
    """[factors]: the factor names the links may use, with their defaults."""
    declared: dict[str, Any] = {}
    for fname in list(fsec.data):
        if not FACTOR_RE.match(fname):
            raise fsec.error(fname, "a factor name is letters, digits and _ starting with a letter")
        declared[fname] = fsec.get(fname)
        _check_factor_default(fsec, fname, declared[fname])
    fsec.done()
    return declared


def _nodes(sections: list[Section]) -> list[NodeSpec]:
    """[[node]]: named, once each, a host or a router."""
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for sec in sections:
        nname = sec.get("name", str)
        if not NAME_RE.match(nname):
            raise sec.error("name", f"bad node name {nname!r}: letters, digits and _, at most 16 characters")
        if nname in seen:
            raise sec.error("name", f"duplicate node name {nname!r}")
        seen.add(nname)
        nodes.append(NodeSpec(nname, sec.get("role", str, "router", choices=("host", "router"))))
        sec.done()
    return nodes


def _links(link_secs: list[Section], path: Path, roles: dict[str, str], declared: dict[str, Any]) -> list[LinkSpec]:
    """[[link]]: at most MAX_LINKS, each between two known nodes, once."""
    if len(link_secs) > MAX_LINKS:
        raise SpecError(path, "link", f"at most {MAX_LINKS} links, got {len(link_secs)}")
    links: list[LinkSpec] = []
    ids: set[str] = set()
    for sec in link_secs:
        lid = sec.get("id", str)
        if not NAME_RE.match(lid):
            raise sec.error("id", f"bad link id {lid!r}: letters, digits and _, at most 16 characters")
        if lid in ids:
            raise sec.error("id", f"duplicate link id {lid!r}")
        ids.add(lid)
        links.append(_link(sec, lid, roles, declared, links))
    return links


def _link(sec: Section, lid: str, roles: dict[str, str], declared: dict[str, Any], links: list[LinkSpec]) -> LinkSpec:
    """One link: its ends (not yet joined by another link) and its shaping, both ways or per direction."""
    ends = sec.get("ends", list)
    if len(ends) != 2 or not all(isinstance(e, str) for e in ends):
        raise sec.error("ends", f"must be two node names, got {ends!r}")
    for end in ends:
        if end not in roles:
            raise sec.error("ends", f"unknown node {end!r}", sorted(roles))
    if ends[0] == ends[1]:
        raise sec.error("ends", "a link joins two different nodes")
    if any({x.a, x.b} == set(ends) for x in links):
        raise sec.error("ends", f"a second link between {ends[0]} and {ends[1]}")
    both = _direction(sec, declared)
    fsec, rsec = sec.section("forward"), sec.section("reverse")
    fwd = _direction(fsec, declared, both)
    rev = _direction(rsec, declared, both)
    fsec.done()
    rsec.done()
    link = LinkSpec(lid, ends[0], ends[1], fwd, rev, sec.get("loss", bool, False))
    if link.loss and not link.shaped:
        raise sec.error("loss", "losses apply on a shaped link (one with bw or owd): its delay node's egress")
    sec.done()
    return link


def _path(sec: Section, client: str, server: str, roles: dict[str, str], links: list[LinkSpec]) -> list[str]:
    """One [[path]]: from the client to the server over links, through routers, no node twice."""
    hops = sec.get("nodes", list)
    key = "nodes"
    if len(hops) < 2 or hops[0] != client or hops[-1] != server:
        raise sec.error(key, f"a path goes from the client {client!r} to the server {server!r}, got {hops!r}")
    if len(set(hops)) != len(hops):
        raise sec.error(key, f"a path visits a node twice: {hops!r}")
    for u, v in pairwise(hops):
        if u not in roles or v not in roles:
            raise sec.error(key, f"unknown node {u if u not in roles else v!r}", sorted(roles))
        if not any({x.a, x.b} == {u, v} for x in links):
            raise sec.error(key, f"no link between {u!r} and {v!r}: this path does not reach the server")
    for mid in hops[1:-1]:
        if roles[mid] != "router":
            raise sec.error(key, f"{mid!r} is a host: a path's inner nodes must be routers")
    sec.done()
    return hops


def _check_connected(path: Path, roles: dict[str, str], links: list[LinkSpec]) -> None:
    """Every node must be reachable (static routes are computed over the whole graph)."""
    adj: dict[str, set[str]] = {n: set() for n in roles}
    for x in links:
        adj[x.a].add(x.b)
        adj[x.b].add(x.a)
    start = next(iter(roles))
    seen = {start}
    todo = deque([start])
    while todo:
        for nb in adj[todo.popleft()]:
            if nb not in seen:
                seen.add(nb)
                todo.append(nb)
    lonely = sorted(set(roles) - seen)
    if lonely:
        raise SpecError(path, "link", f"node {lonely[0]!r} is not connected to the others")
