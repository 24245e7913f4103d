"""A topology file read: the TOML a user wrote, validated completely (names, ends, paths, factor references,
literal values, trace files) so that nothing is built from a bad file; the model it becomes is spec.py's.

Repetition: `[topology] paths = N` repeats every node, link, path and factor whose text contains `{i}` for
i = 1..N (how a multipath spec says "N disjoint paths"), on the raw TOML data, which is then validated as if
written out.
"""

from __future__ import annotations

import copy
from collections import deque
from itertools import pairwise
from pathlib import Path
from typing import Any

from fecbench.emulation.spec import (
    FACTOR_RE,
    MAX_LINKS,
    NAME_RE,
    SHAPING_KEYS,
    DirectionSpec,
    LinkSpec,
    NodeSpec,
    Topology,
    is_queue_literal,
)
from fecbench.inputs.errors import SpecError, UserError
from fecbench.inputs.specs import Section, load_toml
from fecbench.inputs.traces import load_delays, load_trace


def expand_repetitions(raw: dict[str, Any], n: int) -> dict[str, str]:
    """Expand the {i} repetitions of `raw` in place; returns the per-path factors and the name each was
    repeated from ("owd_2" -> "owd" for "owd_{i}")."""
    for key in ("node", "link", "path"):
        if key in raw and isinstance(raw[key], list):
            raw[key] = _expand(raw[key], n)
    shared: dict[str, str] = {}
    if "factors" in raw and isinstance(raw["factors"], dict):
        expanded: dict[str, Any] = {}
        for k, v in raw["factors"].items():
            if "{i}" in k:
                expanded.update({k.replace("{i}", str(i)): v for i in range(1, n + 1)})
                shared.update({k.replace("{i}", str(i)): k.replace("{i}", "").strip("_") for i in range(1, n + 1)})
            else:
                expanded[k] = v
        raw["factors"] = expanded
    return shared


def _expand(items: list[Any], n: int) -> list[Any]:
    """Repeat every item whose text mentions {i} for i = 1..n (keeping the order)."""
    out = []
    for item in items:
        if "{i}" in repr(item):
            out.extend(_substitute(copy.deepcopy(item), i) for i in range(1, n + 1))
        else:
            out.append(item)
    return out


def _substitute(value: Any, i: int) -> Any:
    if isinstance(value, str):
        return value.replace("{i}", str(i))
    if isinstance(value, list):
        return [_substitute(v, i) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, i): _substitute(v, i) for k, v in value.items()}
    return value


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
    out = DirectionSpec(**{k: getattr(base, k) for k in (*SHAPING_KEYS, "trace", "delays")})
    for key in SHAPING_KEYS:
        if key in sec:
            setattr(out, key, _ref(sec, key, key, declared))
    for key, load in (("trace", load_trace), ("delays", load_delays)):
        if key in sec:   # a declared factor's name, else a file (relative to the spec) checked now
            setattr(out, key, _file_ref(sec, key, declared, load))
    if out.trace is not None and out.bw is not None:
        raise sec.error("trace" if "trace" in sec else "bw", "a trace link's rate is its trace: give it bw or "
                        "trace, not both")
    if out.delays is not None and out.owd is not None:
        raise sec.error("delays" if "delays" in sec else "owd", "a delay series is the delay: give this direction owd "
                        "or delays, not both (a link-wide owd can move to the other direction's table)")
    return out


def _file_ref(sec: Section, key: str, declared: dict[str, Any], load: Any) -> Path | str:
    """A trace or delay series named in a topology: a declared factor's name, or a file checked now by `load`."""
    name = sec.get(key, str)
    if name in declared:
        return name
    try:
        load(Path(name) if Path(name).is_absolute() else Path(str(sec.file)).parent / name)
    except UserError as exc:
        raise sec.error(key, str(exc), "a file, or a factor declared in [factors]") from None
    return Path(name)


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
