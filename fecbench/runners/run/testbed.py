"""The typed boundary between the campaign engine and the network: a `Testbed`.

The engine (and the `Runner` that executes one run) only ever talks to a network through this small
interface: configure the links for a point, read fidelity, seed the droppers, read link statistics
and verdict logs, start a process on the client or the server. `MininetTestbed` is the only
implementation users run (Mininet hosts, droppers, delay elements; see fecbench.emulation); the tests
hold an in-memory one so the engine's logic is tested without root.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from fecbench.runners.run import procs
from fecbench.timekeeping import endpoint_timing
from fecbench.timekeeping.delayline import SIDE_OF

if TYPE_CHECKING:
    import numpy as np

    from fecbench.dropper import LossModel
    from fecbench.emulation.pcap import Captures
    from fecbench.emulation.schedule import Schedule
    from fecbench.emulation.schedule_apply import ScheduleApplier
    from fecbench.emulation.spec import Topology
    from fecbench.host.cgroups import EndpointGroup
    from fecbench.timekeeping.schedlat import Slot

Role = Literal["server", "client"]


class RunProcess(Protocol):
    """A started program (fecbench.runners.run.procs.Process is the real one)."""

    name: str

    @property
    def pid(self) -> int: ...
    @property
    def wall_ms(self) -> float | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float) -> int | None: ...
    def output(self) -> str: ...
    def log_tail(self) -> str: ...
    def terminate(self) -> None: ...
    def stop(self, grace_s: float = 2.0) -> None: ...


class ScheduleRun(Protocol):
    """A link schedule being applied during a run; stop() undoes it and returns the changes as applied."""

    def stop(self) -> list[dict[str, Any]]: ...


class Testbed(Protocol):
    """One emulated network a campaign's runs execute on, one run at a time."""

    backend: str            # the link backend in use: "netem" | "delayline" (recorded with every run)
    prefix: str             # the per-network name prefix of its interfaces, namespaces, droppers
    hostname: str           # the host it runs on (runs.host)

    @property
    def client_addresses(self) -> list[str]: ...
    @property
    def server_address(self) -> str: ...
    @property
    def server_addresses(self) -> list[str]: ...
    def configure(self, values: dict[str, Any]) -> None: ...
    def fidelity(self, rate_probe: bool) -> list[dict[str, Any]]: ...
    def set_loss(self, link: str, direction: str, model: LossModel, seed: int, stream: int,
                 flow_bin_ms: int | None = None, min_len: int = 0) -> None: ...
    def flow_counters(self) -> list[dict[str, Any]]: ...
    def link_stats(self) -> list[dict[str, Any]]: ...
    def clear_lateness(self) -> None: ...
    def clear_endpoint_timing(self) -> None: ...
    def endpoint_timing(self) -> dict[str, Any]: ...
    def open_flow_group(self, flow: str) -> EndpointGroup | None: ...
    def flow_timing(self, group: EndpointGroup | None) -> dict[str, Any]: ...
    def close_flow_groups(self) -> None: ...
    def enable_verdict_logs(self, streams: list[tuple[str, str]]) -> None: ...
    def verdict_log(self, link: str, direction: str) -> np.ndarray | None: ...
    def start_process(self, role: Role, name: str, argv: list[str], log_dir: Path,
                      env: dict[str, str] | None = None, cwd: Path | None = None,
                      group: EndpointGroup | None = None) -> RunProcess: ...
    def apply_schedule(self, schedule: Schedule | None, seed: int, horizon_s: float) -> ScheduleRun | None: ...
    def start_captures(self, folder: Path, snaplen: int, budget_kb: int, comment: str = "") -> list[str]: ...
    def stop_captures(self) -> list[str]: ...
    def stop(self) -> None: ...


class MininetTestbed:
    """A fecbench.emulation.Network seen through the Testbed interface."""

    def __init__(self, topology: Topology, values: dict[str, Any], backend: str | None) -> None:
        from fecbench.emulation import Network

        self.net = Network(topology, values, backend=backend)
        self.net.start()
        self.backend = str(self.net.backend)
        self.prefix = self.net.base
        self.hostname = socket.gethostname()
        self.endpoint_slot: Slot | None = None
        self.endpoint_error = self.net.endpoint_error
        # (cgroup, tracer slot) of the run's competing flows
        self.flow_groups: list[tuple[EndpointGroup, Slot | None]] = []
        self.window: tuple[int, int | None, int | None] = (time.monotonic_ns(), None, None)
        self.captures: Captures | None = None     # the run's packet captures
        self.queue_counting: set[tuple[str, str]] = set()   # (link, direction) whose delay element counts flows
        if self.net.endpoints is not None:
            self._track_endpoints()

    def _track_endpoints(self) -> None:
        """A slot of the process's scheduler tracer for this network's endpoint group (timekeeping.schedlat)."""
        from fecbench.timekeeping import schedlat

        assert self.net.endpoints is not None
        try:
            tracer = schedlat.Tracer.acquire()
        except schedlat.Unavailable as exc:
            self.endpoint_error = f"no scheduler tracer: {exc}"
            return
        try:
            self.endpoint_slot = tracer.track(self.net.endpoints.id)
        except schedlat.Unavailable as exc:
            tracer.release()
            self.endpoint_error = f"no scheduler tracer: {exc}"

    @property
    def client_addresses(self) -> list[str]:
        return [str(a) for a in self.net.client_addresses]

    @property
    def server_address(self) -> str:
        return str(self.net.server_address)

    @property
    def server_addresses(self) -> list[str]:
        """The server's address on each path (its address on the last link of that path)."""
        return [str(a) for a in self.net.layout.server_addresses]

    def configure(self, values: dict[str, Any]) -> None:
        """Between runs: the previous run's processes are stopped, so what the delay elements still
        hold is its (flushed, not waited for), then the links take this run's values."""
        self.net.configure(values, flush=True)

    def fidelity(self, rate_probe: bool) -> list[dict[str, Any]]:
        return [dict(row) for row in self.net.fidelity(rate_probe=rate_probe)]

    def set_loss(self, link: str, direction: str, model: LossModel, seed: int, stream: int,
                 flow_bin_ms: int | None = None, min_len: int = 0) -> None:
        """The dropper's model of one direction of a lossy link (and with `flow_bin_ms`, its per-flow counters
        from now; `min_len`: shorter frames pass without an index); with per-flow counters, the link's delay
        element counts that direction's flows from now too: what each flow brought to the bottleneck queue and
        what the queue refused (its tail drops)."""
        self.net.set_loss(link, direction, model, seed=seed, stream=stream, flow_bin_ms=flow_bin_ms,
                          min_len=min_len)
        line = self.net.delaylines.get(link)
        if line is not None and (flow_bin_ms is not None or (link, direction) in self.queue_counting):
            line.control.count_flows(SIDE_OF[direction], flow_bin_ms)
            if flow_bin_ms is None:
                self.queue_counting.discard((link, direction))
            else:
                self.queue_counting.add((link, direction))

    def flow_counters(self) -> list[dict[str, Any]]:
        """Each dropper's per-flow counters (fecbench.dropper: rows proto, sport, dport, bin, packets, bytes,
        dropped; t0_ns, bin_ns), with its link and direction, and `queue`: what the link's delay element counted
        per flow in that direction (rows proto, sport, dport, bin, packets, bytes, dropped, dropped_bytes: what
        arrived at the bottleneck queue and what it refused; t0_ns, bin_ns), None where nothing counted them
        (the netem backend: its queue's drops are not attributed to flows)."""
        queues: dict[str, dict[str, Any]] = {}
        for link, line in self.net.delaylines.items():
            if any(counted == link for counted, _ in self.queue_counting):
                queues[link] = line.control.flow_stats()
        out = []
        for (link, direction), dropper in self.net.droppers.items():
            queue = queues.get(link, {}).get(SIDE_OF[direction])
            out.append({"link": link, "direction": direction, **dropper.flows(),
                        "queue": queue if queue and queue.get("counting") else None})
        return out

    def link_stats(self) -> list[dict[str, Any]]:
        return self.net.link_stats()

    def clear_lateness(self) -> None:
        self.net.clear_lateness()

    def clear_endpoint_timing(self) -> None:
        """Start a new endpoint-timing window: the tracer slot zeroed, the cgroup's counters noted."""
        group = self.net.endpoints
        if self.endpoint_slot is not None:
            self.endpoint_slot.clear()
        self.window = (time.monotonic_ns(), group.cpu_usage_us() if group else None,
                       group.pressure_us() if group else None)

    def endpoint_timing(self) -> dict[str, Any]:
        """What the endpoints' threads waited for a CPU since `clear_endpoint_timing`: the tracer slot's
        reading, the histogram edges, the window's wall time and the cgroup's CPU time and pressure in it
        (the arguments of fecbench.timekeeping.endpoint_timing.summary); {"error": why} when not measured here."""
        if self.endpoint_slot is None:
            return {"error": self.endpoint_error or "endpoint timing unavailable"}
        group = self.net.endpoints
        assert group is not None
        start, cpu0, psi0 = self.window
        cpu, psi = group.cpu_usage_us(), group.pressure_us()
        readings = [self.endpoint_slot.read(), *(slot.read() for _, slot in self.flow_groups if slot is not None)]
        return {"reading": endpoint_timing.merge_readings(readings),
                "upper_ns": self.endpoint_slot.tracer.layout.upper_ns,
                "wall_ns": time.monotonic_ns() - start,
                "cpu_us": None if cpu is None or cpu0 is None else cpu - cpu0,
                "pressure_us": None if psi is None or psi0 is None else psi - psi0}

    def enable_verdict_logs(self, streams: list[tuple[str, str]]) -> None:
        """Re-attach these droppers with a verdict log (the network attaches them without one)."""
        for link, direction in streams:
            old = self.net.droppers.get((link, direction))
            if old is not None and not getattr(old, "log", False):
                self.net.attach_dropper(link, direction, log=True)

    def verdict_log(self, link: str, direction: str) -> np.ndarray | None:
        dropper = self.net.droppers.get((link, direction))
        if dropper is None or not getattr(dropper, "log", False):
            return None
        return dropper.verdict_log()

    def open_flow_group(self, flow: str) -> EndpointGroup | None:
        """A cgroup inside the network's endpoint group for a competing flow's processes, with a tracer slot
        of its own (None where endpoint timing is unavailable: the flow then runs in the network's group)."""
        if self.net.endpoints is None:
            return None
        from fecbench.host import cgroups

        group = cgroups.EndpointGroup.create(flow, parent=self.net.endpoints)
        slot = self.endpoint_slot.tracer.track(group.id) if self.endpoint_slot is not None else None
        self.flow_groups.append((group, slot))
        return group

    def flow_timing(self, group: EndpointGroup | None) -> dict[str, Any]:
        """A competing flow's own endpoint timing since its group was opened (as `endpoint_timing`); None:
        the network's own group alone (the foreground's processes)."""
        if group is None:
            slot, group = self.endpoint_slot, self.net.endpoints
        else:
            slot = next((s for g, s in self.flow_groups if g is group), None)
        if slot is None or group is None:
            return {"error": self.endpoint_error or "endpoint timing unavailable"}
        start = self.window[0]
        return {"reading": slot.read(), "upper_ns": slot.tracer.layout.upper_ns,
                "wall_ns": time.monotonic_ns() - start, "cpu_us": group.cpu_usage_us(),
                "pressure_us": group.pressure_us()}

    def close_flow_groups(self) -> None:
        """After a run (its processes stopped): the flows' slots released, their cgroups removed."""
        for group, slot in reversed(self.flow_groups):
            if slot is not None:
                slot.release()
            group.remove()
        self.flow_groups.clear()

    def start_process(self, role: Role, name: str, argv: list[str], log_dir: Path,
                      env: dict[str, str] | None = None, cwd: Path | None = None,
                      group: EndpointGroup | None = None) -> procs.Process:
        host = self.net.server if role == "server" else self.net.client
        return procs.start(name, argv, log_dir, host=host, env=env, cwd=cwd, group=group)

    def apply_schedule(self, schedule: Schedule | None, seed: int, horizon_s: float) -> ScheduleApplier | None:
        """Start the design's link schedule (None: the design has none); its clock starts now."""
        from fecbench.emulation.schedule_apply import ScheduleApplier

        return ScheduleApplier.for_run(schedule, self.net, seed, horizon_s)

    def start_captures(self, folder: Path, snaplen: int, budget_kb: int, comment: str = "") -> list[str]:
        """Packet captures at the client's interfaces and at each bottleneck, into `folder/<where>.pcapng`
        (fecbench.emulation.pcap), together within `budget_kb`; what did not start."""
        from fecbench.emulation.pcap import Captures

        self.stop_captures()
        self.captures = Captures.start(self.net, folder, snaplen, budget_kb, comment)
        return self.captures.problems

    def stop_captures(self) -> list[str]:
        """Stop the run's captures (none running: nothing); notes on those that stopped before."""
        captures, self.captures = self.captures, None
        return captures.stop() if captures is not None else []

    def stop(self) -> None:
        self.stop_captures()
        self.close_flow_groups()
        slot, self.endpoint_slot = self.endpoint_slot, None
        if slot is not None:
            slot.release()
            slot.tracer.release()
        self.net.stop()
