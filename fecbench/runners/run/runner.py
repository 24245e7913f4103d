"""Executing one run on a testbed: shape the links for its point, check fidelity, seed the droppers
with its loss seed, start the implementation's server and client, and collect metrics, link
statistics and verdict logs into an Outcome. Never raises for an implementation's fault.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.dropper.models import NoLoss
from fecbench.records.status import Status
from fecbench.runners.experiment.prepare import Prepared, path_of
from fecbench.runners.experiment.runs import Run, grace_s
from fecbench.runners.run import link_records, pcap, xquic_qlog
from fecbench.runners.run.competing import CompetingFlows, wait_foreground
from fecbench.runners.run.link_records import LossLinks
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.procs import wait_ready
from fecbench.runners.run.run_metrics import MetricsError, collect_metrics, expected_bytes, partial_metrics
from fecbench.runners.run.testbed import RunProcess, Testbed
from fecbench.timekeeping import endpoint_timing

if TYPE_CHECKING:
    from fecbench.dropper import LossModel
    from fecbench.runners.experiment.descriptor import Descriptor

# The contract's exit status of a client that gave up at its time limit ({timeout_s}), as timeout(1).
EXIT_TIMEOUT = 124



#: Where a run's wall time goes, in order (Outcome.phases, runs.phases_json, `fecbench status --timing`):
#: configure the links for its point (the delay elements flushed first), measure fidelity (when not
#: cached), seed the droppers, prepare the run folder and run the server's setup commands, start the
#: server until ready, the client (start to exit), stop what is left, collect statistics and metrics.
PHASES = ("configure", "fidelity", "losses", "setup", "server", "client", "stop", "collect")


class PhaseClock:
    """Seconds spent per phase: each `lap(name)` adds the time since the previous lap to `name`."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = round(self.phases.get(name, 0.0) + now - self.last, 6)
        self.last = now


class Runner:
    """Executes runs of a prepared campaign, one at a time, on one testbed; hands back each run's Outcome.
    Executors (serial, --jobs, Dask workers) each hold one Runner per network."""

    def __init__(self, prepared: Prepared, testbed: Testbed, log_root: Path, keep_logs: bool = False) -> None:
        self.prepared, self.testbed = prepared, testbed
        self.design = prepared.design
        self.log_root, self.keep_logs = log_root, keep_logs
        from fecbench.runners.experiment.capture import Keeper

        # The campaign's artifacts beside its run logs: results/<name>.artifacts/ (runners.experiment.capture).
        self.keeper = Keeper.for_campaign(self.design.capture, log_root.with_name(
            log_root.name.removesuffix(".logs") + ".artifacts"), [r.key for r in prepared.runs], self.design.seed)
        self.fidelity_cache: dict[int, list[dict[str, Any]]] = {}
        self.binaries = {e.label: e.descriptor.require_binaries() for e in self.design.impls}
        links = self.design.loss.links if self.design.loss.links is not None else prepared.topology.lossy_links()
        self.losses = LossLinks(self.design.loss, links, {link: path_of(prepared.topology, link) for link in links})
        self.processes: list[RunProcess] = []
        self.competing: CompetingFlows | None = None
        self.pcap_notes: list[str] = []   # the run's captures: what did not start or stopped early (runners.run.pcap)
        self.clock = PhaseClock()
        if self.design.verdict_log and self.design.loss.model != "none":
            self.testbed.enable_verdict_logs([(link, direction) for link, direction, _ in self.streams()])

    def streams(self) -> list[tuple[str, str, int]]:
        return self.losses.streams()

    def loss_model(self, values: dict[str, Any], link: str) -> LossModel:
        return self.losses.model_at(values, link)

    def configure(self, run: Run) -> list[dict[str, Any]]:
        """Shape the links for this run's point, check fidelity, then re-seed every dropper with the run's
        loss seed. The fidelity pings cross the droppers too, so they run with losses off and the
        droppers are reset afterwards: every run's stream starts at packet 0 (common random numbers)."""
        clock = self.clock
        self.testbed.configure(run.values)
        clock.lap("configure")
        fidelity: list[dict[str, Any]] = []
        if self.design.fidelity != "off":
            cached = self.fidelity_cache.get(run.point) if self.design.fidelity == "per-point" else None
            if cached is None:
                self.set_losses(None, 0)
                cached = self.testbed.fidelity(rate_probe=self.design.fidelity_rate)
                for i, row in enumerate(cached):
                    row.setdefault("path", i + 1)
                if all(row.get("ok") is not False for row in cached):  # a failed check is measured again
                    self.fidelity_cache[run.point] = cached
                clock.lap("fidelity")
            fidelity = cached
        self.set_losses(run.values, run.loss_seed)
        clock.lap("losses")
        return fidelity

    def set_losses(self, values: dict[str, Any] | None, seed: int) -> None:
        """Set (and reset) every dropper of the lossy links: the design's model where it applies, no loss elsewhere
        and for the probes (values None). A run's reset starts its counters, so its link_stats count its own
        packets, whatever the model (`none` included: before issue 49 those droppers were never reset and a run's
        per-path counts were the network's since it was built). With competing flows, the droppers also count
        each flow's packets from here (a run's, not a probe's)."""
        counting = bool(self.design.flows) and values is not None
        if self.design.loss.model == "none" and values is None:
            return   # nothing to turn off for the probes: the run's reset follows them
        streams = {(link, direction): stream for link, direction, stream in self.streams()}
        every = [(link, direction) for link in self.losses.links for direction in ("forward", "reverse")]
        for link, direction in every if values is not None else streams:
            lossy = values is not None and (link, direction) in streams and self.design.loss.model != "none"
            model = self.loss_model(values, link) if lossy else NoLoss()
            self.testbed.set_loss(link, direction, model, seed=seed, stream=streams.get((link, direction), 0),
                                  flow_bin_ms=self.design.flows.bin_ms if counting else None)

    def placeholders(self, run: Run, run_dir: Path) -> dict[str, Any]:
        entry = run.impl
        workload = self.design.workload
        addresses = self.testbed.client_addresses
        values: dict[str, Any] = {
            "dir": str(entry.descriptor.dir), "server_address": self.testbed.server_address,
            "client_address": addresses[0], "client_addresses": ",".join(addresses),
            "server_addresses": ",".join(self.testbed.server_addresses),
            "port": self.design.port + run.index % 1000, "workload": run.workload,
            "size": run.size if run.size is not None else "", "rate": workload.rate,
            "packets": workload.packets, "duration": f"{workload.duration:g}", "buffer": workload.buffer,
            "metrics_path": str(run_dir / "metrics.json"), "download_path": str(run_dir / "download"),
            "run_dir": str(run_dir), "www_dir": str(run_dir / "www"), "seed": run.loss_seed,
            "timeout_s": f"{self.design.timeout_s:g}",
            **workload.placeholders(run.size),
        }
        values.update({key: str(path) for key, path in self.binaries[entry.label].items()})
        return values

    def execute(self, run: Run) -> Outcome:
        """Run one (point, implementation, size, repetition); never raises for an implementation fault.
        The outcome says where its time went (`phases`)."""
        self.clock = PhaseClock()
        outcome = self._execute(run)
        outcome.phases = self.clock.phases
        return outcome

    def _execute(self, run: Run) -> Outcome:
        from fecbench.runners.experiment.argv_template import render

        descriptor = run.impl.descriptor
        if not run.impl.supports(run.workload):
            # Nothing to start (no [client.<workload>] argv): as if the client had exited 127.
            return Outcome(status=Status.UNSUPPORTED,
                           error=f"implementation {run.impl.name!r} does not declare workload {run.workload!r} "
                                 f"(capabilities.workloads in {descriptor.path})")
        clock = self.clock
        self.pcap_notes = []
        run_dir = self.log_root / run.key[:16]
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        clock.lap("setup")
        fidelity = self.configure(run)
        bad = [row for row in fidelity if row.get("ok") is not None and not row.get("ok")]
        if bad:
            text = "; ".join(_mismatch(row) for row in bad)
            return Outcome(status=Status.FIDELITY, error=f"network does not match the design: {text}",
                           fidelity=fidelity)

        values = self.placeholders(run, run_dir)
        arg_lists = descriptor.arg_lists(run.impl.args, values)
        self.add_capture_args(run, run_dir, values, arg_lists)
        if descriptor.server_files and run.size is not None and run.workload == "download":
            www = run_dir / "www"
            www.mkdir()
            (www / str(run.size)).write_bytes(os.urandom(run.size))
        timeout = self.design.timeout_s
        server_env = {k: v.format_map(values) for k, v in descriptor.server_env.items()}
        client_env = {k: v.format_map(values) for k, v in descriptor.client_env.items()}
        server = client = applier = competing = None
        link_events: list[dict[str, Any]] = []
        failed_setup = self.setup(descriptor, values, run_dir)
        clock.lap("setup")
        if failed_setup:
            return Outcome(status=Status.FAILED, error=failed_setup, fidelity=fidelity)
        # Packet captures (when the campaign may keep them) run from before the server until after the client.
        self.pcap_notes = pcap.start(self.testbed, self.keeper, run.key, run_dir)
        # The run's own accuracy: the delay elements count lateness, the tracer the endpoints' waits, from here.
        self.testbed.clear_lateness()
        self.testbed.clear_endpoint_timing()
        try:
            server = self.testbed.start_process("server", "server", render(descriptor.server_argv, values, arg_lists),
                                                run_dir, env=server_env, cwd=run_dir)
            self.processes.append(server)
            not_ready = wait_ready(server, descriptor.ready_pattern, descriptor.ready_delay_s, timeout)
            clock.lap("server")
            if not_ready:
                server.stop()
                status = Status.UNSUPPORTED if server.poll() == 127 else Status.FAILED
                return Outcome(status=status, error=not_ready, server_log=server.log_tail(), fidelity=fidelity)
            competing, not_started, origin = self.start_flows(run, run_dir, values)
            if not_started:
                return Outcome(status=Status.FAILED, error=not_started, server_log=server.log_tail(), fidelity=fidelity)
            # The design's link schedule (if any) counts its time from the client's start.
            applier = self.testbed.apply_schedule(self.design.schedule, run.loss_seed, timeout)
            client = self.testbed.start_process("client", "client",
                                                render(descriptor.client_argv[run.workload], values, arg_lists),
                                                run_dir, env=client_env, cwd=run_dir)
            self.processes.append(client)
            if competing is not None:
                competing.started_foreground(max(origin, client.started), client)
            code = wait_foreground(client, competing, timeout + grace_s(timeout))
            clock.lap("client")
            if competing is not None:
                competing.finish(client.started + timeout + grace_s(timeout))
            link_events = applier.stop() if applier else []
            server_code = server.poll()
            client.stop()
            server.stop()
        finally:
            if applier is not None:
                applier.stop()  # undo the schedule's changes whatever happened
            if competing is not None:
                competing.stop_all()
            for process in (client, server):
                if process is not None:
                    process.stop()
                    with contextlib.suppress(ValueError):
                        self.processes.remove(process)
            self.pcap_notes += self.testbed.stop_captures()
            clock.lap("stop")

        outcome = Outcome(status=Status.OK, client_wall_ms=client.wall_ms, server_log=server.log_tail(),
                          client_log=client.log_tail(), fidelity=fidelity, link_events=link_events)
        outcome.endpoints = self.endpoint_summary()
        outcome.link_stats = self.link_stats(run)
        if self.design.verdict_log:
            outcome.verdict_logs = self.verdict_logs()
        if link_events:
            link_records.count_outage_drops(self.losses, run, outcome)
        if code is None or code == EXIT_TIMEOUT:
            # Its own time limit or the harness's: `timeout`, with what arrived until then if it says so.
            outcome.status = Status.TIMEOUT
            outcome.metrics = partial_metrics(descriptor, values)
            outcome.error = (f"client still running {grace_s(timeout):g} s after timeout_s = {timeout:g} s (killed)"
                             if code is None else
                             f"client gave up at timeout_s = {timeout:g} s (exit status {EXIT_TIMEOUT})")
            outcome.error += so_far(outcome.metrics, expected_bytes(run, values), client.wall_ms)
        elif code == 127:
            outcome.status = Status.UNSUPPORTED
            outcome.error = "client exited with status 127 (unsupported combination)"
        elif code != 0:
            outcome.status, outcome.error = Status.FAILED, f"client exited with status {code}"
            outcome.metrics = partial_metrics(descriptor, values)
            reason = (outcome.metrics or {}).get("error")
            if isinstance(reason, str) and reason.strip():
                outcome.error += f": {reason.strip()[:500]}"
        elif server_code is not None:
            outcome.status, outcome.error = Status.FAILED, f"server exited with status {server_code} during the run"
        else:
            try:
                outcome.metrics = collect_metrics(descriptor, run, values, client)
            except MetricsError as exc:
                outcome.status, outcome.error = Status.FAILED, f"metrics: {exc}"
        if competing is not None:
            self.record_flows(outcome, competing, run, values, client)
        untrusted = endpoint_timing.judge(outcome.status, outcome.endpoints, outcome.link_stats, outcome.link_events)
        if untrusted:
            # Kept with its metrics, but not as a result: excluded from ratios, re-run by --retry fidelity.
            was = f" (the run itself ended {outcome.status}: {outcome.error})" if outcome.error else ""
            outcome.status, outcome.error = Status.FIDELITY, untrusted + was
        clock.lap("collect")
        return outcome

    def add_capture_args(self, run: Run, run_dir: Path, values: dict[str, Any],
                         arg_lists: dict[str, list[str]]) -> None:
        """The implementation's qlog and key-log arguments when the campaign may keep this run's qlog
        (runners.experiment.capture; its `off` arguments otherwise), its key-log arguments also when it may keep
        the run's packet capture (runners.run.pcap: the secrets that decrypt it), with a folder per side in the
        run folder."""
        capture = run.impl.descriptor.capture
        qlog_kept = self.keeper.wants("qlog", run.key, in_advance_only=capture.qlog_in_advance_only)
        wanted = capture.qlog_capable and qlog_kept
        keys = wanted or self.keeper.wants("pcap", run.key)
        values["capture_qlog"] = qlog_kept   # for the run's competing flows
        values["capture_keys"] = qlog_kept or keys
        for side in ("server", "client"):
            values[f"qlog_dir_{side}"] = str(run_dir / "qlog" / side)
            values[f"keylog_file_{side}"] = str(run_dir / "keys" / f"{side}.keys")
            if wanted:
                (run_dir / "qlog" / side).mkdir(parents=True, exist_ok=True)
            if keys:
                (run_dir / "keys").mkdir(exist_ok=True)
        for side, fragment in capture.fragments(wanted, values, keys=keys).items():
            arg_lists[side].extend(fragment)

    def keep_artifacts(self, run: Run, outcome: Outcome, run_dir: Path) -> None:
        """What the campaign keeps of the run's qlog, key logs and captures (runners.experiment.capture.Keeper);
        the captures with the TLS secrets embedded (runners.run.pcap), the key logs kept beside them only when
        that failed."""
        if run.impl.descriptor.capture.qlog_format == "xquic-text":   # text events → qlog (qvis's format)
            xquic_qlog.convert_tree(run_dir / "qlog")
        keylogs = (sorted((run_dir / "keys").glob("*.keys"))
                   + [run_dir / name for name in run.impl.descriptor.capture.files if (run_dir / name).is_file()])
        problems = pcap.embed_secrets(run_dir, keylogs)
        files = {"qlog": sorted(p for p in (run_dir / "qlog").rglob("*") if p.is_file()),
                 "pcap": sorted((run_dir / pcap.FOLDER).glob("*.pcap*"))}
        if not files["qlog"] and not files["pcap"]:
            return
        files["keylog"] = keylogs if files["qlog"] or problems else []
        metrics = outcome.metrics or {}
        metric = metrics.get("dct_ms", metrics.get("rebuffering_ms"))
        outcome.artifacts, note = self.keeper.keep(run.key, run.label, run.size, outcome.status,
                                                   metric if isinstance(metric, (int, float)) else None, files)
        pcap.annotate(outcome.artifacts, [*self.pcap_notes, *problems])
        if note:
            outcome.error = f"{outcome.error}; {note}" if outcome.error else None

    def record_flows(self, outcome: Outcome, competing: CompetingFlows | None, run: Run, values: dict[str, Any],
                     client: RunProcess) -> None:
        """The run's flows table (the foreground's row with its status and DCT); a flow that failed fails
        the run, naming it."""
        outcome.flows = competing.records({"label": run.label, "impl": run.impl.name, "workload": run.workload,
                                           "port": values["port"], "status": outcome.status,
                                           "error": outcome.error, "ended_s": (client.wall_ms or 0) / 1000,
                                           "dct_ms": (outcome.metrics or {}).get("dct_ms")})
        self.testbed.close_flow_groups()
        failure = competing.failure()
        if failure and outcome.status == Status.OK:
            outcome.status, outcome.error = Status.FAILED, failure

    def start_flows(self, run: Run, run_dir: Path, values: dict[str, Any]) -> tuple[Any, str | None, float]:
        """The run's competing flows, started up to the foreground's start (runners.run.competing.start)."""
        from fecbench.runners.run.competing import start

        instances = self.design.flows.instances(run.values) if self.design.flows else []
        self.competing, failed, origin = start(self.testbed, instances, run_dir, values, self.design.timeout_s,
                                               self.processes)
        return self.competing, failed, origin

    def endpoint_summary(self) -> dict[str, Any]:
        """The run's endpoint timing judged by the design's bound, or {"error": why} if not measured."""
        raw = self.testbed.endpoint_timing()
        if "error" in raw:
            return raw
        return endpoint_timing.summary(**raw, design_bound=self.design.endpoint_bound_ms)

    def setup(self, descriptor: Descriptor, values: dict[str, Any], run_dir: Path) -> str | None:
        """Run the descriptor's `[server] setup` commands (e.g. make a certificate) in the run folder,
        on the server host; None when they all succeed, else why the run failed."""
        from fecbench.runners.experiment.argv_template import render

        for i, template in enumerate(descriptor.server_setup):
            argv = render(template, values, {})
            process = self.testbed.start_process("server", f"setup{i}", argv, run_dir, cwd=run_dir)
            self.processes.append(process)
            try:
                code = process.wait(self.design.timeout_s)
            finally:
                process.stop(grace_s=0.5)
                self.processes.remove(process)
            if code != 0:
                what = f"still running after {self.design.timeout_s:g} s" if code is None \
                    else f"exited with status {code}"
                return f"server setup command {argv[0]} {what}: {process.output()[-500:]}"
        return None

    def link_stats(self, run: Run) -> list[dict[str, Any]]:
        return link_records.link_stats(self.testbed, self.losses, run)

    def verdict_logs(self) -> list[tuple[str, str, bytes]]:
        return link_records.verdict_logs(self.testbed, self.losses)

    def stop_all(self) -> None:
        for process in list(self.processes):
            process.stop(grace_s=0.5)
        self.processes.clear()
        self.testbed.stop_captures()
        self.testbed.close_flow_groups()


def so_far(metrics: dict[str, Any] | None, size: int | None, wall_ms: float | None) -> str:
    """What a timed-out run got: the bytes the client reports and the elapsed time (its own, else the
    client process's wall time)."""
    metrics = metrics or {}
    parts = []
    got = metrics.get("bytes_app")
    if isinstance(got, (int, float)) and not isinstance(got, bool):
        parts.append(f"{int(got)} of {size} bytes received" if size is not None else f"{int(got)} bytes received")
    elapsed = metrics.get("elapsed_ms", wall_ms)
    if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool):
        parts.append(f"after {elapsed / 1000:.1f} s")
    return f": {', '.join(parts)}" if parts else ""


def run_one(runner: Runner, run: Run) -> tuple[Outcome, bool]:
    """Execute one run, turning a harness fault into a `failed` outcome; (outcome, harness_error).
    Every executor executes runs through this function."""
    run_dir = runner.log_root / run.key[:16]
    try:
        outcome = runner.execute(run)
    except KeyboardInterrupt:
        runner.stop_all()
        raise
    except Exception as exc:  # a harness or network fault: record it, go on (bounded by the caller)
        runner.stop_all()
        return Outcome(status=Status.FAILED, error=f"harness: {type(exc).__name__}: {exc}"), True
    runner.keep_artifacts(run, outcome, run_dir)
    if outcome.status == Status.OK and not runner.keep_logs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return outcome, False


def _mismatch(row: dict[str, Any]) -> str:
    """What a failed fidelity row measured against what was configured: RTT, and the rate if probed."""
    def ms(value: float | None) -> str:
        return "none" if value is None else f"{value:.3f}"

    text = (f"path {row['path']}: RTT {ms(row.get('rtt_measured_ms'))} ms measured, "
            f"{ms(row.get('rtt_configured_ms'))} ms configured")
    if row.get("rate_configured_mbit"):
        text += (f", rate {ms(row.get('rate_measured_mbit'))} Mbit/s measured, "
                 f"{ms(row.get('rate_configured_mbit'))} configured")
    if row.get("probes_sent") and row.get("probes_received") != row.get("probes_sent"):
        text += f", {row.get('probes_received')} of {row['probes_sent']} probes back"
    return text

