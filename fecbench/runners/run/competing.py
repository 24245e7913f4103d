"""A run's competing flows (`[[flow]]`, fecbench.runners.experiment.flows) while the runner measures the foreground.

Order of a run with flows: every flow's server starts (and is ready) with the foreground's; the flows
whose start lies before the foreground's (negative `start_s`) start at their times, each followed, when
it asks, by a wait until the links carried `ready_packets` of its packets (its steady state); then the
foreground client starts (time 0), and the later flows start at their times while it runs. When the
foreground client has ended, the flows that only compete (bulk, iperf3) are stopped and the others are
waited for, all within the design's time limit. Each flow gets its own port (the foreground's + 1000 ×
rank), its own folder in the run's folder, and, where the machine has endpoint cgroups, a cgroup of its
own inside the network's (its endpoint timing). The droppers count every flow's packets per time bin
(fecbench.dropper, per-flow counters), and the delay elements what each flow brought to the bottleneck
queue behind them and what that queue refused (delayline's per-flow counters), so each flow's bytes, drops
(the loss model's and the queue's) and throughput through the bottleneck over time are known whatever
implementation it is; `records` gives one row per flow and one for the foreground (the flows table).

A flow's times are when it ran, on the run's clock (s from the foreground client's start): its client's
start, and its exit as the harness saw it happen (each client's pidfd is watched while the foreground
runs, so a download that ends early ends then, not when the run next looked), or, for a flow that only
competes, the moment the run stopped it.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.runners.experiment.flows import FlowInstance, FlowSpec
from fecbench.runners.run import flow_rows, procs
from fecbench.runners.run.procs import wait_ready
from fecbench.runners.run.run_metrics import MetricsError, collect_metrics, partial_metrics
from fecbench.runners.run.testbed import RunProcess, Testbed
from fecbench.timekeeping import endpoint_timing

if TYPE_CHECKING:
    from fecbench.host.cgroups import EndpointGroup

IPERF3_READY = r"^Server listening on"
POLL_S = 0.05
#: How long a stopped flow's client may take to end (SIGTERM, then SIGKILL): fecq's client still fetches
#: its server's counters and writes its metrics, within its own 2.5 s (a round trip behind a full queue).
STOP_GRACE_S = 3.0


@dataclass
class Running:
    """One flow in a run: its instance, folder, placeholders, group and processes."""
    flow: FlowInstance
    folder: Path
    port: int
    values: dict[str, Any] = field(default_factory=dict)
    group: EndpointGroup | None = None
    server: RunProcess | None = None
    client: RunProcess | None = None
    started_at: float | None = None       # monotonic times its client started and ended
    ended_at: float | None = None
    exited_at: float | None = None        # monotonic time its client exited, seen as it happened
    pidfd: int | None = None              # its client's pidfd while it runs (None: not watched)
    stopped: bool = False                 # stopped by the run (it only competed), not ended by itself
    status: str = "pending"
    error: str | None = None
    metrics: dict[str, Any] | None = None


class CompetingFlows:
    """The flows of one run on one testbed."""

    def __init__(self, testbed: Testbed, flows: list[FlowInstance], run_dir: Path, values: dict[str, Any],
                 timeout_s: float, processes: list[RunProcess]) -> None:
        self.testbed, self.timeout_s, self.processes = testbed, timeout_s, processes
        self.origin: float | None = None   # monotonic time of the foreground client's start
        self.foreground_fd: int | None = None   # the foreground client's pidfd while it runs
        self.running: list[Running] = []
        for flow in flows:
            folder = run_dir / "flows" / flow.id.replace("#", "-")
            folder.mkdir(parents=True)
            port = int(values["port"]) + 1000 * flow.rank
            placeholders = {**values, "port": port, "metrics_path": str(folder / "metrics.json"),
                            "download_path": str(folder / "download"), "run_dir": str(folder),
                            "www_dir": str(folder / "www"), "workload": flow.spec.workload,
                            **_path_addresses(values, flow.spec.path)}
            self.running.append(Running(flow, folder, port, placeholders))

    # --- start ---------------------------------------------------------------------------------------
    def start_servers(self) -> str | None:
        """Every flow's server, ready; why not, else None."""
        for r in self.running:
            r.group = self.testbed.open_flow_group(r.flow.id.replace("#", "-"))
            argv, pattern, delay = self._server(r)
            r.server = self.testbed.start_process("server", f"flow-{r.folder.name}-server", argv, r.folder,
                                                  env=self._env(r, "server"), cwd=r.folder, group=r.group)
            self.processes.append(r.server)
            not_ready = wait_ready(r.server, pattern, delay, self.timeout_s)
            if not_ready:
                r.status, r.error = "failed", not_ready
                return f"flow {r.flow.id}: {not_ready}"
        return None

    def lead_s(self) -> float:
        """How long before the foreground client the first flow starts."""
        return max([0.0, *(-r.flow.start_s for r in self.running)])

    def start_before(self, deadline: float) -> str | None:
        """Start the flows due before the foreground (at `deadline` - their lead), each ready if it asks;
        why one could not start, else None. The foreground starts no earlier than the last one's readiness."""
        origin = deadline
        for r in self.running:
            if r.flow.start_s >= 0:
                continue
            _sleep_until(origin + r.flow.start_s)
            self._start_client(r)
            if r.flow.spec.ready_packets and not self._wait_packets(r, r.flow.spec.ready_packets):
                return f"flow {r.flow.id}: fewer than {r.flow.spec.ready_packets} packets through the links " \
                       f"after {self.timeout_s:g} s"
        return None

    def started_foreground(self, at: float, client: RunProcess | None = None) -> None:
        """The foreground client started at monotonic time `at`: time 0 of the run (`client`: watched, so that
        waiting for it also sees the flows' clients exit)."""
        self.origin = at
        if client is not None:
            self.foreground_fd = procs.pidfd(client)

    def wait(self, until: float, foreground: RunProcess | None = None) -> bool:
        """Wait until monotonic time `until`, or until the `foreground` client exits (True), or, without one,
        until every flow client still running has exited; each flow client's exit is noted as it happens
        (`exited_at`: its pidfd turned readable; a client without one is polled every POLL_S)."""
        while True:
            watched = {r.pidfd: r for r in self.running
                       if r.pidfd is not None and r.exited_at is None and not r.stopped}
            polled = [r for r in self.running if r.client is not None and r.pidfd is None
                      and r.exited_at is None and not r.stopped]
            fg_fd = self.foreground_fd if foreground is not None else None
            if foreground is None and not watched and not polled:
                return False
            left = until - time.monotonic()
            if polled or (foreground is not None and fg_fd is None):
                left = min(left, POLL_S)
            fds = [*watched, *([fg_fd] if fg_fd is not None else [])]
            ready = select.select(fds, [], [], max(0.0, left))[0] if fds else procs.pause(left)
            now = time.monotonic()
            for fd in ready:
                if fd in watched:
                    watched[fd].exited_at = now
                    _close(watched[fd])
            for r in polled:
                if r.client is not None and r.client.poll() is not None:
                    r.exited_at = now
            if foreground is not None and ((fg_fd is not None and fg_fd in ready)
                                           or (fg_fd is None and foreground.poll() is not None)):
                self._close_foreground()
                return True
            if now >= until:
                return False

    def _close_foreground(self) -> None:
        if self.foreground_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.foreground_fd)
            self.foreground_fd = None

    def start_due(self) -> None:
        """Start the later flows whose time has come (call while the foreground runs)."""
        assert self.origin is not None
        now = time.monotonic()
        for r in self.running:
            due = r.flow.start_s >= 0 and now >= self.origin + r.flow.start_s
            if due and r.client is None and r.status == "pending":
                self._start_client(r)

    def next_start(self) -> float | None:
        """Monotonic time of the next flow still to start, if any."""
        assert self.origin is not None
        due = [self.origin + r.flow.start_s for r in self.running if r.client is None and r.status == "pending"]
        return min(due) if due else None

    def _start_client(self, r: Running) -> None:
        argv = self._client(r)
        r.started_at = time.monotonic()
        r.client = self.testbed.start_process("client", f"flow-{r.folder.name}-client", argv, r.folder,
                                              env=self._env(r, "client"), cwd=r.folder, group=r.group)
        self.processes.append(r.client)
        r.pidfd = procs.pidfd(r.client)
        r.status = "running"

    def _wait_packets(self, r: Running, packets: int) -> bool:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if sum(row["packets"] for row in self.counts_of(r, self.testbed.flow_counters())) >= packets:
                return True
            if r.client is not None and r.client.poll() is not None:
                return False
            time.sleep(POLL_S)
        return False

    # --- end -----------------------------------------------------------------------------------------
    def finish(self, deadline: float) -> None:
        """After the foreground client: stop the flows that only compete (all at once: each may still
        fetch its server's counters and write its metrics, within `STOP_GRACE_S`), wait for the others
        (until `deadline`), then stop every server."""
        self.wait(time.monotonic())   # exits that came with the foreground's
        for r in self.running:
            if r.client is not None and r.exited_at is None and r.client.poll() is None \
                    and r.flow.stops_with_foreground:
                r.client.terminate()
                r.stopped = True
                _close(r)
        stopped_at = time.monotonic()
        # The flows that run to completion: their exits seen as they happen, until `deadline`.
        self.wait(deadline)
        stop_deadline = stopped_at + STOP_GRACE_S
        for r in self.running:
            if r.client is None:
                if r.status == "pending":
                    r.status, r.error = "failed", "never started: the foreground ended before its start"
                continue
            if r.stopped:
                r.client.stop(grace_s=max(0.0, stop_deadline - time.monotonic()))
                r.ended_at = stopped_at   # it competed until then; what follows is its report
                r.status, r.error = self._judge(r, None)
                _close(r)
                continue
            code = r.client.poll()
            if code is None:
                code = r.client.wait(max(0.0, deadline - time.monotonic()))
                if code is None:
                    r.client.stop(grace_s=1.0)
            # When it exited, as seen then (without a pidfd: when it was found to have exited).
            r.ended_at = r.exited_at if r.exited_at is not None else time.monotonic()
            _close(r)
            r.status, r.error = self._judge(r, r.client.poll())
        for r in self.running:
            if r.server is not None:
                server_code = r.server.poll()   # iperf3's (-1) ends by itself, status 0, when its client does
                r.server.stop(grace_s=1.0)
                if server_code not in (None, 0) and r.status in ("ok", "stopped"):
                    r.status, r.error = "failed", f"its server exited with status {server_code} during the run"

    def _judge(self, r: Running, code: int | None) -> tuple[str, str | None]:
        if r.stopped:
            return "stopped", None   # running until the run stopped it: whatever it exits with is ours
        if r.flow.stops_with_foreground and code not in (None, 0):
            return "failed", f"client exited with status {code} before the foreground ended"
        if code is None:
            return "timeout", f"still running at timeout_s = {self.timeout_s:g} s (killed)"
        if code == 124:
            return "timeout", f"gave up at timeout_s = {self.timeout_s:g} s"
        if code != 0:
            return "failed", f"client exited with status {code}"
        return "ok", None

    def failure(self) -> str | None:
        """The first flow that failed, as the run's error."""
        for r in self.running:
            if r.status == "failed":
                return f"flow {r.flow.id} failed: {r.error}"
        return None

    def stop_all(self) -> None:
        for r in self.running:
            for process in (r.client, r.server):
                if process is not None:
                    process.stop(grace_s=0.5)
            _close(r)
        self._close_foreground()

    # --- what each flow did --------------------------------------------------------------------------
    def counts_of(self, r: Running | None, counters: list[dict[str, Any]], port: int | None = None) -> list[dict]:
        """The per-flow counter rows of one flow (by its server's port; runners.run.flow_rows.counts_of)."""
        return flow_rows.counts_of(r.port if r is not None else port, counters)

    def records(self, foreground: dict[str, Any]) -> list[dict[str, Any]]:
        """One row per flow of the run and one for the foreground (`foreground`: its label, port, status,
        started monotonic time, dct_ms): what went through the lossy links per direction (bytes, packets,
        drops, and per time bin, s from the foreground's start), its status and error, its own metrics
        and its endpoint timing."""
        counters = self.testbed.flow_counters()
        queue = flow_rows.queue_counted(counters)
        origin_ns = int((self.origin or 0) * 1e9)
        own = self.testbed.flow_timing(None)   # the network's own group: the foreground's processes
        own = own if "error" in own else endpoint_timing.summary(**own)
        rows = [flow_rows.record("foreground", "foreground", foreground["label"], foreground.get("impl"), None,
                                 foreground.get("workload"), 0.0, 0.0, foreground.get("ended_s"), foreground["status"],
                                 foreground.get("error"), self.counts_of(None, counters, foreground["port"]),
                                 origin_ns, {"dct_ms": foreground.get("dct_ms")}, own, queue)]
        for r in self.running:
            metrics = self._metrics(r)
            timing = self._timing(r)
            spec = r.flow.spec
            workload = "upload" if spec.tool and spec.direction == "upload" else spec.workload
            rows.append(flow_rows.record(r.flow.id, "competing", spec.label, spec.impl, spec.tool, workload,
                                         r.flow.start_s, self._since(r.started_at), self._since(r.ended_at), r.status,
                                         r.error, self.counts_of(r, counters), origin_ns, metrics, timing, queue))
        return rows

    def _since(self, at: float | None) -> float | None:
        return None if at is None or self.origin is None else round(at - self.origin, 3)

    def _metrics(self, r: Running) -> dict[str, Any] | None:
        spec = r.flow.spec
        if spec.tool == "iperf3":
            return flow_rows.iperf3_summary(r.client.output() if r.client else "")
        if r.client is None or spec.descriptor is None:
            return None
        if r.status == "ok":
            try:
                return collect_metrics(spec.descriptor, _FlowRun(spec, r), r.values, r.client)
            except MetricsError as exc:
                return {"error": str(exc)}
        return partial_metrics(spec.descriptor, r.values)

    def _timing(self, r: Running) -> dict[str, Any] | None:
        raw = self.testbed.flow_timing(r.group)
        return raw if "error" in raw else endpoint_timing.summary(**raw)

    # --- argv ----------------------------------------------------------------------------------------
    def _server(self, r: Running) -> tuple[list[str], str | None, float]:
        spec = r.flow.spec
        if spec.tool == "iperf3":
            return (["iperf3", "-s", "-1", "-B", r.values["server_address"], "-p", str(r.port), "--forceflush"],
                    IPERF3_READY, 0.0)
        from fecbench.runners.experiment.argv_template import render

        d = spec.descriptor
        assert d is not None
        return render(d.server_argv, r.values, self._arg_lists(r, r.values)), d.ready_pattern, d.ready_delay_s

    def _client(self, r: Running) -> list[str]:
        spec = r.flow.spec
        source = r.values["client_address"]
        if spec.tool == "iperf3":
            argv = ["iperf3", "-c", r.values["server_address"], "-B", source, "-p", str(r.port),
                    "-t", f"{int(self.timeout_s + self.lead_s()) + 1}", "-J"]
            argv += ["-R"] if spec.direction == "download" else []
            if spec.protocol == "udp":
                argv += ["-u", "-b", str(spec.rate_bps), "-l", "1200"]
            else:
                argv += ["-C", spec.cc]
            return argv
        from fecbench.runners.experiment.argv_template import render

        d = spec.descriptor
        assert d is not None
        workload = "download" if spec.workload == "bulk" else spec.workload
        values = {**r.values, "size": spec.size or "", "workload": workload}
        r.values = values
        return render(d.client_argv[workload], values, self._arg_lists(r, values))

    def _arg_lists(self, r: Running, values: dict[str, Any]) -> dict[str, list[str]]:
        """The flow's implementation arguments, with its qlog and key-log arguments when the run's qlog may be
        kept (the runner says so in `capture_qlog`; runners.experiment.capture), else the implementation's `off` ones:
        beside the run's own, in qlog/flow-<id>/<side>/ and keys/flow-<id>-<side>.keys of the run folder."""
        d = r.flow.spec.descriptor
        assert d is not None
        lists = d.arg_lists(r.flow.spec.args, values)
        wanted = bool(values.get("capture_qlog")) and d.capture.qlog_capable
        keys = wanted or bool(values.get("capture_keys"))   # the run's packet capture decrypts the flow's packets too
        run_dir, name = r.folder.parent.parent, f"flow-{r.folder.name}"
        sides: dict[str, Any] = {}
        for side in ("server", "client"):
            sides[f"qlog_dir_{side}"] = run_dir / "qlog" / name / side
            sides[f"keylog_file_{side}"] = run_dir / "keys" / f"{name}-{side}.keys"
            if wanted:
                sides[f"qlog_dir_{side}"].mkdir(parents=True, exist_ok=True)
            if keys:
                sides[f"keylog_file_{side}"].parent.mkdir(exist_ok=True)
        for key, fragment in d.capture.fragments(wanted, {**values, **{k: str(v) for k, v in sides.items()}},
                                                 keys=keys).items():
            lists[key].extend(fragment)
        return lists

    def _env(self, r: Running, role: str) -> dict[str, str]:
        d = r.flow.spec.descriptor
        if d is None:
            return {}
        env = d.server_env if role == "server" else d.client_env
        return {k: v.format_map(r.values) for k, v in env.items()}


def start(testbed: Testbed, instances: list[FlowInstance], run_dir: Path, values: dict[str, Any], timeout_s: float,
          processes: list[RunProcess]) -> tuple[CompetingFlows | None, str | None, float]:
    """A run's competing flows up to the foreground's start: their servers, then the flows starting before the
    foreground at their times (no flows: (None, None, now)). Returns (the flows, why they could not all
    start, the monotonic time the foreground starts at); it returns at that time."""
    if not instances:
        return None, None, time.monotonic()
    competing = CompetingFlows(testbed, instances, run_dir, values, timeout_s, processes)
    failed = competing.start_servers()
    if failed:
        return competing, failed, time.monotonic()
    origin = time.monotonic() + competing.lead_s()
    failed = competing.start_before(origin)
    _sleep_until(origin)
    return competing, failed, max(origin, time.monotonic())


def wait_foreground(client: RunProcess, competing: CompetingFlows | None, limit_s: float) -> int | None:
    """Wait for the foreground client (at most `limit_s`), starting the later competing flows on time and
    noting when each flow's client exits."""
    deadline = time.monotonic() + limit_s
    if competing is None:
        return client.wait(max(0.0, deadline - time.monotonic()))
    while True:
        competing.start_due()
        due = competing.next_start()
        if competing.wait(deadline if due is None else min(due, deadline), client):
            return client.wait(1.0)   # it has exited: reaped now
        if time.monotonic() >= deadline:
            return client.poll()


@dataclass
class _FlowRun:
    """What collect_metrics reads of a run, for a flow (its workload and size)."""
    spec: FlowSpec
    running: Running

    @property
    def workload(self) -> str:
        return "download" if self.spec.workload == "bulk" else self.spec.workload

    @property
    def size(self) -> int | None:
        return self.spec.size


def _path_addresses(values: dict[str, Any], path: int) -> dict[str, str]:
    """The client's and the server's address on a flow's path (multipath topologies: one per path)."""
    clients = str(values["client_addresses"]).split(",")
    servers = str(values.get("server_addresses") or values["server_address"]).split(",")
    return {"client_address": clients[min(path, len(clients)) - 1],
            "server_address": servers[min(path, len(servers)) - 1]}


def _close(r: Running) -> None:
    if r.pidfd is not None:
        with contextlib.suppress(OSError):
            os.close(r.pidfd)
        r.pidfd = None


def _sleep_until(when: float) -> None:
    pause = when - time.monotonic()
    if pause > 0:
        time.sleep(pause)
