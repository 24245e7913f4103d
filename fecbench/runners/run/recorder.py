"""The recorder: every write a campaign makes to its results database goes through here.

One writer per database (the engine's process, whatever executes the runs); readers use
`db.open_readonly`. A failed write (disk full, database gone) stops the campaign with a clear error:
results are never silently lost.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fecbench import __version__
from fecbench.inputs.errors import UserError
from fecbench.records import db as dbmod
from fecbench.records import run_records
from fecbench.records.provenance import git_sha
from fecbench.records.status import Status
from fecbench.runners.experiment.design import Design
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.outcome import Outcome

if TYPE_CHECKING:
    from fecbench.planner.plan import Plan

T = TypeVar("T")

MIN_FREE_BYTES = 50 * 10**6


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def impls_fingerprint(design: Design) -> dict[str, Any]:
    """What a campaign records about its implementations (versions, descriptors, binary hashes)."""
    return {e.label: {"name": e.name, "args": e.args, **e.descriptor.fingerprint()} for e in design.impls}


def check_free_space(folder: Path, minimum: int = MIN_FREE_BYTES) -> None:
    """Refuse to start a campaign on a (nearly) full disk: runs write logs and the database grows.
    Creates nothing (the folder's nearest existing ancestor is measured): a campaign refused later,
    e.g. for a link backend this kernel lacks, leaves no trace."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < minimum:
        raise UserError(f"{folder}: only {free / 1e6:.1f} MB free, a campaign needs at least "
                        f"{minimum / 1e6:.0f} MB (results database and run logs)")


def read_statuses(db_path: Path) -> dict[str, str]:
    """key -> status of the runs already in a results database (empty if it does not exist yet). A run started and
    not finished (`running`) reads as `interrupted`: not done, to do again, as every caller (the selection of the
    runs to do, a reproduction's) counted it when the database said so."""
    if not db_path.exists():
        return {}
    conn = dbmod.open_readonly(db_path)  # a UserError if it is not a database this fecbench can use
    try:
        return {key: Status.INTERRUPTED.value if status == Status.RUNNING else status
                for key, status in run_records.run_statuses(conn).items()}
    except sqlite3.Error as exc:
        raise UserError(f"{db_path}: cannot use this results database: {exc}") from None
    finally:
        conn.close()


def read_retried(db_path: Path, statuses: Iterable[str]) -> set[str]:
    """Keys of the runs already run again after ending with one of ``statuses`` (their earlier outcome kept)."""
    if not db_path.exists():
        return set()
    conn = dbmod.open_readonly(db_path)
    try:
        return run_records.retried_keys(conn, statuses)
    except sqlite3.Error:     # a database from before earlier outcomes were kept: none
        return set()
    finally:
        conn.close()


def read_design_texts(db_path: Path) -> list[str]:
    """The design text of each campaign the database holds, the first recorded first."""
    if not db_path.exists():
        return []
    conn = dbmod.open_readonly(db_path)
    try:
        return dbmod.design_texts(conn)
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def _manifest(plan: Plan) -> dict[str, Any]:
    manifest = getattr(plan, "manifest", {}) or {}
    return json.loads(json.dumps(manifest, default=str))


class Recorder:
    """The campaign's row, its points and pending runs, and each run's start and outcome."""

    def __init__(self, conn: sqlite3.Connection, campaign_id: int) -> None:
        self.conn, self.campaign_id = conn, campaign_id

    @classmethod
    def open(cls, db_path: Path, prepared: Prepared, link_backend: str, host_info: dict[str, Any],
             impls_info: dict[str, Any]) -> Recorder:
        """Find this design's campaign row (same design text) or create one; add points and pending runs."""
        conn = dbmod.connect(db_path)
        try:
            campaign_id = _write(_open_campaign, conn, prepared, link_backend, host_info, impls_info)
        except BaseException:
            conn.close()
            raise
        return cls(conn, campaign_id)

    def add_pending(self, prepared: Prepared, runs: list[Run]) -> None:
        """Runs chosen after the campaign started (a reproduction's runs for idle networks), pending."""
        _write(_add_pending, self.conn, self.campaign_id, prepared, runs)

    def started(self, run: Run, link_backend: str, host: str) -> None:
        _write(run_records.start_run, self.conn, run.key, now_iso(), link_backend, host, run_records.runner_name())

    def finished(self, run: Run, outcome: Outcome, duration_s: float) -> None:
        _write(run_records.finish_run, self.conn, run.key, status=outcome.status, error=outcome.error,
               server_log_tail=outcome.server_log, client_log_tail=outcome.client_log,
               finished_at=now_iso(), duration_s=duration_s,
               metrics=outcome.metrics, client_wall_ms=outcome.client_wall_ms,
               link_stats=outcome.link_stats, fidelity=outcome.fidelity, verdict_logs=outcome.verdict_logs,
               link_events=outcome.link_events, phases=outcome.phases, endpoints=outcome.endpoints,
               flows=outcome.flows, artifacts=outcome.artifacts, decided_by=outcome.decided_by)

    def keep_earlier(self, run: Run, why_again: str) -> None:
        """A finished run about to run again: its outcome copied aside (earlier_outcomes)."""
        _write(run_records.keep_earlier_outcome, self.conn, run.key, why_again)

    def session(self, **fields: float | int | str | None) -> None:
        """This campaign process's wall time, networks and runs (runners.experiment.estimate learns from them)."""
        _write(run_records.insert_session, self.conn, campaign_id=self.campaign_id,
               runner=run_records.runner_name(), **fields)

    def breaker(self, label: str, runs: int, status: str, error: str, skipped: int) -> None:
        """The circuit breaker stopped a label (runners/executors/engine.py)."""
        _write(run_records.insert_breaker, self.conn, self.campaign_id, label, now_iso(), runs, status, error, skipped)

    def update_host(self, host_info: dict[str, Any]) -> None:
        _write(dbmod.update_campaign, self.conn, self.campaign_id, host_json=host_info)

    def close(self) -> None:
        dbmod.release(self.conn)


class TwinRecorder(Recorder):
    """`fecbench run --twins`: each twin's start and outcome beside its run, in the twins table, never in its place:
    the runs table and every table keyed by a run keep the run's own outcome. A flagged twin re-run by the engine
    is the same twin's next attempt; a circuit breaker over twins is printed, not recorded as the campaign's."""

    def __init__(self, conn: sqlite3.Connection, campaign_id: int) -> None:
        super().__init__(conn, campaign_id)
        self.twin_of: dict[str, int] = {}   # run key -> the twin this process started

    def started(self, run: Run, link_backend: str, host: str) -> None:
        self.twin_of[run.key] = _write(run_records.start_twin, self.conn, run.key, now_iso(), link_backend, host,
                                       run_records.runner_name(), self.twin_of.get(run.key))

    def finished(self, run: Run, outcome: Outcome, duration_s: float) -> None:
        if run.key not in self.twin_of:   # an outcome of a twin never started (defensive: executors start first)
            self.started(run, "", "")
        measured = {"link_stats": outcome.link_stats, "fidelity": outcome.fidelity, "endpoints": outcome.endpoints,
                    "phases": outcome.phases, "flows": outcome.flows, "link_events": outcome.link_events,
                    "artifacts": outcome.artifacts}
        metrics = None if outcome.metrics is None and outcome.client_wall_ms is None else \
            {**(outcome.metrics or {}), "client_wall_ms": outcome.client_wall_ms}
        _write(run_records.finish_twin, self.conn, run.key, self.twin_of[run.key], status=outcome.status,
               error=outcome.error, finished_at=now_iso(), duration_s=duration_s, metrics=metrics,
               measured={k: v for k, v in measured.items() if v}, server_log_tail=outcome.server_log,
               client_log_tail=outcome.client_log)

    def keep_earlier(self, run: Run, why_again: str) -> None:
        """A twin about to run again: why, on its attempt's row (each attempt is a row already)."""
        if run.key in self.twin_of:
            _write(run_records.twin_again, self.conn, run.key, self.twin_of[run.key], why_again)

    def breaker(self, label: str, runs: int, status: str, error: str, skipped: int) -> None:
        """Not the campaign's breaker: its runs are as they were (the engine prints it, the twins table has each)."""


def _open_campaign(conn: sqlite3.Connection, prepared: Prepared, link_backend: str, host_info: dict[str, Any],
                   impls_info: dict[str, Any]) -> int:
    design = prepared.design
    run_records.interrupt_left_over(conn)   # runs a campaign process that died left `running`
    with dbmod.transaction(conn):
        campaign_id = dbmod.find_campaign(conn, design.hash)
        if campaign_id is None:
            campaign_id = dbmod.insert_campaign(
                conn, name=design.name, design_path=str(design.path), design_text=design.text,
                design_hash=design.hash, fecbench_version=__version__, git_sha=git_sha(), created_at=now_iso(),
                host_json=host_info, impls_json=impls_info, plan_json=_manifest(prepared.plan),
                seed=design.seed, repetitions=design.repetitions, topology=str(design.topology_path),
                link_backend=link_backend, settings_json=design.settings())
        else:
            dbmod.update_campaign(conn, campaign_id, host_json=host_info, impls_json=impls_info,
                                  link_backend=link_backend, git_sha=git_sha(), settings_json=design.settings())
        dbmod.ensure_factor_columns(conn, prepared.factor_types)
        dbmod.insert_points(conn, campaign_id, ({"point": p, **v} for p, v in prepared.points.items()))
        _insert_pending(conn, campaign_id, prepared, prepared.runs)
    return campaign_id


def _insert_pending(conn: sqlite3.Connection, campaign_id: int, prepared: Prepared, runs: list[Run]) -> None:
    from fecbench.runners.experiment.applied import Applier

    applier = Applier(prepared)
    run_records.insert_pending_runs(conn, ({**run.row(campaign_id), "estimate_s": prepared.estimate(run),
                                            "applied_json": json.dumps(applier.applied(run), default=str)}
                                           for run in runs))


def _add_pending(conn: sqlite3.Connection, campaign_id: int, prepared: Prepared, runs: list[Run]) -> None:
    with dbmod.transaction(conn):
        _insert_pending(conn, campaign_id, prepared, runs)


def _write(function: Callable[..., T], *args: object, **kwargs: object) -> T:
    """A database write; failing to record stops the campaign with a clear error."""
    try:
        return function(*args, **kwargs)
    except sqlite3.Error as exc:
        full = any(word in str(exc).lower() for word in ("disk", "full", "i/o"))
        raise UserError(f"cannot write the results database ({exc}); the campaign stopped ("
                        + ("free some disk space, then " if full else "") + "run the same command again to resume)"
                        ) from None
