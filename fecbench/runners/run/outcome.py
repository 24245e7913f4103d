"""What executing one run gives back, wherever it ran: status, error, metrics, logs and link records; and what
each of its phases observed on the way (`PhaseOutcome`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    status: str                              # a fecbench.records.status.Status value
    error: str | None = None
    decided_by: str | None = None            # runners.run.judge's rule, or the checks that flagged it (RunVerdict.by)
    metrics: dict[str, Any] | None = None
    client_wall_ms: float | None = None
    server_log: str | None = None
    client_log: str | None = None
    link_stats: list[dict[str, Any]] = field(default_factory=list)
    fidelity: list[dict[str, Any]] = field(default_factory=list)
    verdict_logs: list[tuple[str, str, bytes]] = field(default_factory=list)
    link_events: list[dict[str, Any]] = field(default_factory=list)   # a link schedule's applied changes
    # How long the endpoints waited for a CPU during the run (fecbench.timekeeping.endpoint_timing.summary), or
    # {"error": why} where it could not be measured; None: the run started no process.
    endpoints: dict[str, Any] | None = None
    # A run with competing flows: one row per flow and one for the foreground (runners.run.competing.records).
    flows: list[dict[str, Any]] = field(default_factory=list)
    # Where the run's wall time went (seconds per phase: runners.run.lifecycle.PHASES), measured where it ran.
    phases: dict[str, float] = field(default_factory=dict)
    # What the run kept to explain itself (runners.experiment.capture): kind, path under the artifacts folder, bytes.
    artifacts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class PhaseOutcome:
    """What one phase's IO step observed (runners.run.phases), as plain data: runners.run.judge says what it means."""
    phase: str                               # setup, server (started and ready), flows, client, stop, collect
    exit_code: int | None = None             # its process's exit status (stop: the server's, seen as the client
    #                                          ended); None: no process, or still running
    timed_out: bool = False                  # still running at its time limit (then killed)
    wall_ms: float | None = None             # its process's wall time, start to exit (or to its kill)
    error: str | None = None                 # why it could not do its job, in its words
    metrics: dict[str, Any] | None = None    # collect: the metrics read (runners.run.judge.metrics_wanted)
    notes: tuple[str, ...] = ()              # stop: what the packet captures said (they do not change the status)
