"""A run's plan (`RunPlan`: argv, environment, files, limits, as data) and its IO steps, one per phase: run the
server's setup commands, start the server and wait until it is ready, run the client, stop what is left,
read the metrics. Each step returns what it observed as a `PhaseOutcome` (plain data); what that means for the
run is decided by runners.run.judge, never here.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.runners.experiment.runs import Run, grace_s
from fecbench.runners.run.competing import CompetingFlows, wait_foreground
from fecbench.runners.run.outcome import PhaseOutcome
from fecbench.runners.run.procs import wait_ready
from fecbench.runners.run.run_metrics import MetricsError, collect_metrics, expected_bytes, partial_metrics
from fecbench.runners.run.testbed import RunProcess, ScheduleRun, Testbed

if TYPE_CHECKING:
    from fecbench.runners.experiment.descriptor import Descriptor


@dataclass(frozen=True)
class RunPlan:
    """What one run starts, decided before anything starts: argv, environment, files and limits."""
    run_dir: Path
    values: dict[str, Any]                    # the descriptor's placeholders, filled for this run
    server_argv: list[str]
    client_argv: list[str]
    server_env: dict[str, str]
    client_env: dict[str, str]
    setup_argvs: list[list[str]]              # the descriptor's [server] setup commands, in order
    served: tuple[Path, int] | None           # the random file the server serves (a download) and its size
    ready_pattern: str | None                 # the server is ready when a line of its output matches
    ready_delay_s: float                      # ... or (no pattern) after this long
    timeout_s: float                          # the design's one time limit
    grace_s: float                            # past timeout_s before the harness kills the client
    expected_bytes: int | None                # what a complete run delivers


def plan_run(descriptor: Descriptor, run: Run, values: dict[str, Any], arg_lists: dict[str, list[str]],
             run_dir: Path, timeout_s: float) -> RunPlan:
    """The run's plan from its descriptor and filled placeholders (no IO)."""
    from fecbench.runners.experiment.argv_template import render

    serves = descriptor.server_files and run.size is not None and run.workload == "download"
    return RunPlan(
        run_dir=run_dir, values=values,
        server_argv=render(descriptor.server_argv, values, arg_lists),
        client_argv=render(descriptor.client_argv[run.workload], values, arg_lists),
        server_env={k: v.format_map(values) for k, v in descriptor.server_env.items()},
        client_env={k: v.format_map(values) for k, v in descriptor.client_env.items()},
        setup_argvs=[render(template, values, {}) for template in descriptor.server_setup],
        served=(run_dir / "www" / str(run.size), run.size) if serves and run.size is not None else None,
        ready_pattern=descriptor.ready_pattern, ready_delay_s=descriptor.ready_delay_s,
        timeout_s=timeout_s, grace_s=grace_s(timeout_s), expected_bytes=expected_bytes(run, values))


def write_files(plan: RunPlan) -> None:
    """The files the plan's server serves: random bytes, so no compression or caching helps."""
    if plan.served is not None:
        path, size = plan.served
        path.parent.mkdir()
        path.write_bytes(os.urandom(size))


@dataclass
class RunningProcesses:
    """What a run has running, for the stop step to end whatever happened."""
    server: RunProcess | None = None
    client: RunProcess | None = None
    applier: ScheduleRun | None = None
    competing: CompetingFlows | None = None
    flows_origin: float = 0.0                 # when the competing flows' time started (monotonic)
    processes: list[RunProcess] = field(default_factory=list)   # the runner's, for a harness fault's stop_all


def run_setup(testbed: Testbed, plan: RunPlan, processes: list[RunProcess]) -> PhaseOutcome:
    """Run the descriptor's `[server] setup` commands (e.g. make a certificate) in the run folder, on the server
    host, in order; the first that fails says why."""
    for i, argv in enumerate(plan.setup_argvs):
        process = testbed.start_process("server", f"setup{i}", argv, plan.run_dir, cwd=plan.run_dir)
        processes.append(process)
        try:
            code = process.wait(plan.timeout_s)
        finally:
            process.stop(grace_s=0.5)
            processes.remove(process)
        if code != 0:
            what = f"still running after {plan.timeout_s:g} s" if code is None else f"exited with status {code}"
            return PhaseOutcome("setup", exit_code=code, timed_out=code is None,
                                error=f"server setup command {argv[0]} {what}: {process.output()[-500:]}")
    return PhaseOutcome("setup")


def start_server(testbed: Testbed, plan: RunPlan, started: RunningProcesses) -> PhaseOutcome:
    """Start the server and wait until it is ready; not ready: why, and its exit status if it exited (left
    running otherwise: the stop step ends it)."""
    started.server = server = testbed.start_process("server", "server", plan.server_argv, plan.run_dir,
                                                    env=plan.server_env, cwd=plan.run_dir)
    started.processes.append(server)
    not_ready = wait_ready(server, plan.ready_pattern, plan.ready_delay_s, plan.timeout_s)
    return PhaseOutcome("server", exit_code=server.poll() if not_ready else None, error=not_ready)


def run_client(testbed: Testbed, plan: RunPlan, started: RunningProcesses) -> PhaseOutcome:
    """Start the client and wait for it (and the competing flows due meanwhile) up to the time limit and its
    grace; still running then: timed out (the stop step kills it)."""
    started.client = client = testbed.start_process("client", "client", plan.client_argv, plan.run_dir,
                                                    env=plan.client_env, cwd=plan.run_dir)
    started.processes.append(client)
    if started.competing is not None:
        started.competing.started_foreground(max(started.flows_origin, client.started), client)
    code = wait_foreground(client, started.competing, plan.timeout_s + plan.grace_s)
    return PhaseOutcome("client", exit_code=code, timed_out=code is None)


def stop(testbed: Testbed, started: RunningProcesses) -> PhaseOutcome:
    """End whatever the run started, whatever happened: the server's exit status first (a server that died
    while the client ran), then client and server, the link schedule's changes undone, the competing flows,
    the packet captures (what they said: the notes)."""
    server_code = started.server.poll() if started.server is not None else None
    for process in (started.client, started.server):
        if process is not None:
            process.stop()
    if started.applier is not None:
        started.applier.stop()
    if started.competing is not None:
        started.competing.stop_all()
    for process in (started.client, started.server):
        if process is not None:
            with contextlib.suppress(ValueError):
                started.processes.remove(process)
    wall = started.client.wall_ms if started.client is not None else None
    return PhaseOutcome("stop", exit_code=server_code, wall_ms=wall, notes=tuple(testbed.stop_captures()))


def read_metrics(wanted: str | None, descriptor: Descriptor, run: Run, values: dict[str, Any],
                 client: RunProcess) -> PhaseOutcome:
    """The run's metrics as `judge.metrics_wanted` asks: ``full`` (unusable ones: why), ``partial``, or none."""
    if wanted == "partial":
        return PhaseOutcome("collect", metrics=partial_metrics(descriptor, values))
    if wanted == "full":
        try:
            return PhaseOutcome("collect", metrics=collect_metrics(descriptor, run, values, client))
        except MetricsError as exc:
            return PhaseOutcome("collect", error=str(exc))
    return PhaseOutcome("collect")
