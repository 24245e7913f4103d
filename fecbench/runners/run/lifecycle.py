"""Executing one run on a testbed: shape the links for its point, check fidelity, seed the droppers
with its loss seed, start the implementation's server and client, and collect metrics, link
statistics and verdict logs into an Outcome. Never raises for an implementation's fault.

The run's phases are IO steps (runners.run.phases) that hand back what they observed; its status and why
come from one pure function of that (runners.run.judge), never from here.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.dropper.models import NoLoss
from fecbench.records.status import Status
from fecbench.runners.experiment.prepare import Prepared, path_of
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run import judge, link_records, pcap, phases, xquic_qlog
from fecbench.runners.run.competing import CompetingFlows
from fecbench.runners.run.judge import Seen
from fecbench.runners.run.link_records import LossLinks
from fecbench.runners.run.outcome import Outcome, PhaseOutcome
from fecbench.runners.run.testbed import RunProcess, Testbed
from fecbench.timekeeping import endpoint_timing

if TYPE_CHECKING:
    from fecbench.dropper import LossModel


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
                                  flow_bin_ms=self.design.flows.bin_ms if counting else None,
                                  min_len=self.design.loss.min_bytes)

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
            "timeout_s": f"{self.design.timeout_s:g}", "page_file": workload.page_file(run_dir),
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
        """The run's phases in order, each IO step handing back what it observed (`seen`); its status and why
        are `judge.judge`'s, decided from that alone. A phase that stops the run ends it there."""
        seen = Seen()
        if not run.impl.supports(run.workload):
            # Nothing to start (no [client.<workload>] argv): as if the client had exited 127.
            seen.unsupported = (f"implementation {run.impl.name!r} does not declare workload {run.workload!r} "
                                f"(capabilities.workloads in {run.impl.descriptor.path})")
            return self.stopped_outcome(seen, None)
        clock = self.clock
        self.pcap_notes = []
        run_dir = self.log_root / run.key[:16]
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        clock.lap("setup")
        seen.fidelity = self.configure(run)
        if judge.stopped(seen):
            return self.stopped_outcome(seen, None)
        plan = self.plan(run, run_dir)
        seen.timeout_s, seen.grace_s, seen.expected_bytes = plan.timeout_s, plan.grace_s, plan.expected_bytes
        seen.setup = phases.run_setup(self.testbed, plan, self.processes)
        clock.lap("setup")
        if judge.stopped(seen):
            return self.stopped_outcome(seen, None)
        # Packet captures (when the campaign may keep them) run from before the server until after the client.
        self.pcap_notes = pcap.start(self.testbed, self.keeper, run.key, run_dir)
        # The run's own accuracy: the delay elements count lateness, the tracer the endpoints' waits, from here.
        self.testbed.clear_lateness()
        self.testbed.clear_endpoint_timing()
        started = phases.RunningProcesses(processes=self.processes)
        try:
            self.run_processes(run, plan, seen, started)
        finally:
            seen.stop = phases.stop(self.testbed, started)
            self.pcap_notes += seen.stop.notes
            clock.lap("stop")
        if judge.stopped(seen):
            return self.stopped_outcome(seen, started.server)
        # A killed client's wall time ends at its kill: known once stopped.
        seen.client = replace(seen.client, wall_ms=seen.stop.wall_ms)
        outcome = self.collect(run, plan, seen, started)
        clock.lap("collect")
        return outcome

    def stopped_outcome(self, seen: Seen, server: RunProcess | None) -> Outcome:
        """The outcome of a run a phase stopped before its client ran."""
        verdict = judge.judge(seen)
        return Outcome(status=verdict.status, error=verdict.why, decided_by=verdict.by, fidelity=seen.fidelity,
                       server_log=server.log_tail() if server is not None else None)

    def plan(self, run: Run, run_dir: Path) -> phases.RunPlan:
        """What the run starts (runners.run.phases.RunPlan), its capture folders, served file and page graph made."""
        descriptor = run.impl.descriptor
        values = self.placeholders(run, run_dir)
        arg_lists = descriptor.arg_lists(run.impl.args, values)
        self.add_capture_args(run, run_dir, values, arg_lists)
        plan = phases.plan_run(descriptor, run, values, arg_lists, run_dir, self.design.timeout_s)
        phases.write_files(plan)
        if self.design.workload.page_graph is not None:
            Path(values["page_file"]).write_text(self.design.workload.page_graph.to_json())
        return plan

    def run_processes(self, run: Run, plan: phases.RunPlan, seen: Seen, started: phases.RunningProcesses) -> None:
        """Server, competing flows, link schedule and client, each phase's observation in `seen`; returns early
        when one stops the run. The caller stops what was started, whatever happened."""
        seen.server = phases.start_server(self.testbed, plan, started)
        self.clock.lap("server")
        if seen.server.error:
            return
        started.competing, not_started, started.flows_origin = self.start_flows(run, plan.run_dir, plan.values)
        seen.flows = PhaseOutcome("flows", error=not_started)
        if not_started:
            return
        # The design's link schedule (if any) counts its time from the client's start.
        started.applier = self.testbed.apply_schedule(self.design.schedule, run.loss_seed, plan.timeout_s)
        seen.client = phases.run_client(self.testbed, plan, started)
        self.clock.lap("client")
        if started.competing is not None:
            started.competing.finish(started.client.started + plan.timeout_s + plan.grace_s)
        seen.link_events = started.applier.stop() if started.applier else []

    def collect(self, run: Run, plan: phases.RunPlan, seen: Seen, started: phases.RunningProcesses) -> Outcome:
        """What the run leaves: endpoint timing, link statistics (and verdict logs), its metrics as the way its
        processes ended asks (`judge.metrics_wanted`), its competing flows; then its verdict (`judge.judge`)."""
        client, server = started.client, started.server
        outcome = Outcome(status=Status.OK, client_wall_ms=client.wall_ms, server_log=server.log_tail(),
                          client_log=client.log_tail(), fidelity=seen.fidelity, link_events=seen.link_events)
        outcome.endpoints = seen.endpoints = self.endpoint_summary()
        outcome.link_stats = seen.link_stats = self.link_stats(run)
        if self.design.verdict_log:
            outcome.verdict_logs = self.verdict_logs()
        if seen.link_events:
            link_records.count_outage_drops(self.losses, run, outcome)
        seen.collect = phases.read_metrics(judge.metrics_wanted(seen), run.impl.descriptor, run, plan.values, client)
        outcome.metrics = seen.collect.metrics
        if started.competing is not None:
            self.record_flows(outcome, started.competing, run, plan.values, client, judge.ended(seen))
            seen.flows_failure = started.competing.failure()
        verdict = judge.judge(seen)
        outcome.status, outcome.error, outcome.decided_by = verdict.status, verdict.why, verdict.by
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

    def record_flows(self, outcome: Outcome, competing: CompetingFlows, run: Run, values: dict[str, Any],
                     client: RunProcess, ended: judge.RunVerdict) -> None:
        """The run's flows table (the foreground's row with how its processes ended, and its DCT); a flow that
        failed fails the run (`judge.judge`: the ``flow-failed`` rule)."""
        outcome.flows = competing.records({"label": run.label, "impl": run.impl.name, "workload": run.workload,
                                           "port": values["port"], "status": ended.status,
                                           "error": ended.why, "ended_s": (client.wall_ms or 0) / 1000,
                                           "dct_ms": (outcome.metrics or {}).get("dct_ms")})
        self.testbed.close_flow_groups()

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
