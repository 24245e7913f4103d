"""Addresses, routes and shaping commands of a topology: pure logic, no root needed.

Every link k gets the subnet 10.0.k.0/24 with .1 on its client-side end and .2 on the other.
A shaped link is cut by a hidden delay node (an L2 element: a userspace delay bridge or a Linux
bridge with netem), so both routers keep one subnet across it. Per direction: dropper (clsact on
the sending router's egress toward the delay node) -> delay (delayline process, or netem) -> tbf
(the rate) with a fifo under it (the router queue, counted as written: pfifo in packets, bfifo in
bytes), on the delay node's egress.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from fecbench.emulation.spec import FRAME_BYTES, LinkSpec, Shaping, Topology

#: The rate limiter's bucket: what may leave at line rate after idle or a rate change. One full frame (the
#: least that lets a full frame through) plus this long at the link's rate, so that a timer wake-up up to
#: this late costs no rate. Measured: topologies/README.md, "Rate and queue".
BURST_S = 0.00025
POLICY_TABLE_BASE = 100
#: The delay node's qdisc handles per backend: the rate limiter, and its child fifo per queue unit (a
#: fifo's kind cannot change in place, so packets and bytes each have their own handle).
HANDLES = {"delayline": {"tbf": "1:", "packets": "10:", "bytes": "11:"},
           "netem": {"netem": "1:", "tbf": "10:", "packets": "20:", "bytes": "21:"}}


@dataclass
class Iface:
    name: str                  # interface name inside the node (≤ 15 characters)
    node: str                  # spec node name, or the delay node's name
    mac: str
    address: str | None        # "10.0.k.1/24" or None on delay nodes
    link: str                  # link id
    peer_address: str | None = None
    peer_mac: str | None = None


@dataclass
class NodePlan:
    name: str
    role: str                  # host | router | delay
    ifaces: list[Iface] = field(default_factory=list)
    routes: list[list[str]] = field(default_factory=list)     # `ip route add` arguments
    rules: list[list[str]] = field(default_factory=list)      # `ip rule add` arguments


@dataclass
class DelayNodePlan:
    name: str
    link: str
    toward_a: str              # interface facing the client-side end: egress of the reverse direction
    toward_b: str              # interface facing the other end: egress of the forward direction
    sender: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # direction -> (node, role, iface)

    def egress(self, direction: str) -> str:
        return self.toward_b if direction == "forward" else self.toward_a

    def loss_point(self, direction: str) -> tuple[str, str]:
        """(node, interface) where this direction's dropper goes: the sending router's egress toward
        the delay node, so that packets are dropped before the delay; a host's own egress never
        (its TCP would see a local drop), so next to a host the delay node's egress instead."""
        node, role, iface = self.sender[direction]
        if role == "router":
            return node, iface
        return self.name, self.egress(direction)


@dataclass
class Layout:
    nodes: dict[str, NodePlan]
    delay_nodes: dict[str, DelayNodePlan]      # by link id
    links: list[tuple[LinkSpec, Iface, Iface]]  # veth pairs to create: (link, end1, end2)
    client_addresses: list[str]
    server_address: str
    server_addresses: list[str] = field(default_factory=list)   # the server's address on each path


def _mac(k: int, side: int) -> str:
    return f"02:fb:00:{k // 256:02x}:{k % 256:02x}:{side:02x}"


def iface_name(base: str, k: int, side: str) -> str:
    return f"{base}l{k}{side}"


def make_layout(topo: Topology, base: str) -> Layout:
    """Interfaces, addresses and routes; `base` is the per-build name prefix (≤ 9 characters)."""
    nodes = {n.name: NodePlan(n.name, n.role) for n in topo.nodes}
    delay_nodes: dict[str, DelayNodePlan] = {}
    pairs: list[tuple[LinkSpec, Iface, Iface]] = []
    ends: dict[str, tuple[Iface, Iface]] = {}
    for k, link in enumerate(topo.links):
        a = Iface(iface_name(base, k, "a"), link.a, _mac(k, 1), f"10.0.{k}.1/24", link.id)
        b = Iface(iface_name(base, k, "b"), link.b, _mac(k, 2), f"10.0.{k}.2/24", link.id)
        a.peer_address, a.peer_mac = b.address.split("/")[0], b.mac
        b.peer_address, b.peer_mac = a.address.split("/")[0], a.mac
        nodes[link.a].ifaces.append(a)
        nodes[link.b].ifaces.append(b)
        ends[link.id] = (a, b)
        if link.shaped:
            dname = f"d_{link.id}"
            x = Iface(iface_name(base, k, "x"), dname, _mac(k, 3), None, link.id)
            y = Iface(iface_name(base, k, "y"), dname, _mac(k, 4), None, link.id)
            nodes[dname] = NodePlan(dname, "delay", [x, y])
            roles = {n.name: n.role for n in topo.nodes}
            delay_nodes[link.id] = DelayNodePlan(dname, link.id, x.name, y.name, {
                "forward": (link.a, roles[link.a], a.name), "reverse": (link.b, roles[link.b], b.name)})
            pairs += [(link, a, x), (link, y, b)]
        else:
            pairs.append((link, a, b))

    # Static routes: for every subnet a node is not on, the next hop on a shortest path to it.
    adj: dict[str, list[tuple[str, LinkSpec]]] = {n.name: [] for n in topo.nodes}
    for link in topo.links:
        adj[link.a].append((link.b, link))
        adj[link.b].append((link.a, link))
    for node in topo.nodes:
        plan = nodes[node.name]
        if node.role == "host":
            _host_routes(topo, plan, ends, adj)
            continue
        first_hop = _first_hops(node.name, adj)
        for k, link in enumerate(topo.links):
            if node.name in (link.a, link.b):
                continue
            hop_link, hop_node = min((first_hop[end] for end in (link.a, link.b)), key=lambda t: t[2])[:2]
            via = _address_of(ends[hop_link.id], hop_node)
            dev = _iface_of(ends[hop_link.id], node.name)
            plan.routes.append([f"10.0.{k}.0/24", "via", via, "dev", dev])

    client_addresses = []
    for i in range(topo.paths):
        first, _ = topo.path_links(i)[0]
        client_addresses.append(_address_of(ends[first.id], topo.client))
    server_addresses = [_address_of(ends[topo.path_links(i)[-1][0].id], topo.server) for i in range(topo.paths)]
    return Layout(nodes, delay_nodes, pairs, client_addresses, server_addresses[0], server_addresses)


def _first_hops(src: str, adj: dict[str, list[tuple[str, LinkSpec]]]) -> dict[str, tuple[LinkSpec, str, int]]:
    """For each node: (first link, first neighbour, distance) on a BFS shortest path from src."""
    out: dict[str, tuple[LinkSpec, str, int]] = {}
    todo: deque[str] = deque()
    for nb, link in adj[src]:
        if nb not in out:
            out[nb] = (link, nb, 1)
            todo.append(nb)
    while todo:
        cur = todo.popleft()
        for nb, _ in adj[cur]:
            if nb != src and nb not in out:
                out[nb] = (out[cur][0], out[cur][1], out[cur][2] + 1)
                todo.append(nb)
    out[src] = (None, src, 0)  # type: ignore[assignment]
    return out


def _address_of(pair: tuple[Iface, Iface], node: str) -> str:
    iface = pair[0] if pair[0].node == node else pair[1]
    return iface.address.split("/")[0]


def _iface_of(pair: tuple[Iface, Iface], node: str) -> str:
    return (pair[0] if pair[0].node == node else pair[1]).name


def _host_routes(topo: Topology, plan: NodePlan, ends: dict[str, tuple[Iface, Iface]],
                 adj: dict[str, list[tuple[str, LinkSpec]]]) -> None:
    """A host routes everything via its first path's neighbour; the multi-homed client also gets one
    policy table per path so that traffic sourced from address i leaves by path i."""
    paths = [i for i in range(topo.paths)] if plan.name == topo.client else []
    if plan.name == topo.server:
        links = [topo.path_links(0)[-1][0]]
    elif paths:
        links = [topo.path_links(0)[0][0]]
    else:
        links = [adj[plan.name][0][1]]
    first = links[0]
    peer = first.b if first.a == plan.name else first.a
    plan.routes.append(["default", "via", _address_of(ends[first.id], peer),
                        "dev", _iface_of(ends[first.id], plan.name)])
    if len(adj[plan.name]) < 2:
        return
    for i in paths:
        link, _ = topo.path_links(i)[0]
        peer = link.b if link.a == plan.name else link.a
        table = str(POLICY_TABLE_BASE + i + 1)
        src = _address_of(ends[link.id], plan.name)
        dev = _iface_of(ends[link.id], plan.name)
        plan.routes.append(["default", "via", _address_of(ends[link.id], peer), "dev", dev, "table", table])
        plan.rules.append(["from", src, "table", table, "priority", str(1000 + i)])


# --- shaping commands ------------------------------------------------------------------------


def tbf_burst(bw_mbit: float) -> int:
    """Bytes the rate limiter lets through at line rate after idle (its bucket): a packet of L bytes leaves at
    most (FRAME_BYTES − L) / rate + BURST_S before the rate's schedule."""
    return FRAME_BYTES + math.ceil(bw_mbit * 1e6 / 8 * BURST_S)


def netem_limit(s: Shaping) -> int:
    """Packets in flight inside netem: delay × rate in small packets, plus the queue (≥ 1000)."""
    rate = (s.bw or 1000.0) * 1e6 / 8
    queue = s.queue if s.queue_unit == "packets" else math.ceil(s.queue / 100)
    return max(1000, math.ceil(rate * s.owd / 1e3 / 100) + queue)


#: What a change of one direction can touch on the delay node, in the order its commands go.
PARTS = ("delay", "rate", "queue")


def shaping_commands(dev: str, s: Shaping, backend: str, parts: tuple[str, ...] = PARTS) -> list[list[str]]:
    """tc commands (a `tc -batch` each) setting `parts` of one direction on the delay node's egress `dev`:
    delay (netem backend; the delay element sets its own), rate (tbf) and queue (its child fifo). The tbf
    line carries the queue's limit too: on every change the kernel sets tbf's child fifo to tbf's limit,
    in the fifo's own unit."""
    handles = HANDLES[backend]
    cmds = []
    if backend == "netem" and "delay" in parts:
        cmds.append(["qdisc", "replace", "dev", dev, "root", "handle", handles["netem"], "netem",
                     "delay", f"{s.owd:g}ms", "limit", str(netem_limit(s))])
    if s.bw is None:
        return cmds
    parent = ["root"] if backend == "delayline" else ["parent", handles["netem"].replace(":", ":1")]
    if "rate" in parts:
        cmds.append(["qdisc", "replace", "dev", dev, *parent, "handle", handles["tbf"], "tbf",
                     "rate", f"{s.bw:g}mbit", "burst", str(tbf_burst(s.bw)), "limit", str(s.queue)])
    if "queue" in parts:
        kind = "pfifo" if s.queue_unit == "packets" else "bfifo"
        cmds.append(["qdisc", "replace", "dev", dev, "parent", handles["tbf"].replace(":", ":1"),
                     "handle", handles[s.queue_unit], kind, "limit", str(s.queue)])
    return cmds


def changed_parts(old: Shaping, new: Shaping, backend: str) -> tuple[str, ...]:
    """The parts of a direction that tc must set to go from `old` to `new` (the delay element's own delay
    is not tc's)."""
    parts = []
    if backend == "netem" and new.owd != old.owd:
        parts.append("delay")
    if new.bw != old.bw:
        parts.append("rate")
    if (new.queue, new.queue_unit) != (old.queue, old.queue_unit):
        parts += ["rate", "queue"] if "rate" not in parts else ["queue"]
    return tuple(parts)


def built(qdiscs: list[dict], dev: str) -> dict:
    """A direction's shaping as the kernel has it (from `tc -j qdisc show`): rate (Mbit/s), burst (bytes),
    queue limit and unit, netem's delay (ms) where there is one."""
    out: dict = {}
    for q in qdiscs:
        if q.get("dev", dev) != dev:
            continue
        options = q.get("options") or {}
        if q.get("kind") == "tbf":
            out["rate_mbit"] = round(options.get("rate", 0) * 8 / 1e6, 6)
            out["burst_bytes"] = options.get("burst")
        elif q.get("kind") in ("pfifo", "bfifo"):
            out["queue"] = options.get("limit")
            out["queue_unit"] = "packets" if q["kind"] == "pfifo" else "bytes"
        elif q.get("kind") == "netem":
            delay = options.get("delay") or {}
            if isinstance(delay, dict) and "delay" in delay:
                out["owd_ms"] = round(delay["delay"] * 1e3, 6)
    return out


def as_built(asked: Shaping, qdiscs: list[dict], dev: str) -> dict:
    """A direction's rate limiter and queue as asked, as the kernel holds them (read back), and what differs."""
    have = built(qdiscs, dev)
    return {"asked": {"rate_mbit": asked.bw, "burst_bytes": tbf_burst(asked.bw) if asked.bw else None,
                      "queue": asked.queue, "queue_unit": asked.queue_unit},
            "built": have, "mismatch": built_mismatches(asked, have)}


def built_mismatches(asked: Shaping, have: dict) -> list[str]:
    """What of the rate limiter and queue the kernel holds differs from what was asked (empty: as asked).
    tc stores the burst in time at the rate, so it reads back a few bytes off."""
    if asked.bw is None:
        return []
    wrong = []
    burst = tbf_burst(asked.bw)
    if have.get("rate_mbit") is None or abs(have["rate_mbit"] - asked.bw) > 1e-3 * asked.bw + 1e-6:
        wrong.append(f"rate {have.get('rate_mbit')} Mbit/s, asked {asked.bw:g}")
    if have.get("burst_bytes") is None or abs(have["burst_bytes"] - burst) > max(16, burst // 100):
        wrong.append(f"burst {have.get('burst_bytes')} bytes, asked {burst}")
    if (have.get("queue"), have.get("queue_unit")) != (asked.queue, asked.queue_unit):
        wrong.append(f"queue {have.get('queue')} {have.get('queue_unit')}, asked {asked.describe_queue()}")
    return wrong


def describe(topo: Topology, plan: Layout, resolved: dict[str, dict[str, Shaping]], backend: str) -> dict:
    """Everything `fecbench topo show` prints, as data."""
    out: dict = {"name": topo.name, "file": topo.file, "backend": backend, "paths": topo.paths,
                 "client_addresses": plan.client_addresses, "server_address": plan.server_address,
                 "nodes": [], "links": []}
    for np in plan.nodes.values():
        out["nodes"].append({
            "name": np.name, "role": np.role,
            "interfaces": [{"name": i.name, "address": i.address, "link": i.link} for i in np.ifaces],
            "routes": [" ".join(r) for r in np.routes], "rules": [" ".join(r) for r in np.rules]})
    for link in topo.links:
        entry: dict = {"id": link.id, "ends": [link.a, link.b], "loss": link.loss, "shaped": link.shaped}
        if link.id in resolved:
            dn = plan.delay_nodes[link.id]
            entry["delay_node"] = dn.name
            for d in ("forward", "reverse"):
                s = resolved[link.id][d]
                cmds = [["tc", *c] for c in shaping_commands(dn.egress(d), s, backend)]
                if link.loss:
                    node, iface = dn.loss_point(d)
                    cmds.insert(0, ["dropper", "attach", f"{node}:{iface}", "egress"])
                if backend == "delayline":
                    trace = ["trace", s.trace, f"queue {s.describe_queue()}"] if s.trace else []
                    cmds.insert(1 if link.loss else 0, ["delayline", d, f"{s.owd:g}ms", *trace])
                entry[d] = {"bw_mbit": s.bw, "owd_ms": s.owd, "queue": s.queue, "queue_unit": s.queue_unit,
                            "trace": s.trace,
                            "burst_bytes": tbf_burst(s.bw) if s.bw is not None else None,
                            "egress": dn.egress(d), "commands": [" ".join(c) for c in cmds]}
        out["links"].append(entry)
    return out
