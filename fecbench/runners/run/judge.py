"""A run's status and why, decided by one pure function (`judge`) of what its phases returned (`Seen`) and what
it measured: no IO, no processes (tests/test_run_judge.py tests each rule without either).

The rules, first that holds decides (each named: `RunVerdict.by`):

- ``workload``: the implementation does not declare the run's workload: ``unsupported``, nothing started;
- ``network``: the network measured before the run is not the designed one: ``fidelity`` (the `network` check of
  `fecbench.timekeeping.checks`);
- ``setup``, ``server``, ``flows``: a server setup command failed, the server never became ready (``unsupported``
  if it exited 127), a competing flow did not start: ``failed``;
- ``client-timeout``: the client ran past ``timeout_s`` (killed) or gave up at it (exit 124): ``timeout``;
- ``client-unsupported``: the client exited 127: ``unsupported``;
- ``client-exit``: the client exited non-zero: ``failed``;
- ``server-exit``: the server exited while the client ran: ``failed``;
- ``metrics``: the metrics are unusable: ``failed``;
- ``ok``; then ``flow-failed``: a competing flow failed an ok run: ``failed``;
- then the checks after a run (`fecbench.timekeeping.checks`), for a run ``ok`` or ``timeout`` so far: one that
  flags it makes it ``fidelity``, with how the run itself ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fecbench.records.status import Status
from fecbench.runners.run.outcome import PhaseOutcome
from fecbench.timekeeping import checks

#: The contract's exit status of a client that gave up at its time limit ({timeout_s}), as timeout(1).
EXIT_TIMEOUT = 124
#: The contract's exit status of an unsupported combination (quic-interop-runner's).
EXIT_UNSUPPORTED = 127


@dataclass
class Seen:
    """What a run's phases returned so far (None: the phase has not run), the network and timing measurements,
    and the limits the words name. Filled by the runner as the run goes."""
    unsupported: str | None = None                      # why nothing was started (the workload is not declared)
    fidelity: list[dict[str, Any]] = field(default_factory=list)   # the network measured before the run
    setup: PhaseOutcome | None = None
    server: PhaseOutcome | None = None
    flows: PhaseOutcome | None = None                   # the competing flows started (error: one did not)
    client: PhaseOutcome | None = None
    stop: PhaseOutcome | None = None                    # exit_code: the server's as the client ended
    collect: PhaseOutcome | None = None                 # the metrics read, or why they are unusable
    flows_failure: str | None = None                    # the first competing flow that failed
    endpoints: dict[str, Any] | None = None
    link_stats: list[dict[str, Any]] = field(default_factory=list)
    link_events: list[dict[str, Any]] = field(default_factory=list)
    timeout_s: float = 0.0
    grace_s: float = 0.0                                # past timeout_s before the harness kills the client
    expected_bytes: int | None = None                   # what a complete run delivers


@dataclass(frozen=True)
class RunVerdict:
    status: str           # a Status value
    why: str | None       # the run's error (None when ok)
    by: str               # the rule or checks that decided it


def stopped(seen: Seen) -> RunVerdict | None:
    """The rules before the client: what stopped the run before it started, or None (it goes on)."""
    if seen.unsupported:
        return RunVerdict(Status.UNSUPPORTED, seen.unsupported, "workload")
    network = checks.network_why(seen.fidelity)
    if network:
        return RunVerdict(checks.FLAGGED, network, "network")
    for phase in (seen.setup, seen.server, seen.flows):
        if phase is not None and phase.error:
            # Only the server's 127 says "unsupported": a setup command's 127 is a missing tool.
            said = phase.phase == "server" and phase.exit_code == EXIT_UNSUPPORTED
            return RunVerdict(Status.UNSUPPORTED if said else Status.FAILED, phase.error, phase.phase)
    return None


def ended(seen: Seen) -> RunVerdict:
    """How the run's own processes ended (the rules up to ``ok``), before its competing flows and the checks."""
    early = stopped(seen)
    if early is not None:
        return early
    client, server = seen.client, seen.stop
    if client is None or server is None:
        raise ValueError("a run is judged once its client has run and been stopped")
    metrics = seen.collect.metrics if seen.collect is not None else None
    timeout = seen.timeout_s
    if client.timed_out or client.exit_code == EXIT_TIMEOUT:
        # Its own time limit or the harness's: `timeout`, with what arrived until then if it says so.
        why = (f"client still running {seen.grace_s:g} s after timeout_s = {timeout:g} s (killed)"
               if client.timed_out else
               f"client gave up at timeout_s = {timeout:g} s (exit status {EXIT_TIMEOUT})")
        return RunVerdict(Status.TIMEOUT, why + so_far(metrics, seen.expected_bytes, client.wall_ms), "client-timeout")
    if client.exit_code == EXIT_UNSUPPORTED:
        return RunVerdict(Status.UNSUPPORTED, "client exited with status 127 (unsupported combination)",
                       "client-unsupported")
    if client.exit_code != 0:
        why = f"client exited with status {client.exit_code}"
        reason = (metrics or {}).get("error")
        if isinstance(reason, str) and reason.strip():
            why += f": {reason.strip()[:500]}"
        return RunVerdict(Status.FAILED, why, "client-exit")
    if server.exit_code is not None:
        return RunVerdict(Status.FAILED, f"server exited with status {server.exit_code} during the run", "server-exit")
    if seen.collect is not None and seen.collect.error:
        return RunVerdict(Status.FAILED, f"metrics: {seen.collect.error}", "metrics")
    return RunVerdict(Status.OK, None, "ok")


def judge(seen: Seen) -> RunVerdict:
    """The run's status and why: how its processes ended, a competing flow that failed, then the checks after
    a run (a flagged run keeps, in its words, how it ended)."""
    verdict = ended(seen)
    if seen.flows_failure and verdict.status == Status.OK:
        verdict = RunVerdict(Status.FAILED, seen.flows_failure, "flow-failed")
    measured = checks.Measured(status=verdict.status, endpoints=seen.endpoints, link_stats=seen.link_stats,
                               link_events=seen.link_events)
    found = checks.findings(measured, checks.AFTER)
    if not found:
        return verdict
    # Kept with its metrics, but not as a result: excluded from ratios, re-run by --retry fidelity.
    was = f" (the run itself ended {verdict.status}: {verdict.why})" if verdict.why else ""
    return RunVerdict(checks.FLAGGED, "; ".join(why for _, why in found) + was,
                   ", ".join(dict.fromkeys(name for name, _ in found)))


def metrics_wanted(seen: Seen) -> str | None:
    """Which metrics the collect step reads, by how the processes ended: ``full`` (ok so far: they may still be
    unusable), ``partial`` (what a client that timed out or failed still wrote, kept for the record), or None."""
    return {"ok": "full", "client-timeout": "partial", "client-exit": "partial"}.get(ended(seen).by)


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
