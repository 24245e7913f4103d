"""Campaigns on a Dask cluster: `fecbench run DESIGN.toml --dask tls://SCHEDULER:8786 | local:N`.

The DaskExecutor is the coordinator's side: it hands runs to the workers one at a time and returns
their outcomes to the campaign engine, which alone records them (the coordinator is the single
writer of the results database). Runs are grouped by design point: a worker keeps taking runs of its
current point while there are any, so it reconfigures its links (and measures fidelity) rarely.
Exactly one run is in flight per worker, so the coordinator always knows which run a dying worker took
with it (recorded `interrupted`, retryable). Leaving the executor tears every worker's network down.

The tasks the workers run are in `dask_worker`; who may talk to the cluster (TLS, the campaign's
credentials, the address policy) is `dask_security`'s business. Dask is imported only here and in
those modules; fecbench works without the `cluster` extra.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench import cleanup
from fecbench.errors import UserError
from fecbench.paths import REPO_ROOT
from fecbench.runners.executors import dask_security
from fecbench.runners.executors.dask_security import CampaignSecurity, TlsFiles
from fecbench.runners.executors.dask_worker import WorkerRefused, identity, worker_run, worker_setup, worker_teardown
from fecbench.runners.executors.engine import Finished, RunQueue, Started
from fecbench.runners.executors.serial import log_root_for
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.recorder import impls_fingerprint
from fecbench.status import Status

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

    from distributed import Client, Future, Worker, WorkerPlugin
    from rich.console import Console

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


def require_distributed() -> ModuleType:
    try:
        import distributed
    except ImportError:
        raise UserError(f"--dask needs Dask's distributed scheduler, which is not installed: {INSTALL_HINT}") \
            from None
    return distributed


# --- coordinator side -------------------------------------------------------------------------------

@dataclass
class _Worker:
    address: str
    host: str
    pid: int
    prefix: str
    backend: str
    point: int | None = None        # the design point its network is configured for


def _interrupted(run: Run, why: str) -> Finished:
    return Finished(run, Outcome(status=Status.INTERRUPTED, error=why))


class DaskExecutor:
    """Hands runs to Dask workers (grouped by point, one in flight per worker); returns their outcomes."""

    def __init__(self, prepared: Prepared, db_path: Path, target: str, *, link_backend: str | None,
                 keep_logs: bool = False, console: Console | None = None, security: CampaignSecurity | None = None,
                 dashboard: bool = False) -> None:
        from rich.console import Console

        self.prepared, self.target = prepared, target
        self.kind, self.value = parse_target(target)
        self.security = security or campaign_security(target)
        self.link_backend, self.keep_logs, self.dashboard = link_backend, keep_logs, dashboard
        self.console = console or Console()
        self.name = f"Dask {target}"
        self.token = uuid.uuid4().hex
        self.identity = identity(prepared, impls_fingerprint(prepared.design))
        self.log_root = log_root_for(db_path)
        self.ready: dict[str, _Worker] = {}
        self.setting_up: dict[Any, str] = {}          # future -> worker address
        self.inflight: dict[Any, tuple[Run, _Worker, float]] = {}
        self.seen: set[str] = set()                   # addresses set up (or refused) already
        self.hosts: dict[str, dict[str, Any]] = {}    # hostname -> fingerprint + its workers
        self.dead_local_pids: set[int] = set()
        self.hosts_changed = False
        self.most_workers = 0                         # workers ready at once, at most (planning the next batch)
        self.no_worker_since: float | None = None
        self.last_refresh = time.monotonic()
        self._stack = contextlib.ExitStack()
        self.client: Client | None = None

    def __enter__(self) -> DaskExecutor:
        self.client = self._stack.enter_context(_client(self.kind, self.value, self.security, self.dashboard,
                                                        self.console))
        self.client.register_plugin(_plugin_class()(ignore_sigint=self.kind == "local"), name="fecbench-teardown")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            with contextlib.suppress(Exception):  # stop every worker's run processes and network
                self.client.run(worker_teardown, self.token)
        finally:
            self._stack.close()
            self.clean_dead_local_workers()

    # --- workers ---
    def _addresses(self) -> set[str]:
        """The workers the scheduler has now. Asked directly: `Client.scheduler_info()` returns the client's
        cached identity, which its periodic refresh (every 2 s, without workers) can overwrite between the
        fetch and the read, and every live worker would seem to have died with its run."""
        return set(self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"])

    def _setup(self, address: str) -> None:
        design = self.prepared.design.path.resolve()
        relative = str(design.relative_to(REPO_ROOT)) if design.is_relative_to(REPO_ROOT) else None
        future = self.client.submit(worker_setup, self.token, str(design), relative, self.identity,
                                    str(self.log_root), self.link_backend, self.keep_logs, self.security.ca_pem,
                                    workers=[address],
                                    allow_other_workers=False, pure=False, key=f"fecbench-setup-{uuid.uuid4().hex}")
        self.setting_up[future] = address
        self.seen.add(address)

    def start(self, todo: list[Run]) -> None:
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
        self.most_workers = max(self.most_workers, len(self.ready))
        entry = self.hosts.setdefault(info["host"], {**info["fingerprint"], "workers": []})
        entry["workers"].append({"pid": info["pid"], "prefix": info["prefix"], "address": address})

    def host_info(self) -> dict[str, Any]:
        """The campaign's host_json: the coordinator's fingerprint, plus every worker host's under `hosts`."""
        from fecbench.runners.executors.hostinfo import fingerprint

        backends = ",".join(sorted({w.backend for w in self.ready.values()}))
        return {**fingerprint(backends), "coordinator": socket.gethostname(), "dask": self.target,
                "dask_security": self.security.record, "hosts": self.hosts}

    def backend(self) -> str:
        return self.host_info()["link_backend"]

    def host_info_changed(self) -> bool:
        changed, self.hosts_changed = self.hosts_changed, False
        return changed

    def busy(self) -> bool:
        return bool(self.inflight)

    def _refresh_workers(self) -> list[Finished]:
        """Notice workers that died (their run: interrupted) and workers that joined (set them up)."""
        lost = []
        present = self._addresses()
        for future, (run, worker, _started) in list(self.inflight.items()):
            if worker.address not in present:
                del self.inflight[future]
                future.cancel()
                lost.append(_interrupted(run, f"worker {worker.address} on {worker.host} died during the run"))
        for address in [a for a in self.ready if a not in present]:
            self._worker_gone(self.ready.pop(address))
        for future, address in list(self.setting_up.items()):
            if address not in present:
                del self.setting_up[future]
                future.cancel()
                self.seen.discard(address)
        for address in sorted(present - self.seen):
            self._setup(address)
        return lost

    def _worker_gone(self, worker: _Worker) -> None:
        self.console.print(f"[yellow]worker {worker.address} ({worker.host}, pid {worker.pid}) left the cluster[/]")
        self.seen.discard(worker.address)  # a worker restarted on a fixed port comes back: set it up again
        if worker.host == socket.gethostname():
            self.dead_local_pids.add(worker.pid)
        self.clean_dead_local_workers()

    def clean_dead_local_workers(self) -> None:
        """Remove what a dead worker of this host left behind: the processes carrying its marker and
        what its own state file names."""
        for pid in list(self.dead_local_pids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, 0)
                continue  # still alive (being shut down): try again later
            cleanup.remove_owner(pid)
            self.dead_local_pids.discard(pid)

    # --- runs ---
    def dispatch(self, queue: RunQueue) -> list[Started]:
        started = []
        busy = {worker.address for _, worker, _ in self.inflight.values()}
        for worker in list(self.ready.values()):
            if worker.address in busy or not queue:
                continue
            run = queue.pop_near(worker.point, {w.point for w in self.ready.values() if w is not worker})
            if run is None:
                break
            future = self.client.submit(worker_run, self.token, run.key, workers=[worker.address],
                                        allow_other_workers=False, pure=False,
                                        key=f"fecbench-run-{run.key[:16]}-{uuid.uuid4().hex[:8]}")
            worker.point = run.point
            self.inflight[future] = (run, worker, time.monotonic())
            started.append(Started(run, worker.host, worker.backend))
        return started

    def collect(self, timeout: float) -> list[Finished]:
        from distributed import wait

        done: list[Finished] = []
        pending = list(self.inflight) + list(self.setting_up)
        if pending:
            try:
                finished, _ = wait(pending, timeout=timeout, return_when="FIRST_COMPLETED")
            except TimeoutError:  # nothing finished within the timeout
                finished = set()
            for future in finished:
                done += self._collect(future)
        else:
            time.sleep(timeout)
        if time.monotonic() - self.last_refresh >= POLL_S:
            done += self._refresh_workers()
            self.last_refresh = time.monotonic()
        return done

    def _collect(self, future: Future) -> list[Finished]:
        if future in self.setting_up:
            address = self.setting_up.pop(future)
            try:
                self._ready(address, future.result())
                self.hosts_changed = True
            except Exception as exc:  # a late worker that is not comparable is left out, not fatal
                self.console.print(f"[yellow]worker {address} left out: {exc}[/]")
            return []
        if future not in self.inflight:
            return []
        run, worker, _started = self.inflight.pop(future)
        try:
            result = future.result()
        except WorkerRefused as exc:  # the worker lost its setup (restarted): the run never started
            if self.ready.pop(worker.address, None) is not None:
                self._setup(worker.address)
            return [_interrupted(run, f"worker {worker.address}: {exc}")]
        except Exception as exc:
            if type(exc).__name__ == "KilledWorker" or worker.address not in self._addresses():
                if worker.address in self.ready:
                    self._worker_gone(self.ready.pop(worker.address))
                return [_interrupted(run, f"worker {worker.address} on {worker.host} died during the run")]
            return [Finished(run, Outcome(status=Status.FAILED, error=f"harness: {type(exc).__name__}: {exc}"),
                             harness_error=True)]
        return [Finished(run, result["outcome"], result["harness_error"], result["duration_s"])]

    def cancel(self, reason: str) -> list[Finished]:
        """Cancel what is outstanding; the runs in flight, interrupted."""
        futures = list(self.inflight) + list(self.setting_up)
        with contextlib.suppress(Exception):
            self.client.cancel(futures, force=True)
        lost = [_interrupted(run, reason) for run, _worker, _started in self.inflight.values()]
        self.inflight.clear()
        return lost

    def abort_reason(self) -> str | None:
        if self.ready or self.setting_up:
            self.no_worker_since = None
        elif self.no_worker_since is None:
            self.no_worker_since = time.monotonic()
        elif time.monotonic() - self.no_worker_since > WORKER_WAIT_S:
            return f"no Dask worker left for {WORKER_WAIT_S} s"
        return None


def _plugin_class() -> type[WorkerPlugin]:
    from distributed import WorkerPlugin

    class TeardownOnClose(WorkerPlugin):
        """Tear this worker's network down when the worker closes (cluster shut down, worker restarted).
        Workers of a LocalCluster ignore Ctrl-C (it reaches the whole process group): the coordinator
        handles it and shuts them down cleanly."""

        def __init__(self, ignore_sigint: bool = False) -> None:
            self.ignore_sigint = ignore_sigint

        def setup(self, worker: Worker) -> None:
            if self.ignore_sigint and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, signal.SIG_IGN)

        def teardown(self, worker: Worker) -> None:
            worker_teardown(wait_s=10)

    return TeardownOnClose


@contextlib.contextmanager
def _client(kind: str, value: int | str, security: CampaignSecurity, dashboard: bool,
            console: Console) -> Iterator[Client]:
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


def dask_options(dask: str | None, insecure: bool, dashboard: bool, tls: TlsFiles,
                 console: Console) -> CampaignSecurity | None:
    """The --dask options of a command, checked together: the campaign's credentials (None without --dask);
    an unauthenticated cluster is allowed with --insecure only, and said."""
    if dask is None:
        if insecure or dashboard or tls.given():
            raise UserError("--insecure, --dashboard and --tls-* go with --dask")
        return None
    security = campaign_security(dask, insecure, tls)
    if dashboard and not dask.startswith("local:"):
        raise UserError("--dashboard is for --dask local:N (a cluster's own scheduler serves its dashboard)")
    if not security.authenticated:
        console.print(f"[yellow]warning: --dask {dask} is unauthenticated: anyone who can reach it can run code "
                      "as root on its workers; the campaign records this[/]")
    return security
