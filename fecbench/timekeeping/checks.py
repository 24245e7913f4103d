"""The named checks that decide whether a run's measurements are to be trusted, in one list (`CHECKS`).

Each check, as in quic-interop-runner, has a name, the runs it applies to (by how they ended), the kind of
record it judges (a path's fidelity row, the endpoints' timing, a link direction's statistics, the link
schedule), whether one such record flags the run, and why, in words. A run a check flags gets the status
`FLAGGED` (``fidelity``): kept with its metrics, left out of every ratio, re-run at the end of its campaign and
by ``--retry fidelity``.

The list is read by the run's judge (``runners.run.judge``: the network before the run, the rest after it),
``endpoint_timing.judge``, the engine's re-runs (``runners.executors.engine``: `FLAGGED`) and the report's
accuracy section (``analysis.report.accuracy``: `named(...).flags` over the recorded rows). Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fecbench.records.status import Status
from fecbench.timekeeping import lateness

#: The status a run gets when a check flags it; the engine re-runs the runs that have it.
FLAGGED = Status.FIDELITY
#: The runs the checks after a run judge: those that ended ok or by a timeout (a timeout may be the load's
#: doing); a failure stays a failure.
JUDGED_AFTER = (Status.OK, Status.TIMEOUT)


@dataclass(frozen=True)
class Measured:
    """What a run measured that the checks judge, as plain data (as the runner and the database hold it)."""
    status: str = Status.OK                          # how the run ended before the checks after it
    fidelity: Sequence[dict[str, Any]] = ()           # the network measured before the run (one row per path)
    endpoints: dict[str, Any] | None = None           # endpoint_timing.summary, or {"error": why}
    link_stats: Sequence[dict[str, Any]] = ()         # one per link direction (runners.run.link_records)
    link_events: Sequence[dict[str, Any]] = ()        # a link schedule's applied changes


@dataclass(frozen=True)
class RunCheck:
    """One check that can flag a run: what it is called, which runs and records it judges, and why it flags."""
    name: str
    subject: str                          # the kind of record it judges: path, endpoints, link or schedule (`subjects`)
    applies: Callable[[Measured], bool]   # the runs it judges
    flags: Callable[[Any], bool]          # one record of its subject flags the run
    says: Callable[[Any], str]            # why, with the record's numbers


def _always(measured: Measured) -> bool:
    return True


def _after(measured: Measured) -> bool:
    return measured.status in JUDGED_AFTER


def path_flags(row: dict[str, Any]) -> bool:
    return row.get("ok") is not None and not row.get("ok")


def path_mismatch(row: dict[str, Any]) -> str:
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


def endpoints_flags(endpoints: dict[str, Any] | None) -> bool:
    """The endpoints' waits beyond their bound added up to more than their share of the run
    (`endpoint_timing.summary`'s ``ok``); not measured ({"error": why}) flags nothing."""
    return bool(endpoints) and endpoints.get("ok") is False


def endpoints_reason(endpoints: dict[str, Any]) -> str:
    """The flag's words for a run whose endpoints waited too long, with its numbers."""
    if endpoints.get("excess_ms") is None:   # recorded before issue 48: judged by the p99
        return (f"endpoints: p99 wake-up latency {endpoints['wakeup_p99_ms']:.3g} ms > bound "
                f"{endpoints['bound_ms']:g} ms (the client and server waited for a CPU)")
    # the union of the threads' waits (issue 67), or their sum (recorded before, or where the spans were not kept)
    counted = "lasted" if endpoints.get("excess_rule") == "union" else "added up to"
    return (f"endpoints: waits beyond {endpoints['bound_ms']:g} ms {counted} {endpoints['excess_ms']:.3g} ms, "
            f"{100 * endpoints['excess_share']:.2g} % of the run's {endpoints['wall_ms']:.0f} ms > "
            f"{100 * endpoints['excess_limit']:g} % (the client and server waited for a CPU long enough to change "
            "its times)")


def _where(stat: dict[str, Any]) -> str:
    return f"{stat.get('link')} {stat.get('direction')}"


def _delay(stat: dict[str, Any]) -> dict[str, Any]:
    return stat.get("delay") or {}


def late_flags(stat: dict[str, Any]) -> bool:
    return lateness.flagged(_delay(stat).get("lateness"))


def late_says(stat: dict[str, Any]) -> str:
    return f"emulation: {lateness.reason(_delay(stat)['lateness'])} on {_where(stat)}"


def shaping_flags(stat: dict[str, Any]) -> bool:
    return bool(_delay(stat).get("mismatch"))


def shaping_says(stat: dict[str, Any]) -> str:
    return f"emulation: {_where(stat)} not as asked: {'; '.join(_delay(stat)['mismatch'])}"


def schedule_flags(schedule: dict[str, Any]) -> bool:
    return not schedule["ok"]


def schedule_says(schedule: dict[str, Any]) -> str:
    return (f"emulation: link schedule change {schedule['worst']} in force {schedule['max_ms']:.3g} ms "
            f"late > bound {schedule['bound_ms']:g} ms")


#: Every check that can flag a run, in the order their reasons are said.
CHECKS: tuple[RunCheck, ...] = (
    # The network as built against the design, measured before the run (ping RTT, rate probe): the run does
    # not start on a network that is not the designed one.
    RunCheck("network", "path", _always, path_flags, path_mismatch),
    # The endpoints waited for a CPU long enough to change the run's times (endpoint_timing).
    RunCheck("endpoints", "endpoints", _after, endpoints_flags, endpoints_reason),
    # A delay element sent frames later than its bound (lateness.summary; the record is a link direction's
    # statistics: its ``delay.lateness``).
    RunCheck("delay-lateness", "link", _after, late_flags, late_says),
    # The kernel did not hold a link's rate limiter or queue as asked (read back after the run).
    RunCheck("link-shaping", "link", _after, shaping_flags, shaping_says),
    # A link schedule's change came in force later than its bound (lateness.schedule_summary).
    RunCheck("link-schedule", "schedule", _after, schedule_flags, schedule_says),
)


def named(name: str) -> RunCheck:
    """The check called `name`."""
    for check in CHECKS:
        if check.name == name:
            return check
    raise KeyError(name)


#: The checks that flag what the host's load does to a run (a CPU taken from its endpoints or its delay elements), as
#: opposed to a network built or shaped otherwise than designed: what `--jobs` admission reacts to.
LOAD_CHECKS = ("endpoints", "delay-lateness")


def load_flagged(endpoints: dict[str, Any] | None, link_stats: Sequence[dict[str, Any]]) -> bool:
    """Whether the host's load flagged the run (a check of `LOAD_CHECKS`)."""
    return any(check.flags(record) for subject, record in subjects(Measured(endpoints=endpoints, link_stats=link_stats))
               for check in CHECKS if check.name in LOAD_CHECKS and check.subject == subject)


def subjects(measured: Measured) -> list[tuple[str, Any]]:
    """The records of a run the checks judge, (subject, record), in the order their reasons are said: each
    path's fidelity row, the endpoints, each link direction (each check of links in turn), the schedule."""
    schedule = lateness.schedule_summary(measured.link_events)
    return [*(("path", row) for row in measured.fidelity),
            *([("endpoints", measured.endpoints)] if measured.endpoints else []),
            *(("link", stat) for stat in measured.link_stats),
            *([("schedule", schedule)] if schedule else [])]


def findings(measured: Measured, subject_kinds: Sequence[str]) -> list[tuple[str, str]]:
    """(check name, why) for each record of the given kinds a check that applies flags, in `subjects` order."""
    return [(check.name, check.says(record)) for subject, record in subjects(measured) if subject in subject_kinds
            for check in CHECKS if check.subject == subject and check.applies(measured) and check.flags(record)]


#: The subjects judged before a run (the network as built) and after it (what the run measured).
BEFORE, AFTER = ("path",), ("endpoints", "link", "schedule")


def network_why(fidelity: Sequence[dict[str, Any]]) -> str | None:
    """Why the network measured before the run is not the designed one (the `network` check), or None."""
    found = findings(Measured(fidelity=fidelity), BEFORE)
    return f"network does not match the design: {'; '.join(why for _, why in found)}" if found else None


def untrusted(measured: Measured) -> str | None:
    """Why a finished run's measurements are not to be trusted (the checks after it, reasons joined), or None."""
    found = findings(measured, AFTER)
    return "; ".join(why for _, why in found) or None
