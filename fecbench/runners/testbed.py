"""The typed boundary between the campaign engine and the network: a `Testbed`.

The engine (and the `Runner` that executes one run) only ever talks to a network through this small
interface: configure the links for a point, read fidelity, seed the droppers, read link statistics
and verdict logs, start a process on the client or the server. `MininetTestbed` is the only
implementation users run (Mininet hosts, droppers, delay elements; see fecbench.topologies); the tests
hold an in-memory one so the engine's logic is tested without root.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Literal, Protocol

from fecbench.runners import procs

Role = Literal["server", "client"]


class RunProcess(Protocol):
    """A started program (fecbench.runners.procs.Process is the real one)."""

    name: str

    @property
    def pid(self) -> int: ...
    @property
    def wall_ms(self) -> float | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float) -> int | None: ...
    def output(self) -> str: ...
    def log_tail(self) -> str: ...
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
    def set_loss(self, link: str, direction: str, model: Any, seed: int, stream: int) -> None: ...
    def link_stats(self) -> list[dict[str, Any]]: ...
    def clear_lateness(self) -> None: ...
    def enable_verdict_logs(self, streams: list[tuple[str, str]]) -> None: ...
    def verdict_log(self, link: str, direction: str) -> Any: ...
    def start_process(self, role: Role, name: str, argv: list[str], log_dir: Path,
                      env: dict[str, str] | None = None, cwd: Path | None = None) -> RunProcess: ...
    def apply_schedule(self, schedule: Any, seed: int, horizon_s: float) -> ScheduleRun | None: ...
    def stop(self) -> None: ...


class MininetTestbed:
    """A fecbench.topologies.Network seen through the Testbed interface."""

    def __init__(self, topology: Any, values: dict[str, Any], backend: str | None) -> None:
        from fecbench.topologies import Network

        self.net = Network(topology, values, backend=backend)
        self.net.start()
        self.backend = str(self.net.backend)
        self.prefix = self.net.base
        self.hostname = socket.gethostname()

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

    def set_loss(self, link: str, direction: str, model: Any, seed: int, stream: int) -> None:
        self.net.set_loss(link, direction, model, seed=seed, stream=stream)

    def link_stats(self) -> list[dict[str, Any]]:
        return self.net.link_stats()

    def clear_lateness(self) -> None:
        self.net.clear_lateness()

    def enable_verdict_logs(self, streams: list[tuple[str, str]]) -> None:
        """Re-attach these droppers with a verdict log (the network attaches them without one)."""
        for link, direction in streams:
            old = self.net.droppers.get((link, direction))
            if old is not None and not getattr(old, "log", False):
                self.net.attach_dropper(link, direction, log=True)

    def verdict_log(self, link: str, direction: str) -> Any:
        dropper = self.net.droppers.get((link, direction))
        if dropper is None or not getattr(dropper, "log", False):
            return None
        return dropper.verdict_log()

    def start_process(self, role: Role, name: str, argv: list[str], log_dir: Path,
                      env: dict[str, str] | None = None, cwd: Path | None = None) -> procs.Process:
        host = self.net.server if role == "server" else self.net.client
        return procs.start(name, argv, log_dir, host=host, env=env, cwd=cwd)

    def apply_schedule(self, schedule: Any, seed: int, horizon_s: float) -> Any:
        """Start the design's link schedule (None: the design has none); its clock starts now."""
        from fecbench.topologies.schedule_apply import ScheduleApplier

        return ScheduleApplier.for_run(schedule, self.net, seed, horizon_s)

    def stop(self) -> None:
        self.net.stop()
