"""Build a topology spec into a running switchless Mininet network, reconfigure it, tear it down.

Nodes are Mininet hosts (each in its own network namespace, no OVS, no controller); routers are
hosts with forwarding on. Each shaped link gets a hidden delay node; per direction: the dropper's
clsact program on the sending router's egress toward it, then the delay (a delayline process, or
netem) and tbf on the delay node's egress. Every node and process is recorded with `fecbench.host.cleanup` as
soon as it exists."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from typing import Any

from fecbench.emulation import endpoints, traffic
from fecbench.emulation.backend import select_backend
from fecbench.emulation.layout import Layout, as_built, make_layout, shaping_commands
from fecbench.emulation.link_control import DropperRef, LinkChange, LinkControl, LinkEnd, LinkKey, run_in_nodes
from fecbench.emulation.spec import Topology, first_trace_link
from fecbench.host import cgroups, cleanup
from fecbench.inputs.errors import UserError, require_root
from fecbench.inputs.traces import series_used, trace_used
from fecbench.timekeeping import lateness
from fecbench.timekeeping.delayline import SIDE_OF

_build_counter = itertools.count()


def build_tag(n: int) -> str:
    """The letters that tell this process's networks apart in names: a–z, then aa–zz (702 networks
    alive at once at most; the base name stays within 9 characters, interface names within 15)."""
    n %= 26 + 26 * 26
    if n < 26:
        return chr(ord("a") + n)
    n -= 26
    return chr(ord("a") + n // 26) + chr(ord("a") + n % 26)


# Counters that only grow: the delay element's (per side) and the shaper qdisc's; link_stats reports them
# since the window's start. A counter below its start value was reset (a qdisc replaced): read whole.
class Network:
    """A running topology. Use as a context manager; `stop()` is idempotent."""

    def __init__(self, topo: Topology, values: dict[str, Any] | None = None, backend: str | None = None) -> None:
        self.topo = topo
        self.values = dict(values or {})
        self.shaping = topo.resolve(self.values)         # validates before anything is built
        self.requested_backend = backend
        self.backend: str = ""
        self.base = f"{cleanup.prefix()}{build_tag(next(_build_counter))}"
        self.layout: Layout = make_layout(topo, self.base)
        self.nodes: dict[str, Any] = {}                   # layout node name -> mininet Host
        self.links: list[Any] = []
        self.delaylines: dict[str, Any] = {}              # link id -> DelayLine
        self.droppers: dict[tuple[str, str], Any] = {}    # (link id, direction) -> Dropper
        self.timings: dict[str, float] = {}
        self._recorded: list[str] = []
        self._old_handlers: dict[int, Any] = {}
        self._window: dict[tuple[str, str], dict[str, Any]] = {}   # link_stats at the window's start
        self._running = False
        self.dropper_error: str | None = None
        self.endpoints: cgroups.EndpointGroup | None = None  # the client's and server's cgroup (fecbench.host.cgroups)
        self.endpoint_error: str | None = None

    # --- the runner's view -------------------------------------------------------------------
    @property
    def client(self) -> Any:
        return self.nodes[self.topo.client]

    @property
    def server(self) -> Any:
        return self.nodes[self.topo.server]

    @property
    def client_addresses(self) -> list[str]:
        return list(self.layout.client_addresses)

    @property
    def server_address(self) -> str:
        return self.layout.server_address

    def __enter__(self) -> Network:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- build -------------------------------------------------------------------------------
    def start(self) -> None:
        require_root("building a network")
        self.backend = select_backend(self.requested_backend, first_trace_link(self.shaping))
        t0 = time.perf_counter()
        self._trap_signals()
        try:
            self._build()
        except BaseException:
            self.stop()
            raise
        self._running = True
        self.timings["build_s"] = time.perf_counter() - t0

    def _trap_signals(self) -> None:
        """SIGTERM becomes KeyboardInterrupt, so a with-block (or the builder) tears down first."""
        if threading.current_thread() is not threading.main_thread():
            return

        def interrupted(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        self._old_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, interrupted)

    def _record(self, pid: int, what: str) -> None:
        cleanup.record("pid", str(pid), what=what)
        self._recorded.append(str(pid))

    def _build(self) -> None:
        from mininet.link import Link
        from mininet.node import Host

        self.endpoints, self.endpoint_error = endpoints.make_group(self.base)
        for name in self.layout.nodes:
            endpoint = name in (self.topo.client, self.topo.server)
            host = (endpoints.host_class() if endpoint else Host)(f"{self.base}{name}"[:40], inNamespace=True)
            self.nodes[name] = host
            if endpoint and self.endpoints is not None:
                endpoints.adopt(host, self.endpoints)
            self._record(host.shell.pid if host.shell else host.pid, f"mininet node {name}")
            if host.pid != host.shell.pid:
                self._record(host.pid, f"mininet node {name} (namespace)")
        for _, e1, e2 in self.layout.links:
            self.links.append(Link(self.nodes[e1.node], self.nodes[e2.node], intfName1=e1.name,
                                   intfName2=e2.name, addr1=e1.mac, addr2=e2.mac))
        self._configure_nodes()
        self._initial_shaping()
        if self.backend == "delayline":
            self._start_delaylines()
        self._attach_droppers()

    def _configure_nodes(self) -> None:
        # IPv6 off before any link is up, the delay node's bridge without multicast: else solicitations, MLD and IGMP
        # reports (snooping's router discovery) cross the bottleneck queue: a 201st frame after a 200-datagram burst.
        jobs: list[tuple[int, list[str], str | None]] = []
        sysctl_jobs: list[tuple[int, list[str], str | None]] = []
        for name, np in self.layout.nodes.items():
            pid, lines = self.nodes[name].pid, ["link set dev lo up"]
            sysctls = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                       "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"]
            if np.role == "router":
                sysctls.append("net.ipv4.ip_forward=1")
            for iface in np.ifaces:
                # One packet on the wire is one skb for the dropper and the shaper.
                lines.append(f"link set dev {iface.name} gso_max_segs 1 up")
                if iface.address:
                    lines.append(f"addr add {iface.address} dev {iface.name}")
                    # Static neighbours: no ARP through delay nodes and droppers.
                    lines.append(f"neigh replace {iface.peer_address} lladdr {iface.peer_mac} "
                                 f"dev {iface.name} nud permanent")
            if np.role == "delay" and self.backend == "netem":
                lines += ["link add br0 type bridge stp_state 0 mcast_snooping 0", "link set br0 multicast off up"]
                lines += [f"link set dev {i.name} master br0" for i in np.ifaces]
            lines += ["route add " + " ".join(r) for r in np.routes]
            lines += ["rule add " + " ".join(r) for r in np.rules]
            jobs.append((pid, ["ip", "-batch", "-"], "\n".join(lines) + "\n"))
            sysctl_jobs.append((pid, ["sysctl", "-q", "-w", *sysctls], None))
        run_in_nodes(sysctl_jobs)
        run_in_nodes(jobs)

    def _initial_shaping(self) -> None:
        """tc on every delay node, before the delay elements start (later changes: `change_links`)."""
        jobs: list[tuple[int, list[str], str | None]] = []
        for link_id, pair in self.shaping.items():
            dn = self.layout.delay_nodes[link_id]
            lines = [" ".join(c) for d, s in pair.items() for c in shaping_commands(dn.egress(d), s, self.backend)]
            if lines:
                jobs.append((self.nodes[dn.name].pid, ["tc", "-batch", "-"], "\n".join(lines) + "\n"))
        run_in_nodes(jobs)

    def _start_delaylines(self) -> None:
        from fecbench.host import affinity
        from fecbench.timekeeping.delayline import DelayLine

        for link_id, dn in self.layout.delay_nodes.items():
            pair = self.shaping[link_id]
            node = self.nodes[dn.name]
            # Every CPU, also the one a campaign keeps its other processes off (fecbench.host.affinity).
            dl = DelayLine.start(dn.toward_a, dn.toward_b, pair["forward"].owd, pair["reverse"].owd,
                                 run_in=["mnexec", "-da", str(node.pid)], name=f"{self.base}-{link_id}",
                                 cpus=affinity.delay_cpus())
            self.delaylines[link_id] = dl   # the wrapper records (and forgets) its own process
            for direction, s in pair.items():
                if s.trace is not None:
                    dl.control.set_trace(SIDE_OF[direction], s.trace, s.queue, s.queue_unit)
                if s.delays is not None:
                    dl.control.set_delays(SIDE_OF[direction], s.delays)

    def restart_traces(self) -> None:
        """Every trace and delay series starts again (a trace link's queue empty): each run meets the same link."""
        for link_id, pair in self.shaping.items():
            for direction, s in pair.items():
                for kind, file in (("trace", s.trace), ("delays", s.delays)):
                    if file is not None:
                        self.delaylines[link_id].control.restart_trace(SIDE_OF[direction], kind=kind)

    def _attach_droppers(self) -> None:
        lossy = self.topo.lossy_links()
        if not lossy:
            return
        try:
            from fecbench.dropper import Dropper, NoLoss
        except ImportError as exc:
            self.dropper_error = f"the dropper is not available: {exc}"
            return
        for link_id in lossy:
            for direction in ("forward", "reverse"):
                netns, dev = self.loss_point(link_id, direction)
                self.droppers[(link_id, direction)] = Dropper.attach(
                    dev, netns=netns, direction="egress", model=NoLoss(), seed=0, stream=0,
                    name=f"{self.base}-{link_id}-{direction}")

    def loss_point(self, link_id: str, direction: str) -> tuple[int, str]:
        """(PID of the node whose namespace holds it, interface) of a direction's dropper hook."""
        if link_id not in self.layout.delay_nodes:
            raise UserError(f"link {link_id!r} is not shaped: losses apply on shaped links only")
        node, dev = self.layout.delay_nodes[link_id].loss_point(direction)
        return self.nodes[node].pid, dev

    def attach_dropper(self, link_id: str, direction: str, log: bool = False) -> Any:
        """Replace a direction's dropper by a fresh one (model none), e.g. with a verdict log."""
        from fecbench.dropper import Dropper, NoLoss

        key = (link_id, direction)
        old = self.droppers.pop(key, None)
        if old is not None:
            old.detach()
        netns, dev = self.loss_point(link_id, direction)
        self.droppers[key] = Dropper.attach(dev, netns=netns, direction="egress", model=NoLoss(),
                                            seed=0, stream=0, log=log,
                                            name=f"{self.base}-{link_id}-{direction}{'-log' if log else ''}")
        return self.droppers[key]

    # --- reconfigure -------------------------------------------------------------------------
    def configure(self, values: dict[str, Any], flush: bool = False) -> None:
        """Change bw, owd and queue of every shaped link without rebuilding, so that the delay elements
        hold nothing of the previous run afterwards: they are drained first (``drain``), or, with
        ``flush`` (between runs: what they hold belongs to a run that ended), emptied at the end, which
        also discards a straggler that arrived during the change at the old delay."""
        t0 = time.perf_counter()
        if not flush:
            self.drain()
        merged = {**self.values, **values}
        shaping = self.topo.resolve(merged)
        self.change_links({(link_id, d): LinkChange(shaping=s) for link_id, pair in shaping.items()
                           for d, s in pair.items() if s != self.shaping[link_id][d]})
        self.values, self.shaping = merged, shaping
        if flush:
            self.flush()
        self.timings["configure_s"] = time.perf_counter() - t0

    def link_end(self, link_id: str, direction: str) -> LinkEnd:
        """One direction ("forward", "reverse") of a shaped link, as a process needs it to change it."""
        if link_id not in self.layout.delay_nodes or direction not in ("forward", "reverse"):
            raise UserError(f"no shaped link {link_id!r}, {direction!r} (shaped: {', '.join(self.layout.delay_nodes)})")
        dn, line = self.layout.delay_nodes[link_id], self.delaylines.get(link_id)
        dropper = self.droppers.get((link_id, direction))
        return LinkEnd(link_id, direction, self.backend, dn.name, self.nodes[dn.name].pid, dn.egress(direction),
                       self.shaping[link_id][direction], str(line.control_path) if line else None,
                       DropperRef(str(dropper.pin), dropper.seed, dropper.stream) if dropper else None)

    def change_links(self, changes: dict[LinkKey, LinkChange]) -> dict[LinkKey, dict[str, Any]]:
        """Change links now (delay, rate, queue; loss probability and outages in place): what was set
        per (link, direction). `shaping` then holds the new values."""
        with LinkControl([self.link_end(*key) for key in changes], delays=self.delaylines) as control:
            applied = control.apply(changes)
        shaping = dict(self.shaping)  # a new dict: whoever holds the old one keeps what it said
        for (link_id, direction), change in changes.items():
            if change.shaping is not None:
                shaping[link_id] = {**shaping[link_id], direction: change.shaping}
        self.shaping = shaping
        return applied

    def flush(self) -> int:
        """Discard every frame the delay elements hold (netem: nothing to do); how many. A run's last
        frames (e.g. the client's CONNECTION_CLOSE on its way to a server already stopped) would
        otherwise be waited for: up to one one-way delay per run."""
        return sum(line.flush() for line in self.delaylines.values())

    def drain(self, limit_s: float = 5.0) -> None:
        """Wait until no delay element holds a frame (at most ``limit_s``). A delay element is a FIFO:
        a frame still queued at a run's longer delay would hold back the next run's frames at a
        shorter one (measured: first frames 48–119 ms late, fidelity pings 81 ms for 10 configured)."""
        deadline = time.monotonic() + limit_s
        for line in self.delaylines.values():
            while time.monotonic() < deadline:
                stats = line.stats()
                if not any(stats.get(d, {}).get("queue", 0) for d in ("ab", "ba")):
                    break
                time.sleep(0.01)

    def set_loss(self, link_id: str, direction: str, model: Any, seed: int = 0, stream: int = 0,
                 flow_bin_ms: int | None = None, min_len: int = 0) -> None:
        """Loss model of one direction ("forward" = client→server, "reverse") of a lossy link (Dropper.set)."""
        if direction not in ("forward", "reverse"):
            raise UserError(f"direction must be forward or reverse, got {direction!r}")
        key = (link_id, direction)
        if key not in self.droppers and self.dropper_error:
            raise UserError(self.dropper_error)
        if key not in self.droppers:
            raise UserError(f"link {link_id!r} is not lossy (lossy links: {', '.join(self.topo.lossy_links())})")
        self.droppers[key].set(model=model, seed=seed, stream=stream, flow_bin_ms=flow_bin_ms, min_len=min_len)

    def clear_lateness(self) -> None:
        """Start a new window (a run's; trace links start their traces again) for what ``link_stats`` reports: the
        delay elements' lateness, and the counters of the delay elements and shaper qdiscs, which only grow over
        the network's life (fidelity probes, earlier runs: read whole, a run's queue drops included the rate
        probe's)."""
        for line in self.delaylines.values():
            line.clear_lateness()
        self.restart_traces()
        self._window = {(row["link"], row["direction"]): row for row in self._link_counters()}
        self._window_ns = time.monotonic_ns()

    def link_stats(self) -> list[dict[str, Any]]:
        """Per shaped link and direction: dropper counters, delay element and tbf qdisc statistics, the
        delay element's lateness (judged against the window's wall time) and both their counters since
        ``clear_lateness``."""
        started = getattr(self, "_window_ns", None)
        rows = self._link_counters(None if started is None else (time.monotonic_ns() - started) / 1e6)
        for row in rows:
            start = self._window.get((row["link"], row["direction"]))
            if start:
                row["delay"] = lateness.delay_since(row["delay"], start["delay"])
                started = {q.get("kind"): q for q in start["qdiscs"]}
                row["qdiscs"] = [lateness.counters_since(q, started.get(q.get("kind"), {}), lateness.QDISC_COUNTERS)
                                 for q in row["qdiscs"]]
        return rows

    def _link_counters(self, wall_ms: float | None = None) -> list[dict[str, Any]]:
        out = []
        for link_id, dn in self.layout.delay_nodes.items():
            # The droppers first: a packet they counted is then, when the delay element is read, sent,
            # queued or refused there (read the other way round, one passing the dropper in between was
            # in neither count: a run's frames fell 3 short of its dropper's once, at a run's end).
            droppers = {direction: self.droppers.get((link_id, direction)) for direction in ("forward", "reverse")}
            dropped = {direction: d.stats() if d else None for direction, d in droppers.items()}
            # One `tc` for both directions: every qdisc of the delay node, each naming its device.
            proc = subprocess.run(["mnexec", "-da", str(self.nodes[dn.name].pid), "tc", "-s", "-j", "qdisc", "show"],
                                  capture_output=True, text=True, check=False)
            shown: list[dict[str, Any]] = []
            with contextlib.suppress(json.JSONDecodeError):
                shown = json.loads(proc.stdout or "[]")
            qdiscs = {direction: [q for q in shown if q.get("dev") == dn.egress(direction)
                                  and q.get("kind") in ("tbf", "netem")]
                      for direction in ("forward", "reverse")}
            delay = self.delaylines[link_id].stats() if link_id in self.delaylines else None
            idle = {d: self.delaylines[link_id].control.trace_idle(SIDE_OF[d]) for d, s in
                    self.shaping[link_id].items() if s.trace is not None}   # trace links: where they idled
            for direction in ("forward", "reverse"):
                counts = (delay or {}).get(SIDE_OF[direction])
                out.append({
                    "link": link_id, "direction": direction, "backend": self.backend, "dropper": dropped[direction],
                    "delay": delay, "lateness": lateness.summary(counts, (delay or {}).get("late_edges_us"), wall_ms),
                    "qdiscs": [{k: q.get(k) for k in ("kind", "bytes", "packets", "drops", "overlimits",
                                                      "backlog", "qlen")}
                               for q in qdiscs.get(direction, [])],
                    "trace": trace_used(self.shaping[link_id][direction].trace, counts, idle.get(direction)),
                    "delays": series_used(self.shaping[link_id][direction].delays, counts),
                    **as_built(self.shaping[link_id][direction], shown, dn.egress(direction))})
        return out

    def interface_counters(self, node: str) -> dict[str, dict[str, int]]:
        """Packet and byte counters of every interface of a node (spec or delay node name)."""
        proc = subprocess.run(["mnexec", "-da", str(self.nodes[node].pid), "ip", "-s", "-j", "link", "show"],
                              capture_output=True, text=True, check=True)
        out = {}
        for link in json.loads(proc.stdout):
            stats = link.get("stats64") or link.get("stats") or {}
            out[link["ifname"]] = {"rx_packets": stats.get("rx", {}).get("packets", 0),
                                   "tx_packets": stats.get("tx", {}).get("packets", 0),
                                   "rx_bytes": stats.get("rx", {}).get("bytes", 0),
                                   "tx_bytes": stats.get("tx", {}).get("bytes", 0)}
        return out

    def send_probe(self, src: str, count: int, pps: float = 1000.0, port: int = 9000,
                   timeout: float | None = None) -> dict[str, Any]:
        """Numbered datagrams from the client's address `src` to the server, as the receiver saw them
        (fecbench.emulation.traffic)."""
        return traffic.send_probe(self, src, count, pps, port, timeout)

    # --- fidelity ----------------------------------------------------------------------------
    def fidelity(self, rate_probe: bool = False) -> list[dict[str, Any]]:
        """Per path: configured vs measured RTT from one-way delay probes, lateness, optionally the rate
        (fecbench.emulation.fidelity)."""
        from fecbench.emulation import fidelity

        return fidelity.measure(self, rate_probe=rate_probe)

    def udp_rate(self, src: str, mbit: float, seconds: float = 1.0, port: int = 5201) -> float | None:
        """UDP payload throughput (Mbit/s) the server receives from `src` (fecbench.emulation.traffic)."""
        return traffic.udp_rate(self, src, mbit, seconds, port)

    # --- teardown ----------------------------------------------------------------------------
    def stop(self) -> None:
        t0 = time.perf_counter()
        masked = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                masked[sig] = signal.signal(sig, signal.SIG_IGN)
        try:
            for dropper in self.droppers.values():
                with contextlib.suppress(Exception):
                    dropper.detach()
            self.droppers.clear()
            for dl in self.delaylines.values():
                with contextlib.suppress(Exception):
                    dl.stop()
            self.delaylines.clear()
            shells = [n.shell for n in self.nodes.values() if n.shell]
            for shell in shells:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(shell.pid, signal.SIGKILL)
            for shell in shells:
                with contextlib.suppress(Exception):
                    shell.wait(timeout=5)
            for node in self.nodes.values():
                with contextlib.suppress(Exception):
                    node.cleanup()
                    node.shell = None
            self.nodes.clear()
            self.links.clear()
            if self.endpoints is not None:
                self.endpoints.remove()  # left to `fecbench clean` if a process is still in it
                self.endpoints = None
            for pid in self._recorded:
                cleanup.forget("pid", pid)
            self._recorded.clear()
        finally:
            for sig, handler in masked.items():
                signal.signal(sig, handler)
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)
            self._old_handlers.clear()
        self._running = False
        self.timings["stop_s"] = time.perf_counter() - t0
