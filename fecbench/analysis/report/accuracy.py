"""The report's accuracy section: how late the endpoints (``fecbench.timekeeping.endpoint_timing``) and the delay
elements (``fecbench.timekeeping.lateness``) ran during the runs, and which runs that put out of the results: those
the runner's own named checks flag (``fecbench.timekeeping.checks``: ``endpoints``, ``delay-lateness``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from fecbench.analysis.tables import endpoint_timing, lateness
from fecbench.timekeeping.checks import RunCheck, named
from fecbench.timekeeping.lateness import criterion_text, judge


def judge_frame(late: pd.DataFrame) -> dict:
    """`lateness.judge` of `tables.lateness`'s rows (a direction a row; a column a run recorded without: absent)."""
    return judge((row["run_key"], {k: v for k, v in row.items() if not _missing(v)})
                 for row in late.to_dict("records"))


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def flagged_runs(rows: pd.DataFrame, check: RunCheck, record: Callable[[dict], Any] = lambda row: row,
                 decided: pd.DataFrame | None = None) -> int:
    """The runs of `rows` (tables' rows: one per run, or per run and link direction) that `check` flagged: as judged
    when they ran where `decided` (a runs frame: ``key``, ``decided_by``) recorded it, so that a bound changed since
    never re-decides them; a run recorded before that (no ``decided_by``) judged from its record, however it ended
    (`record`: a row as the record the check judges)."""
    recorded = {} if decided is None or "decided_by" not in decided else \
        {k: str(v) for k, v in zip(decided["key"], decided["decided_by"], strict=True) if not _missing(v)}
    keys = {row["run_key"] for row in rows.to_dict("records") if row["run_key"] not in recorded
            and check.flags(record({k: v for k, v in row.items() if not _missing(v)}))}
    mine = set(rows["run_key"]) & set(recorded)
    return len(keys) + sum(check.name in [n.strip() for n in recorded[key].split(",")] for key in mine)


def accuracy_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path, frame: pd.DataFrame,
                     figure: Callable[..., None]) -> None:
    """How late the endpoints (timekeeping.endpoint_timing) and the delay elements (timekeeping.lateness) ran
    during the runs: one table row each, and a figure of both per run with their bounds."""
    from fecbench.analysis import figures

    rows = []
    ends = endpoint_timing(db)
    measured = ends[ends["wakeup_p99_ms"].notna()]
    if len(ends):
        rows.append({"what": "endpoints: p99 wake-up latency", "runs": len(measured),
                     "above the bound": flagged_runs(measured, named("endpoints"), decided=frame),
                     "bound ms": measured["bound_ms"].max(), "median ms": measured["wakeup_p99_ms"].median(),
                     "worst ms": measured["wakeup_p99_ms"].max(),
                     "median run-queue share": measured["runq_share"].median(),
                     "not measured": int(ends["error"].notna().sum())})
    late = lateness(db)
    if len(late):
        judged = judge_frame(late)
        rows.append({"what": "delay elements: p99 lateness", "runs": late["run_key"].nunique(),
                     # the check judges a link direction's statistics: a row here is their delay.lateness
                     "above the bound": flagged_runs(late, named("delay-lateness"),
                                                     lambda row: {"delay": {"lateness": row}}, decided=frame),
                     "bound ms": late["bound_ms"].max(), "median ms": late["p99_us"].median() / 1000,
                     "worst ms": late["p99_us"].max() / 1000, "criterion": criterion_text(judged)})
    if not rows:
        return
    name = "accuracy during runs"
    tables[name] = pd.DataFrame(rows)
    notes[name] = ("How late the run's endpoints (client, server: from a wake-up to running on a CPU) and "
                          "delay elements (a frame's departure after its due time) ran. A run above a bound is "
                          "recorded as fidelity, kept with its metrics and left out of every ratio "
                          "(fecbench run --retry fidelity re-runs it); run-queue share: the time the endpoints' "
                          "threads waited for a CPU over the run's wall time.")
    if len(measured):
        figure("run-accuracy", figures.run_accuracy(frame, measured["bound_ms"].max(),
                                                     late["bound_ms"].max() if len(late) else None),
               "Per run: the endpoints' p99 wake-up latency against the delay elements' worst p99 lateness; runs "
               "beyond a bound (dashed, dotted) are recorded as fidelity and left out of the ratios.")
