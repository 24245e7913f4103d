"""A run's competing flows (`[[flow]]`, fecbench.runners.experiment.flows) while the runner measures the foreground.

Order of a run with flows: every flow's server starts (and is ready) with the foreground's; the flows
whose start lies before the foreground's (negative `start_s`) start at their times, each followed, when
it asks, by a wait until the links carried `ready_packets` of its packets (its steady state); then the
foreground client starts (time 0), and the later flows start at their times while it runs. When the
foreground client has ended, the flows that only compete (bulk, iperf3) are stopped and the others are
waited for, all within the design's time limit. Each flow gets its own port (the foreground's + 1000 ×
rank), its own folder in the run's folder, and, where the machine has endpoint cgroups, a cgroup of its
own inside the network's (its endpoint timing). The droppers count every flow's packets per time bin
(fecbench.dropper, per-flow counters), so each flow's bytes, drops and throughput over time through the
lossy links are known whatever implementation it is; `records` gives one row per flow and one for the
foreground (the flows table).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench import endpoint_timing
from fecbench.runners.experiment.flows import FlowInstance, FlowSpec
from fecbench.runners.run.procs import wait_ready
from fecbench.runners.run.run_metrics import MetricsError, collect_metrics, partial_metrics
from fecbench.runners.run.testbed import RunProcess, Testbed

if TYPE_CHECKING:
    from fecbench.cgroups import EndpointGroup

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

    def started_foreground(self, at: float) -> None:
        """The foreground client started at monotonic time `at`: time 0 of the run."""
        self.origin = at

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
        for r in self.running:
            if r.client is not None and r.client.poll() is None and r.flow.stops_with_foreground:
                r.client.terminate()
                r.stopped = True
        stopped_at = time.monotonic()
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
                continue
            code = r.client.poll()
            if code is None:
                code = r.client.wait(max(0.0, deadline - time.monotonic()))
                if code is None:
                    r.client.stop(grace_s=1.0)
            r.ended_at = time.monotonic()
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

    # --- what each flow did --------------------------------------------------------------------------
    def counts_of(self, r: Running | None, counters: list[dict[str, Any]], port: int | None = None) -> list[dict]:
        """The per-flow counter rows of one flow (by its server's port), each with its direction."""
        port = r.port if r is not None else port
        rows = []
        for link in counters:
            for proto, sport, dport, b, packets, size, dropped in link.get("flows", []):
                if (link["direction"] == "forward" and dport == port) or (link["direction"] == "reverse"
                                                                          and sport == port):
                    rows.append({"link": link["link"], "direction": link["direction"], "proto": proto, "bin": b,
                                 "packets": packets, "bytes": size, "dropped": dropped,
                                 "t0_ns": link["t0_ns"], "bin_ns": link["bin_ns"]})
        return rows

    def records(self, foreground: dict[str, Any]) -> list[dict[str, Any]]:
        """One row per flow of the run and one for the foreground (`foreground`: its label, port, status,
        started monotonic time, dct_ms): what went through the lossy links per direction (bytes, packets,
        drops, and per time bin, s from the foreground's start), its status and error, its own metrics
        and its endpoint timing."""
        counters = self.testbed.flow_counters()
        origin_ns = int((self.origin or 0) * 1e9)
        own = self.testbed.flow_timing(None)   # the network's own group: the foreground's processes
        own = own if "error" in own else endpoint_timing.summary(**own)
        rows = [_record("foreground", "foreground", foreground["label"], foreground.get("impl"), None,
                        foreground.get("workload"), 0.0, 0.0, foreground.get("ended_s"), foreground["status"],
                        foreground.get("error"), self.counts_of(None, counters, foreground["port"]), origin_ns,
                        {"dct_ms": foreground.get("dct_ms")}, own)]
        for r in self.running:
            metrics = self._metrics(r)
            timing = self._timing(r)
            spec = r.flow.spec
            workload = "upload" if spec.tool and spec.direction == "upload" else spec.workload
            rows.append(_record(r.flow.id, "competing", spec.label, spec.impl, spec.tool, workload,
                                r.flow.start_s, self._since(r.started_at), self._since(r.ended_at), r.status, r.error,
                                self.counts_of(r, counters), origin_ns, metrics, timing))
        return rows

    def _since(self, at: float | None) -> float | None:
        return None if at is None or self.origin is None else round(at - self.origin, 3)

    def _metrics(self, r: Running) -> dict[str, Any] | None:
        spec = r.flow.spec
        if spec.tool == "iperf3":
            return _iperf3_summary(r.client.output() if r.client else "")
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
        from fecbench.runners.experiment.descriptor import render

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
        from fecbench.runners.experiment.descriptor import render

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
    """Wait for the foreground client (at most `limit_s`), starting the later competing flows on time."""
    deadline = time.monotonic() + limit_s
    while competing is not None:
        due = competing.next_start()
        if due is None or due >= deadline:
            break
        code = client.wait(max(0.0, due - time.monotonic()))
        if code is not None:
            return code
        competing.start_due()
    return client.wait(max(0.0, deadline - time.monotonic()))


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


def _sleep_until(when: float) -> None:
    pause = when - time.monotonic()
    if pause > 0:
        time.sleep(pause)


def _record(flow: str, role: str, label: str, impl: str | None, tool: str | None, workload: str | None,
            start_s: float, started_s: float | None, ended_s: float | None, status: str, error: str | None,
            counts: list[dict[str, Any]], origin_ns: int, metrics: dict[str, Any] | None,
            timing: dict[str, Any] | None) -> dict[str, Any]:
    """A flows-table row: totals per direction and the per-bin series (s from the foreground's start)."""
    ways = (("down", "reverse"), ("up", "forward"))
    totals = {f"{what}_{way}": sum(c[what] for c in counts if c["direction"] == direction)
              for what in ("bytes", "packets", "dropped") for way, direction in ways}
    series: dict[float, list[int]] = {}
    for c in counts:
        # On a grid of bins from the foreground's start (each dropper's own bins began when it was set, a
        # few ms apart: within half a bin of the grid).
        width = c["bin_ns"]
        t = round(round((c["t0_ns"] + c["bin"] * width - origin_ns) / width) * width / 1e9, 3)
        cell = series.setdefault(t, [0, 0, 0, 0])
        index = 0 if c["direction"] == "reverse" else 1
        cell[index] += c["bytes"]
        cell[2 + index] += c["dropped"]
    bin_s = counts[0]["bin_ns"] / 1e9 if counts else None
    data = "up" if workload == "upload" else "down"
    return {"flow": flow, "role": role, "label": label, "impl": impl, "tool": tool, "workload": workload, "data": data,
            "start_s": start_s, "started_s": started_s, "ended_s": ended_s, "status": status, "error": error,
            **totals, "dct_ms": (metrics or {}).get("dct_ms"), "bin_s": bin_s,
            "series": [[t, *cell] for t, cell in sorted(series.items())], "metrics": metrics, "endpoints": timing}


def _iperf3_summary(text: str) -> dict[str, Any] | None:
    """What an iperf3 -J client reports: bytes and bits per second received, retransmits, its error."""
    import json

    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    end = data.get("end") or {}
    received = end.get("sum_received") or end.get("sum") or {}
    sent = end.get("sum_sent") or {}
    return {"bytes": received.get("bytes"), "bits_per_second": received.get("bits_per_second"),
            "retransmits": sent.get("retransmits"), "error": data.get("error")}
