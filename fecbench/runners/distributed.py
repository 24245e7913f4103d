"""Campaigns on a Dask cluster: `fecbench run DESIGN.toml --dask tls://SCHEDULER:8786 | local:N`.

Who may talk to the cluster (TLS, the campaign's credentials, the address policy) is
`dask_security`'s business; this module assumes it was settled before the cluster is used.

The coordinator (this process) plans the campaign, owns the results database (single writer) and
hands runs to the workers one at a time. Each worker process is set up once per campaign: it checks
that it runs the same fecbench, design and implementation binaries as the coordinator (else the
campaign is refused: results would not be comparable), builds its own network (names carry its own
per-process prefix) and then executes runs with the same `Executor` and `run_one` as a local
campaign, returning each run's `Outcome`. The coordinator records outcomes as they arrive.

Runs are grouped by design point: a worker keeps taking runs of its current point while there are
any, so it reconfigures its links (and measures fidelity) rarely. Exactly one run is in flight per
worker, so the coordinator always knows which run a dying worker took with it (recorded
`interrupted`, retryable). Ctrl-C cancels what is outstanding, records in-flight runs as interrupted
and tears the workers' networks down (a teardown call, plus a worker plugin on worker close).

Dask is imported only in this module; fecbench works without the `cluster` extra.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench import __version__, cleanup
from fecbench import db as dbmod
from fecbench.errors import UserError
from fecbench.runners import dask_security
from fecbench.runners.campaign import (
    MAX_HARNESS_ERRORS,
    Executor,
    Outcome,
    Prepared,
    Summary,
    _counts_text,
    _db_write,
    _finish,
    check_free_space,
    impls_fingerprint,
    now_iso,
    open_campaign,
    prepare,
    progress_bar,
    read_statuses,
    run_one,
    select_runs,
    sigterm_as_interrupt,
)
from fecbench.runners.dask_security import CampaignSecurity, TlsFiles
from fecbench.runners.descriptor import REPO_ROOT
from fecbench.runners.runs import Run

INSTALL_HINT = "pip install 'fecbench[cluster]'"
CONNECT_TIMEOUT_S = 10
WORKER_WAIT_S = 60          # how long to wait for a first (or, after all died, a new) worker
POLL_S = 0.5                # how often the coordinator looks for dead and new workers


# --- the --dask value ---------------------------------------------------------------------------

def parse_target(text: str) -> tuple[str, Any]:
    """`local:N` -> ("local", N); `tcp://host:port` (or tls://) -> ("address", text). Bad values: UserError."""
    if text.startswith("local:"):
        count = text.removeprefix("local:")
        if not count.isdigit() or not 1 <= int(count) <= 64:
            raise UserError(f"--dask {text}: local:N needs a number of worker processes N from 1 to 64")
        return "local", int(count)
    if re.fullmatch(r"(tcp|tls)://[A-Za-z0-9_.\-\[\]:]+:\d{1,5}", text):
        return "address", text
    raise UserError(f"--dask {text!r}: expected local:N (N worker processes on this machine) or the "
                    "scheduler's address tls://HOST:PORT (e.g. tls://10.0.0.1:8786; see `fecbench dask certs`)")


def require_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UserError(f"--dask needs Dask's distributed scheduler, which is not installed: {INSTALL_HINT}") \
            from None
    return distributed


# --- what must be the same on every host ---------------------------------------------------------

def identity(prepared: Prepared, impls: dict[str, Any]) -> dict[str, Any]:
    """What makes results comparable: fecbench version and commit, design, topology, implementations."""
    from fecbench.cli import git_sha

    return {
        "fecbench": __version__, "git_sha": git_sha(), "design_hash": prepared.design.hash,
        "experiment_hash": prepared.experiment_hash,
        "impls": {label: {"version": info.get("version"), "descriptor": info.get("descriptor"),
                          "binaries": {k: (v or {}).get("sha256") for k, v in info.get("binaries", {}).items()}}
                  for label, info in impls.items()},
    }


def differences(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Human-readable differences between two identities (empty: comparable)."""
    out = []
    for key in ("fecbench", "git_sha", "design_hash", "experiment_hash"):
        if mine.get(key) != theirs.get(key):
            out.append(f"{key} {theirs.get(key)} (coordinator: {mine.get(key)})")
    for label, info in mine.get("impls", {}).items():
        other = theirs.get("impls", {}).get(label)
        if other is None:
            out.append(f"implementation {label!r} missing")
            continue
        for key in ("version", "descriptor"):
            if info[key] != other[key]:
                out.append(f"implementation {label!r}: {key} differs")
        for name, digest in info["binaries"].items():
            if other["binaries"].get(name) != digest:
                out.append(f"implementation {label!r}: binary {name} sha256 {other['binaries'].get(name)} "
                           f"(coordinator: {digest})")
    return out


class WorkerRefused(Exception):
    """A worker cannot take part in this campaign (not root, other fecbench, other binaries, …)."""


# --- worker side: one campaign network per worker process -----------------------------------------

@dataclass
class _WorkerCampaign:
    token: str
    executor: Executor
    net: Any
    info: dict[str, Any]
    runs: dict[str, Run]
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


_CURRENT: dict[str, _WorkerCampaign] = {}   # "campaign" -> this worker's campaign, if any


def _find_design(design_path: str, relative: str | None) -> Path:
    for candidate in (Path(design_path), REPO_ROOT / relative if relative else None):
        if candidate is not None and candidate.is_file():
            return candidate
    where = f" or {REPO_ROOT / relative}" if relative else ""
    raise WorkerRefused(f"design file {design_path}{where} not found (put it at the same path on every host)")


def worker_setup(token: str, design_path: str, relative: str | None, expected: dict[str, Any],
                 log_root: str, link_backend: str | None, keep_logs: bool, ca_pem: str | None) -> dict[str, Any]:
    """(A Dask task.) Check this host against the coordinator (software, and a certificate from the
    campaign's CA when the campaign is authenticated), build this worker's network once."""
    from fecbench.runners.hostinfo import fingerprint
    from fecbench.topologies import Network

    current = _CURRENT.get("campaign")
    if current is not None and current.token == token and not current.closed:
        return current.info
    worker_teardown()
    if sys.platform != "linux":
        raise WorkerRefused(f"the Dask worker runs on {sys.platform}: workers must be Linux hosts")
    if os.geteuid() != 0:
        raise WorkerRefused("the Dask worker does not run as root (start `dask worker` as root)")
    if ca_pem is not None:
        credentials = dask_security.worker_credentials()
        why = dask_security.check_worker_certificate(CampaignSecurity(security=None, ca_pem=ca_pem), credentials)
        if why or not credentials["encrypted"]:
            raise WorkerRefused(f"this worker may not take part: {why or 'it accepts unencrypted connections'}")
    prepared = prepare(_find_design(design_path, relative))
    impls = impls_fingerprint(prepared.design)
    problems = differences(expected, identity(prepared, impls))
    if problems:
        raise WorkerRefused("results would not be comparable: " + "; ".join(problems))
    first = prepared.runs[0].values
    net = Network(prepared.topology, first, backend=link_backend)
    net.start()
    try:
        executor = Executor(prepared, None, net, Path(log_root), keep_logs)  # type: ignore[arg-type]
        if prepared.design.verdict_log and prepared.design.loss.model != "none":
            executor.enable_verdict_logs()
        backend = str(net.backend)
        info = {"host": socket.gethostname(), "pid": os.getpid(), "prefix": net.base, "backend": backend,
                "fingerprint": fingerprint(backend)}
    except BaseException:
        net.stop()
        raise
    _CURRENT["campaign"] = _WorkerCampaign(token=token, executor=executor, net=net, info=info,
                                           runs={run.key: run for run in prepared.runs})
    return info


def worker_run(token: str, key: str) -> dict[str, Any]:
    """(A Dask task.) Execute one run on this worker's network; its Outcome and where it ran."""
    current = _CURRENT.get("campaign")
    if current is None or current.token != token:
        raise WorkerRefused("this worker is not set up for the campaign")
    with current.lock:
        if current.closed:
            raise WorkerRefused("this worker's network was torn down")
        started = time.monotonic()
        outcome, harness_error = run_one(current.executor, current.runs[key])
        return {"outcome": outcome, "harness_error": harness_error, "duration_s": time.monotonic() - started}


def worker_teardown(token: str | None = None, wait_s: float = 60) -> bool:
    """Stop this worker's run processes and network (of campaign `token`, or any). True if one was torn down."""
    current = _CURRENT.get("campaign")
    if current is None or (token is not None and current.token != token):
        return False
    current.closed = True
    # Stop the run in flight (if any) until it returns and releases the lock: it may start its next
    # process (the client after the server) just after a stop.
    deadline = time.monotonic() + wait_s
    locked = False
    while not locked and time.monotonic() < deadline:
        current.executor.stop_all()
        locked = current.lock.acquire(timeout=0.2)
    try:
        current.net.stop()
    finally:
        if locked:
            current.lock.release()
        _CURRENT.pop("campaign", None)
    return True


def _plugin_class() -> Any:
    from distributed import WorkerPlugin

    class TeardownOnClose(WorkerPlugin):
        """Tear this worker's network down when the worker closes (cluster shut down, worker restarted).
        Workers of a LocalCluster ignore Ctrl-C (it reaches the whole process group): the coordinator
        handles it and shuts them down cleanly."""

        def __init__(self, ignore_sigint: bool = False) -> None:
            self.ignore_sigint = ignore_sigint

        def setup(self, worker: Any) -> None:
            if self.ignore_sigint and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, signal.SIG_IGN)

        def teardown(self, worker: Any) -> None:
            worker_teardown(wait_s=10)

    return TeardownOnClose


# --- coordinator side -------------------------------------------------------------------------------

@dataclass
class _Worker:
    address: str
    host: str
    pid: int
    prefix: str
    backend: str
    point: int | None = None        # the design point its network is configured for


class Coordinator:
    """Hands runs to workers (grouped by point, one in flight per worker) and records their outcomes."""

    def __init__(self, client: Any, prepared: Prepared, db_path: Path, todo: list[Run], *, link_backend: str | None,
                 keep_logs: bool, console: Any, summary: Summary, target: str, security: CampaignSecurity) -> None:
        self.client, self.prepared, self.db_path, self.console = client, prepared, db_path, console
        self.summary, self.target, self.security = summary, target, security
        self.link_backend, self.keep_logs = link_backend, keep_logs
        self.token = uuid.uuid4().hex
        self.impls = impls_fingerprint(prepared.design)
        self.identity = identity(prepared, self.impls)
        self.groups: dict[int, deque[Run]] = {}
        for run in todo:
            self.groups.setdefault(run.point, deque()).append(run)
        self.ready: dict[str, _Worker] = {}
        self.setting_up: dict[Any, str] = {}          # future -> worker address
        self.inflight: dict[Any, tuple[Run, _Worker, float]] = {}
        self.seen: set[str] = set()                   # addresses set up (or refused) already
        self.hosts: dict[str, dict[str, Any]] = {}    # hostname -> fingerprint + its workers
        self.dead_local_pids: set[int] = set()
        self.conn: Any = None
        self.campaign_id: int | None = None
        self.harness_errors = 0
        self.log_root = db_path.resolve().parent / f"{db_path.stem}.logs"

    # --- workers ---
    def _addresses(self) -> set[str]:
        return set(self.client.scheduler_info()["workers"])

    def _setup(self, address: str) -> None:
        design = self.prepared.design.path.resolve()
        relative = str(design.relative_to(REPO_ROOT)) if design.is_relative_to(REPO_ROOT) else None
        future = self.client.submit(worker_setup, self.token, str(design), relative, self.identity,
                                    str(self.log_root), self.link_backend, self.keep_logs, self.security.ca_pem,
                                    workers=[address],
                                    allow_other_workers=False, pure=False, key=f"fecbench-setup-{uuid.uuid4().hex}")
        self.setting_up[future] = address
        self.seen.add(address)

    def start_workers(self) -> None:
        """Set up every worker present; refuse the campaign if any of them is not comparable."""
        deadline = time.monotonic() + WORKER_WAIT_S
        addresses = self._addresses()
        while not addresses and time.monotonic() < deadline:
            time.sleep(POLL_S)
            addresses = self._addresses()
        if not addresses:
            raise UserError(f"--dask {self.target}: no worker joined the scheduler within {WORKER_WAIT_S} s")
        for address in sorted(addresses):
            self._setup(address)
        from distributed import wait

        with contextlib.suppress(TimeoutError):  # a worker still busy setting up joins later
            wait(list(self.setting_up), timeout=WORKER_WAIT_S)
        for future, address in list(self.setting_up.items()):
            if not future.done():
                continue
            del self.setting_up[future]
            try:
                self._ready(address, future.result())
            except UserError:
                raise
            except Exception as exc:
                raise UserError(f"--dask {self.target}: worker {address} refused: {exc}") from None
        if not self.ready:
            raise UserError(f"--dask {self.target}: no worker finished setting up within {WORKER_WAIT_S} s")

    def _ready(self, address: str, info: dict[str, Any]) -> None:
        clash = [w for w in self.ready.values() if w.host == info["host"] and w.prefix == info["prefix"]]
        if clash:  # two workers of one host with the same names would break each other's networks
            raise UserError(f"workers {clash[0].address} and {address} on {info['host']} use the same name "
                            f"prefix {info['prefix']}")
        self.ready[address] = _Worker(address=address, host=info["host"], pid=info["pid"], prefix=info["prefix"],
                                      backend=info["backend"])
        entry = self.hosts.setdefault(info["host"], {**info["fingerprint"], "workers": []})
        entry["workers"].append({"pid": info["pid"], "prefix": info["prefix"], "address": address})

    def host_info(self) -> dict[str, Any]:
        """The campaign's host_json: the coordinator's fingerprint, plus every worker host's under `hosts`."""
        from fecbench.runners.hostinfo import fingerprint

        backends = ",".join(sorted({w.backend for w in self.ready.values()}))
        return {**fingerprint(backends), "coordinator": socket.gethostname(), "dask": self.target,
                "dask_security": self.security.record, "hosts": self.hosts}

    def _refresh_workers(self) -> None:
        """Notice workers that died (their run: interrupted) and workers that joined (set them up)."""
        present = self._addresses()
        for future, (run, worker, started) in list(self.inflight.items()):
            if worker.address not in present:
                del self.inflight[future]
                future.cancel()
                self._record(run, Outcome(status="interrupted", error=f"worker {worker.address} on {worker.host} "
                                          "died during the run"), started)
        for address in [a for a in self.ready if a not in present]:
            self._worker_gone(self.ready.pop(address))
        for future, address in list(self.setting_up.items()):
            if address not in present:
                del self.setting_up[future]
                future.cancel()
                self.seen.discard(address)
        for address in sorted(present - self.seen):
            self._setup(address)

    def _worker_gone(self, worker: _Worker) -> None:
        self.console.print(f"[yellow]worker {worker.address} ({worker.host}, pid {worker.pid}) left the cluster[/]")
        self.seen.discard(worker.address)  # a worker restarted on a fixed port comes back: set it up again
        if worker.host == socket.gethostname():
            self.dead_local_pids.add(worker.pid)
        self.clean_dead_local_workers()

    def clean_dead_local_workers(self) -> None:
        """Remove what a dead worker of this host left behind (its own state file only)."""
        for pid in list(self.dead_local_pids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, 0)
                continue  # still alive (being shut down): try again later
            path = cleanup.state_file(pid)
            if path.exists():
                with contextlib.suppress(OSError, json.JSONDecodeError):
                    cleanup.remove_entries(json.loads(path.read_text()))
                path.unlink(missing_ok=True)
            self.dead_local_pids.discard(pid)

    # --- runs ---
    def _next_run(self, worker: _Worker) -> Run | None:
        """The worker's current point if it has runs left; else the point no one works on with the most runs
        left; else help with the biggest point."""
        if worker.point in self.groups:
            group = self.groups[worker.point]
        else:
            busy = {w.point for w in self.ready.values() if w is not worker}
            free = [p for p in self.groups if p not in busy] or list(self.groups)
            if not free:
                return None
            worker.point = max(free, key=lambda p: len(self.groups[p]))
            group = self.groups[worker.point]
        run = group.popleft()
        if not group:
            del self.groups[worker.point]
        return run

    def _dispatch(self) -> None:
        busy = {worker.address for _, worker, _ in self.inflight.values()}
        for worker in list(self.ready.values()):
            if worker.address in busy or not self.groups:
                continue
            run = self._next_run(worker)
            if run is None:
                return
            _db_write(dbmod.start_run, self.conn, run.key, now_iso(), worker.backend, worker.host)
            future = self.client.submit(worker_run, self.token, run.key, workers=[worker.address],
                                        allow_other_workers=False, pure=False,
                                        key=f"fecbench-run-{run.key[:16]}-{uuid.uuid4().hex[:8]}")
            self.inflight[future] = (run, worker, time.monotonic())

    def _collect(self, future: Any) -> None:
        if future in self.setting_up:
            address = self.setting_up.pop(future)
            try:
                self._ready(address, future.result())
                if self.campaign_id is not None:
                    _db_write(dbmod.update_campaign, self.conn, self.campaign_id, host_json=self.host_info())
            except Exception as exc:  # a late worker that is not comparable is left out, not fatal
                self.console.print(f"[yellow]worker {address} left out: {exc}[/]")
            return
        if future not in self.inflight:
            return
        run, worker, started = self.inflight.pop(future)
        try:
            result = future.result()
        except WorkerRefused as exc:  # the worker lost its setup (restarted): the run never started
            self._record(run, Outcome(status="interrupted", error=f"worker {worker.address}: {exc}"), started)
            if self.ready.pop(worker.address, None) is not None:
                self._setup(worker.address)
            return
        except Exception as exc:
            if type(exc).__name__ == "KilledWorker" or worker.address not in self._addresses():
                self._record(run, Outcome(status="interrupted", error=f"worker {worker.address} on {worker.host} "
                                          "died during the run"), started)
                if worker.address in self.ready:
                    self._worker_gone(self.ready.pop(worker.address))
                return
            result = {"outcome": Outcome(status="failed", error=f"harness: {type(exc).__name__}: {exc}"),
                      "harness_error": True, "duration_s": None}
        self.harness_errors = self.harness_errors + 1 if result["harness_error"] else 0
        self._record(run, result["outcome"], started, result["duration_s"])
        if self.harness_errors >= MAX_HARNESS_ERRORS:
            self.summary.aborted = f"{self.harness_errors} harness errors in a row, last: {result['outcome'].error}"

    def _record(self, run: Run, outcome: Outcome, started: float, duration_s: float | None = None) -> None:
        _finish(self.conn, run, outcome, started, duration_s)
        self.summary.counts[outcome.status] += 1
        if outcome.status == "interrupted":
            self.summary.interrupted = True
        self.progress.update(self.task, advance=1, counts=_counts_text(self.summary.counts))

    def execute(self) -> None:
        from distributed import wait

        todo = [run for group in self.groups.values() for run in group]
        estimate = sum(self.prepared.estimate(run) for run in todo)
        self.progress = progress_bar(self.console)
        no_worker_since: float | None = None
        with self.progress:
            self.console.print(f"{len(todo)} run(s) to do on {len(self.ready)} worker(s), estimated "
                               f"{estimate / 60:.1f} min on one")
            self.task = self.progress.add_task(self.prepared.design.name, total=len(todo), counts="")
            last_poll = time.monotonic()
            while (self.groups or self.inflight) and not self.summary.aborted:
                self._dispatch()
                self.progress.update(self.task, description=f"{self.prepared.design.name} [{len(self.ready)} "
                                     f"worker(s), {len(self.inflight)} running]")
                pending = list(self.inflight) + list(self.setting_up)
                if pending:
                    try:
                        done, _ = wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED")
                    except TimeoutError:  # nothing finished within POLL_S
                        done = set()
                    for future in done:
                        self._collect(future)
                else:
                    time.sleep(POLL_S)
                if time.monotonic() - last_poll >= POLL_S:
                    self._refresh_workers()
                    last_poll = time.monotonic()
                if self.ready or self.setting_up:
                    no_worker_since = None
                elif no_worker_since is None:
                    no_worker_since = time.monotonic()
                elif time.monotonic() - no_worker_since > WORKER_WAIT_S:
                    self.summary.aborted = f"no Dask worker left for {WORKER_WAIT_S} s"

    def interrupt(self, error: str = "interrupted (Ctrl-C or SIGTERM)") -> None:
        """Ctrl-C (or the campaign stopped): cancel what is outstanding, record in-flight runs interrupted."""
        futures = list(self.inflight) + list(self.setting_up)
        with contextlib.suppress(Exception):
            self.client.cancel(futures, force=True)
        for _future, (run, _worker, started) in list(self.inflight.items()):
            with contextlib.suppress(UserError):
                self._record(run, Outcome(status="interrupted", error=error), started)
        self.inflight.clear()

    def teardown_workers(self) -> None:
        """Stop every worker's run processes and network (workers of a shared cluster stay up, idle)."""
        with contextlib.suppress(Exception):
            self.client.run(worker_teardown, self.token)


@contextlib.contextmanager
def _client(kind: str, value: Any, security: CampaignSecurity, dashboard: bool, console: Any) -> Any:
    """A Dask client on the given scheduler, or on a LocalCluster of `value` processes that lives as long.
    The local cluster listens on 127.0.0.1 only and speaks mutual TLS with the campaign's own credentials."""
    distributed = require_distributed()
    import dask

    silence = logging.CRITICAL  # the coordinator reports dead and refused workers itself
    for name in ("distributed", "distributed.client", "distributed.comm", "distributed.core"):
        logging.getLogger(name).setLevel(silence)
    if kind == "local":
        # A dying worker's run must fail at once (recorded interrupted), never be retried elsewhere.
        settings: dict[str, Any] = {"distributed.scheduler.allowed-failures": 0}
        if not dashboard:  # Dask's nodes always listen for HTTP: without a dashboard they serve nothing there
            settings.update({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []})
        with dask.config.set(settings):
            cluster = distributed.LocalCluster(n_workers=value, threads_per_worker=1, processes=True, host="127.0.0.1",
                                               security=security.security,
                                               dashboard_address="127.0.0.1:0" if dashboard else None,
                                               silence_logs=silence)
        try:
            if dashboard:
                console.print(f"Dask dashboard (this machine only): {cluster.dashboard_link}")
            with distributed.Client(cluster, security=security.security) as client:
                yield client
        finally:
            cluster.close()
        return
    dask_security.probe(value, security)
    try:
        client = distributed.Client(value, timeout=CONNECT_TIMEOUT_S, security=security.security)
    except Exception as exc:  # anything Dask raises while connecting is about that endpoint
        raise UserError(f"--dask {value}: cannot connect to the Dask scheduler ({type(exc).__name__}: {exc}); start "
                        "it with `dask scheduler` and workers with `dask worker` (as root) on each host") from None
    with client:
        yield client


def campaign_security(target: str, insecure: bool = False, tls: TlsFiles | None = None) -> CampaignSecurity:
    """Check the --dask value against the security policy and make or load the campaign's credentials."""
    kind, value = parse_target(target)
    tls = tls or TlsFiles()
    if kind == "local":
        if tls.given():
            raise UserError(f"--dask {target}: --tls-* options are for a tls:// cluster; local:N makes its own "
                            "credentials for the campaign")
        require_distributed()
        return dask_security.for_local_cluster()
    dask_security.check_policy(value, insecure, tls)
    require_distributed()
    return dask_security.for_address(value, insecure, tls)


def run_distributed(prepared: Prepared, db_path: Path, target: str, *, retry: set[str], link_backend: str | None,
                    keep_logs: bool = False, console: Any = None, security: CampaignSecurity | None = None,
                    dashboard: bool = False) -> Summary:
    """Execute the campaign's selected runs on the workers of a Dask cluster; record each here."""
    from rich.console import Console

    kind, value = parse_target(target)
    security = security or campaign_security(target)
    console = console or Console()
    todo = select_runs(prepared, read_statuses(db_path), retry)
    summary = Summary(total=len(prepared.runs), selected=len(todo), counts=Counter())
    if not todo:
        return summary
    check_free_space(db_path.resolve().parent)
    with sigterm_as_interrupt(), _client(kind, value, security, dashboard, console) as client:
        coordinator = Coordinator(client, prepared, db_path, todo, link_backend=link_backend, keep_logs=keep_logs,
                                  console=console, summary=summary, target=target, security=security)
        client.register_plugin(_plugin_class()(ignore_sigint=kind == "local"), name="fecbench-teardown")
        try:
            # Workers first: if one is not comparable or cannot build its network, no database is touched.
            coordinator.start_workers()
            coordinator.conn = dbmod.connect(db_path)
            host_info = coordinator.host_info()
            coordinator.campaign_id = open_campaign(prepared, coordinator.conn, host_info["link_backend"], host_info,
                                                    coordinator.impls)
            try:
                coordinator.execute()
            except KeyboardInterrupt:
                coordinator.interrupt()
                raise
            if summary.aborted:
                coordinator.interrupt(f"campaign stopped: {summary.aborted}")
        finally:
            coordinator.teardown_workers()
            if coordinator.conn is not None:
                coordinator.conn.close()
    coordinator.clean_dead_local_workers()
    return summary
