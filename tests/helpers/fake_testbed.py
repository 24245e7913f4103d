"""An in-memory Testbed (fecbench.runners.run.testbed): no namespaces, no BPF, no root.

It records what the engine asks of the network (points configured, losses set, fidelity read) and runs
the implementation's processes as plain local processes, so the engine's logic (ordering, resume,
retry, statuses, circuit breaker, Ctrl-C bookkeeping) is tested with the real Runner, real processes
of the fake implementation and a real SQLite database. Faults are injected by callbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fecbench.runners.run import procs
from fecbench.timekeeping import schedlat


class FakeTestbed:
    backend = "fake"
    prefix = "fake"
    hostname = "fakehost"

    def __init__(self, topology: Any, values: dict[str, Any], backend: str | None, *,
                 measured_rtt: Callable[[dict[str, Any]], float | None] | None = None,
                 on_start: Callable[[str, list[str]], None] | None = None,
                 wake_ns: Callable[[dict[str, Any]], list[int] | None] | None = None) -> None:
        self.topology = topology
        self.values = dict(values)
        self.measured_rtt = measured_rtt          # values -> measured RTT (None: as configured)
        self.on_start = on_start                  # (role, argv) -> may raise (a harness fault, Ctrl-C)
        self.wake_ns = wake_ns                    # values -> the endpoints' wake-up waits (None: not measured)
        self.configured: list[dict[str, Any]] = []
        self.losses: list[tuple[str, str, Any, int, int]] = []
        self.started: list[tuple[str, list[str]]] = []
        self.captures: list[tuple[str, Any]] = []   # ("start", (folder, snaplen, budget_kb)) / ("stop", None)
        self.capturing = False
        self.stopped = False

    @property
    def client_addresses(self) -> list[str]:
        return [f"10.0.{i}.1" for i in range(self.topology.paths)]

    @property
    def server_address(self) -> str:
        return "10.1.0.1"

    @property
    def server_addresses(self) -> list[str]:
        return [self.server_address] * self.topology.paths

    def configure(self, values: dict[str, Any]) -> None:
        self.values = dict(values)
        self.configured.append(dict(values))

    def fidelity(self, rate_probe: bool) -> list[dict[str, Any]]:
        resolved = self.topology.resolve(self.values)
        configured = self.topology.configured_rtt(0, resolved)
        measured = self.measured_rtt(self.values) if self.measured_rtt else None
        measured = configured if measured is None else measured
        return [{"path": 1, "rtt_configured_ms": configured, "rtt_measured_ms": measured,
                 "ok": abs(measured - configured) <= max(0.5, 0.02 * configured)}]

    def set_loss(self, link: str, direction: str, model: Any, seed: int, stream: int,
                 flow_bin_ms: int | None = None, min_len: int = 0) -> None:
        self.losses.append((link, direction, model, seed, stream))

    def flow_counters(self) -> list[dict[str, Any]]:
        return []  # no packets cross an in-memory network

    def link_stats(self) -> list[dict[str, Any]]:
        return [{"link": link, "direction": direction, "dropper": {"seen": 0, "dropped": 0}}
                for link in self.topology.lossy_links() for direction in ("forward", "reverse")]

    def clear_lateness(self) -> None:
        pass

    def clear_endpoint_timing(self) -> None:
        pass

    def endpoint_timing(self) -> dict[str, Any]:
        """The waits `wake_ns` gives for the current point, as the tracer would count them (default: 20
        wake-ups of 20 µs, an idle host)."""
        waits = self.wake_ns(self.values) if self.wake_ns else [20_000] * 20
        if waits is None:
            return {"error": "fake testbed: not measured"}
        return {"reading": {"wake": schedlat.histogram(waits), "preempt": schedlat.histogram([])},
                "upper_ns": schedlat.upper_edges(), "wall_ns": 10**9, "cpu_us": None, "pressure_us": None}

    def open_flow_group(self, flow: str) -> None:
        return None

    def flow_timing(self, group: Any) -> dict[str, Any]:
        return {"error": "fake testbed: not measured"}

    def close_flow_groups(self) -> None:
        pass

    def enable_verdict_logs(self, streams: list[tuple[str, str]]) -> None:
        pass

    def verdict_log(self, link: str, direction: str) -> Any:
        return None

    def start_process(self, role: str, name: str, argv: list[str], log_dir: Path,
                      env: dict[str, str] | None = None, cwd: Path | None = None, group: Any = None) -> procs.Process:
        if self.on_start is not None:
            self.on_start(role, argv)
        self.started.append((role, list(argv)))
        self.captures.append(("process", (role, self.capturing)))
        return procs.start(name, argv, log_dir, host=None, env=env, cwd=cwd)

    def apply_schedule(self, schedule: Any, seed: int, horizon_s: float) -> None:
        return None  # link schedules change real links: tested on real topologies (tests/test_schedule_net.py)

    def start_captures(self, folder: Path, snaplen: int, budget_kb: int, comment: str = "") -> list[str]:
        """No packets here: what was asked is recorded (and whether each process started while capturing)."""
        self.captures.append(("start", (folder, snaplen, budget_kb)))
        self.capturing = True
        return []

    def stop_captures(self) -> list[str]:
        if self.capturing:
            self.captures.append(("stop", None))
        self.capturing = False
        return []

    def stop(self) -> None:
        self.stop_captures()
        self.stopped = True
