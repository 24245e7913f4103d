"""A run's status and why from what its phases returned (runners.run.judge), and the named checks that decide
whether it is trusted (timekeeping.checks): pure, no processes, no network, no root.

Each rule of the judge has its test, in the judge's order of priority: the run in each test also meets every
later rule's condition, so a rule that moved down the order (or vanished) fails its test.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from fecbench.runners.run import judge
from fecbench.runners.run.judge import RunVerdict, Seen, metrics_wanted
from fecbench.runners.run.outcome import PhaseOutcome
from fecbench.timekeeping import checks, endpoint_timing

# What a later rule would catch: the server died while the client ran, the metrics are unusable.
SERVER_DIED = PhaseOutcome("stop", exit_code=1, wall_ms=1500.0)
BAD_METRICS = PhaseOutcome("collect", error="no metrics.json")
PARTIAL = PhaseOutcome("collect", metrics={"bytes_app": 333, "error": "  connection lost \n"})
BAD_PATH = {"path": 1, "rtt_configured_ms": 20.0, "rtt_measured_ms": 30.0, "ok": False}
LATE_ENDPOINTS = {"ok": False, "wakeup_p99_ms": 3.2, "bound_ms": 1.0, "excess_ms": 12.5, "excess_share": 0.025,
                  "wall_ms": 500.0, "excess_limit": 0.01}
ENDPOINTS_WHY = ("endpoints: waits beyond 1 ms added up to 12.5 ms, 2.5 % of the run's 500 ms > 1 % (the client "
                 "and server waited for a CPU long enough to change its times)")
LATE_LINK = {"link": "bottleneck", "direction": "forward",
             "delay": {"lateness": {"ok": False, "frames": 2000, "p99_us": 800.0, "max_us": 900.0, "bound_ms": 0.5,
                                    "quantile_frames": 1000, "wall_ms": 5000.0, "worst_excess_ms": 0.4,
                                    "worst_limit": 0.01}}}
LATE_WHY = "emulation: delay element p99 lateness 0.8 ms over 2000 frames > bound 0.5 ms on bottleneck forward"
MISSHAPEN_LINK = {"link": "access", "direction": "reverse", "delay": {"mismatch": ["rate 9 Mbit/s, asked 10"]}}
MISSHAPEN_WHY = "emulation: access reverse not as asked: rate 9 Mbit/s, asked 10"
LATE_CHANGE = [{"kind": "set", "link": "bottleneck", "direction": "forward", "scheduled_s": 1.0, "applied_s": 1.005}]
SCHEDULE_WHY = "emulation: link schedule change set on bottleneck forward at 1 s in force 5 ms late > bound 2 ms"


@pytest.fixture(autouse=True)
def default_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FECBENCH_SCHEDULE_BOUND_MS", "FECBENCH_LATENESS_BOUND_MS", "FECBENCH_EXCESS_SHARE"):
        monkeypatch.delenv(name, raising=False)


def ran(**changes: object) -> Seen:
    """A run whose phases all went well (client exit 0, server alive, metrics read), then `changes`."""
    base = Seen(setup=PhaseOutcome("setup"), server=PhaseOutcome("server"), flows=PhaseOutcome("flows"),
                client=PhaseOutcome("client", exit_code=0, wall_ms=1500.0), stop=PhaseOutcome("stop", wall_ms=1500.0),
                collect=PhaseOutcome("collect", metrics={"dct_ms": 120.0}), timeout_s=3.0, grace_s=2.0,
                expected_bytes=1000)
    return replace(base, **changes)


# --- the rules, in their order ------------------------------------------------------------------------------

def test_1_an_undeclared_workload_is_unsupported_before_anything() -> None:
    seen = Seen(unsupported="implementation 'q' does not declare workload 'upload'", fidelity=[BAD_PATH])
    assert judge.judge(seen) == RunVerdict("unsupported", "implementation 'q' does not declare workload 'upload'",
                                        "workload")
    assert judge.stopped(seen) == judge.judge(seen)


def test_2_a_network_unlike_the_design_is_fidelity_before_the_run_starts() -> None:
    seen = Seen(fidelity=[{**BAD_PATH, "ok": True, "path": 2}, BAD_PATH,
                          {**BAD_PATH, "path": 3, "rate_configured_mbit": 10.0, "rate_measured_mbit": 8.0,
                           "probes_sent": 10, "probes_received": 9}],
                setup=PhaseOutcome("setup", exit_code=1, error="server setup command openssl exited with status 1"))
    assert judge.judge(seen) == RunVerdict(
        "fidelity", "network does not match the design: path 1: RTT 30.000 ms measured, 20.000 ms configured; "
        "path 3: RTT 30.000 ms measured, 20.000 ms configured, rate 8.000 Mbit/s measured, 10.000 configured, "
        "9 of 10 probes back", "network")
    assert judge.stopped(Seen(fidelity=[{**BAD_PATH, "ok": None}])) is None   # not judged: not a mismatch


def test_3_a_failed_setup_command_fails_the_run() -> None:
    seen = Seen(setup=PhaseOutcome("setup", exit_code=127, error="server setup command openssl exited with "
                                                                  "status 127: not found"),
                server=PhaseOutcome("server", exit_code=127, error="server exited with status 127 before being ready"))
    assert judge.judge(seen) == RunVerdict("failed", "server setup command openssl exited with status 127: not found",
                                        "setup")


def test_4_a_server_never_ready_fails_the_run_or_says_unsupported() -> None:
    not_ready = PhaseOutcome("server", error="server not ready after 3 s (no output matching '^listening')")
    flows = PhaseOutcome("flows", error="flow f1: server not ready")
    assert judge.judge(Seen(setup=PhaseOutcome("setup"), server=not_ready, flows=flows)) == RunVerdict(
        "failed", "server not ready after 3 s (no output matching '^listening')", "server")
    said = PhaseOutcome("server", exit_code=127, error="server exited with status 127 before being ready")
    assert judge.judge(Seen(server=said)).status == "unsupported"
    assert judge.judge(Seen(server=replace(said, exit_code=1))).status == "failed"


def test_5_a_competing_flow_that_did_not_start_fails_the_run() -> None:
    seen = ran(flows=PhaseOutcome("flows", error="flow f1: server not ready"), client=None, stop=None)
    assert judge.judge(seen) == RunVerdict("failed", "flow f1: server not ready", "flows")


def test_6_a_client_past_its_time_limit_is_a_timeout_with_what_arrived() -> None:
    killed = ran(client=PhaseOutcome("client", timed_out=True, wall_ms=5012.0), stop=SERVER_DIED, collect=PARTIAL)
    assert judge.judge(killed) == RunVerdict(
        "timeout", "client still running 2 s after timeout_s = 3 s (killed): 333 of 1000 bytes received, after 5.0 s",
        "client-timeout")
    gave_up = ran(client=PhaseOutcome("client", exit_code=124, wall_ms=3001.0), stop=SERVER_DIED,
                  collect=PhaseOutcome("collect", metrics={"bytes_app": 333, "elapsed_ms": 2990}))
    assert judge.judge(gave_up).why == ("client gave up at timeout_s = 3 s (exit status 124): 333 of 1000 bytes "
                                        "received, after 3.0 s")
    quiet = ran(client=PhaseOutcome("client", exit_code=124, wall_ms=None), collect=PhaseOutcome("collect"))
    assert judge.judge(quiet).why == "client gave up at timeout_s = 3 s (exit status 124)"


def test_7_a_client_exiting_127_is_unsupported() -> None:
    seen = ran(client=PhaseOutcome("client", exit_code=127, wall_ms=20.0), stop=SERVER_DIED, collect=BAD_METRICS)
    assert judge.judge(seen) == RunVerdict("unsupported", "client exited with status 127 (unsupported combination)",
                                        "client-unsupported")


def test_8_a_client_exiting_non_zero_fails_with_its_own_words() -> None:
    seen = ran(client=PhaseOutcome("client", exit_code=2, wall_ms=900.0), stop=SERVER_DIED, collect=PARTIAL)
    assert judge.judge(seen) == RunVerdict("failed", "client exited with status 2: connection lost", "client-exit")
    silent = ran(client=PhaseOutcome("client", exit_code=-9), collect=PhaseOutcome("collect"))
    assert judge.judge(silent).why == "client exited with status -9"


def test_9_a_server_that_died_during_the_run_fails_it() -> None:
    seen = ran(stop=SERVER_DIED, collect=BAD_METRICS)
    assert judge.judge(seen) == RunVerdict("failed", "server exited with status 1 during the run", "server-exit")


def test_10_unusable_metrics_fail_the_run() -> None:
    assert judge.judge(ran(collect=BAD_METRICS)) == RunVerdict("failed", "metrics: no metrics.json", "metrics")


def test_11_a_run_whose_phases_went_well_is_ok() -> None:
    assert judge.judge(ran()) == RunVerdict("ok", None, "ok")
    with pytest.raises(ValueError, match="once its client has run"):
        judge.judge(ran(client=None))


def test_12_a_failed_competing_flow_fails_an_ok_run_only() -> None:
    assert judge.judge(ran(flows_failure="flow f1 failed: client exited with status 1")) == RunVerdict(
        "failed", "flow f1 failed: client exited with status 1", "flow-failed")
    timed_out = ran(client=PhaseOutcome("client", timed_out=True), flows_failure="flow f1 failed: x")
    assert judge.judge(timed_out).status == "timeout"
    # the flows table's foreground row says how the processes ended, before the flows' verdict
    assert judge.ended(ran(flows_failure="flow f1 failed: x")).status == "ok"


def test_13_a_check_after_the_run_flags_an_ok_or_timed_out_run_as_fidelity() -> None:
    assert judge.judge(ran(endpoints=LATE_ENDPOINTS)) == RunVerdict("fidelity", ENDPOINTS_WHY, "endpoints")
    killed = ran(client=PhaseOutcome("client", timed_out=True, wall_ms=5000.0), collect=PhaseOutcome("collect"),
                 link_stats=[LATE_LINK])
    assert judge.judge(killed) == RunVerdict(
        "fidelity", f"{LATE_WHY} (the run itself ended timeout: client still running 2 s after timeout_s = 3 s "
        "(killed): after 5.0 s)", "delay-lateness")
    failed = ran(collect=BAD_METRICS, endpoints=LATE_ENDPOINTS, link_stats=[LATE_LINK], link_events=LATE_CHANGE)
    assert judge.judge(failed).status == "failed"                 # a failure stays a failure
    flow_failed = ran(flows_failure="flow f1 failed: x", endpoints=LATE_ENDPOINTS)
    assert judge.judge(flow_failed).status == "failed"           # judged after the flows' rule
    unmeasured = ran(endpoints={"error": "not measured"},
                     link_stats=[{"link": "a", "direction": "forward", "delay": {"mismatch": []}}])
    assert judge.judge(unmeasured).status == "ok"


def test_the_reasons_come_in_the_order_of_what_they_are_about() -> None:
    """The endpoints, each link direction in turn (its lateness, then its shaping), the schedule: as
    endpoint_timing.judge said them before the checks were named."""
    seen = ran(endpoints=LATE_ENDPOINTS, link_stats=[MISSHAPEN_LINK, LATE_LINK], link_events=LATE_CHANGE)
    why = f"{ENDPOINTS_WHY}; {MISSHAPEN_WHY}; {LATE_WHY}; {SCHEDULE_WHY}"
    assert judge.judge(seen) == RunVerdict("fidelity", why, "endpoints, link-shaping, delay-lateness, link-schedule")
    assert endpoint_timing.judge("ok", LATE_ENDPOINTS, [MISSHAPEN_LINK, LATE_LINK], LATE_CHANGE) == why
    assert endpoint_timing.judge("failed", LATE_ENDPOINTS, [LATE_LINK]) is None


def test_which_metrics_the_collect_step_reads() -> None:
    assert metrics_wanted(ran(collect=None)) == "full"
    assert metrics_wanted(ran(client=PhaseOutcome("client", timed_out=True), collect=None)) == "partial"
    assert metrics_wanted(ran(client=PhaseOutcome("client", exit_code=124), collect=None)) == "partial"
    assert metrics_wanted(ran(client=PhaseOutcome("client", exit_code=1), collect=None)) == "partial"
    assert metrics_wanted(ran(client=PhaseOutcome("client", exit_code=127), collect=None)) is None
    assert metrics_wanted(ran(stop=SERVER_DIED, collect=None)) is None


# --- the named checks -----------------------------------------------------------------------------------------

def test_the_checks_are_named_once() -> None:
    assert [c.name for c in checks.CHECKS] == ["network", "endpoints", "delay-lateness", "link-shaping",
                                               "link-schedule"]
    assert checks.named("link-shaping").says(MISSHAPEN_LINK) == MISSHAPEN_WHY
    with pytest.raises(KeyError):
        checks.named("p99")
    assert checks.FLAGGED == "fidelity"


def test_the_report_counts_the_runs_the_checks_flag() -> None:
    from fecbench.analysis.report.accuracy import flagged_runs

    ends = pd.DataFrame([{"run_key": "a", "ok": False}, {"run_key": "b", "ok": True}, {"run_key": "c", "ok": None}])
    assert flagged_runs(ends, checks.named("endpoints")) == 1
    late = LATE_LINK["delay"]["lateness"]
    rows = pd.DataFrame([{"run_key": "a", **late}, {"run_key": "a", **late}, {"run_key": "b", **late, "ok": True}])
    assert flagged_runs(rows, checks.named("delay-lateness"), lambda row: {"delay": {"lateness": row}}) == 1


def test_the_judge_does_no_io() -> None:
    """judge.py imports what it decides from, nothing that starts a process or reads a file."""
    source = Path(judge.__file__).read_text()
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import) for a in node.names}
    assert imported <= {"__future__", "dataclasses", "typing", "fecbench.records.status",
                        "fecbench.runners.run.outcome", "fecbench.timekeeping"}, imported
