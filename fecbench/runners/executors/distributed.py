"""Campaigns on a Dask cluster: `fecbench run DESIGN.toml --dask tls://SCHEDULER:8786 | local:N`.

The DaskExecutor is the coordinator's side: it hands runs to the workers one at a time and returns
their outcomes to the campaign engine, which alone records them (the coordinator is the single
writer of the results database). Runs are grouped by design point: a worker keeps taking runs of its
current point while there are any, so it reconfigures its links (and measures fidelity) rarely.
Exactly one run is in flight per worker, so the coordinator always knows which run a dying worker took
with it: that run is recorded `interrupted`, kept aside (earlier_outcomes) and run once more on another
worker within the same campaign, up to `LOST_RERUNS` times (a host lost mid-campaign can take a second worker's
connection with it when it joins again, and the run lost first may be that worker's); lost once more, it stays
`interrupted` (the next `fecbench run` does it). Leaving the executor tears every worker's network down.

The tasks the workers run are in `dask_worker`; connecting to a cluster (or making a local one) is
`dask_client`'s; who may talk to the cluster (TLS, the campaign's credentials, the address policy) is
`dask_security`'s business. Dask is imported only inside functions of those modules and this one;
fecbench works without the `cluster` extra.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.host import cleanup
from fecbench.host.paths import REPO_ROOT
from fecbench.inputs.errors import UserError
from fecbench.records.status import Status
from fecbench.runners.executors import dask_security
from fecbench.runners.executors.dask_client import connect, require_distributed, teardown_plugin
from fecbench.runners.executors.dask_security import CampaignSecurity, TlsFiles
from fecbench.runners.executors.dask_worker import WorkerRefused, identity, worker_run, worker_setup, worker_teardown
from fecbench.runners.executors.engine import Finished, Started
from fecbench.runners.executors.progress import Reporter, RichReporter
from fecbench.runners.executors.selection import RunQueue
from fecbench.runners.executors.serial import log_root_for
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.recorder import impls_fingerprint

if TYPE_CHECKING:
    from distributed import Client, Future

WORKER_WAIT_S = 60          # how long to wait for a first (or, after all died, a new) worker
POLL_S = 0.5                # how often the coordinator looks for dead and new workers
READ_S = 5.0                # a finished task's result (a few kB) is read well within this unless its worker left
LOST_RERUNS = 2             # times a run lost with its worker runs again (a run that kills workers stops there)


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


class WorkerLeft(Exception):
    """A task finished, but its worker left before the coordinator read the result."""


def read_result(future: Future, worker_present: Callable[[], bool]) -> Any:
    """The result of a task that finished. Its worker may leave before the result is read (a host lost in
    the middle of a campaign): Dask then waits for the task to be computed again, which never happens, as
    every task is pinned to its worker (allow_other_workers=False), and an unbounded `result()` waited for
    ever (issue 52). Read in slices; between them, is the worker still there?"""
    while True:
        try:
            return future.result(timeout=READ_S)
        except TimeoutError:
            if not worker_present():
                raise WorkerLeft from None


def _median_ms(values: list[float]) -> float | None:
    return round(sorted(values)[len(values) // 2] * 1000, 1) if values else None


class DaskExecutor:
    """Hands runs to Dask workers (grouped by point, one in flight per worker); returns their outcomes."""

    def __init__(self, prepared: Prepared, db_path: Path, target: str, *, link_backend: str | None,
                 keep_logs: bool = False, reporter: Reporter | None = None, security: CampaignSecurity | None = None,
                 dashboard: bool = False) -> None:
        self.prepared, self.target = prepared, target
        self.kind, self.value = parse_target(target)
        self.security = security or campaign_security(target)
        self.link_backend, self.keep_logs, self.dashboard = link_backend, keep_logs, dashboard
        self.reporter = reporter or RichReporter()
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
        self.redo: deque[Run] = deque()               # runs lost with a worker, to run once more here
        self.lost: dict[str, int] = {}                # key -> times the run was lost with its worker
        # Per run, the coordinator's round trip (submitted to result read) less the run's time on its worker:
        # dispatch, TLS, (de)serialising the outcome. What one coordinator adds to every run (host_json).
        self.overhead_s: list[float] = []
        self.setup_s: list[float] = []                # per worker: submitted to set up (checks, network)
        self.setup_sent: dict[Any, float] = {}
        self._stack = contextlib.ExitStack()
        self.client: Client | None = None

    def __enter__(self) -> DaskExecutor:
        self.client = self._stack.enter_context(connect(self.kind, self.value, self.security, self.dashboard,
                                                        self.reporter))
        self.client.register_plugin(teardown_plugin(ignore_sigint=self.kind == "local"), name="fecbench-teardown")
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
                                    self.prepared.design.text, workers=[address],
                                    allow_other_workers=False, pure=False, key=f"fecbench-setup-{uuid.uuid4().hex}")
        self.setting_up[future] = address
        self.setup_sent[future] = time.monotonic()
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
                self._ready(address, self._read(future, address))
                self._setup_took(future)
            except UserError:
                raise
            except WorkerLeft:   # set up, then gone: it takes part if it comes back
                self._setup_void(future, address)
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

    def _setup_void(self, future: Future, address: str) -> None:
        """A set-up whose worker left: forgotten, so that the worker is set up again if it comes back."""
        self.setup_sent.pop(future, None)
        self.seen.discard(address)

    def _read(self, future: Future, address: str) -> Any:
        """A finished task's result, or WorkerLeft when its worker `address` left before it was read."""
        return read_result(future, lambda: address in self._addresses())

    def _setup_took(self, future: Future) -> None:
        sent = self.setup_sent.pop(future, None)
        if sent is not None:
            self.setup_s.append(time.monotonic() - sent)

    def host_info(self) -> dict[str, Any]:
        """The campaign's host_json: the coordinator's fingerprint, plus every worker host's under `hosts`, and
        what the coordinator measured (`dask_costs`)."""
        from fecbench.runners.executors.hostinfo import fingerprint

        backends = ",".join(sorted({w.backend for w in self.ready.values()}))
        return {**fingerprint(backends), "coordinator": socket.gethostname(), "dask": self.target,
                "dask_security": self.security.record, "hosts": self.hosts, "dask_costs": self.costs()}

    def costs(self) -> dict[str, Any]:
        """What the cluster cost per run and per worker, as measured by the coordinator (medians)."""
        return {"runs": len(self.overhead_s), "overhead_ms_median": _median_ms(self.overhead_s),
                "overhead_ms_max": round(max(self.overhead_s) * 1000, 1) if self.overhead_s else None,
                "workers_set_up": len(self.setup_s), "setup_s_median": (_median_ms(self.setup_s) or 0) / 1000,
                "lost_runs_run_again": len(self.lost)}

    def backend(self) -> str:
        return self.host_info()["link_backend"]

    def host_info_changed(self) -> bool:
        changed, self.hosts_changed = self.hosts_changed, False
        return changed

    def busy(self) -> bool:
        return bool(self.inflight or self.redo)

    def _lost(self, run: Run, why: str) -> Finished:
        """A run lost with its worker: run once more on another worker of this campaign (up to `LOST_RERUNS` times),
        then left interrupted."""
        if self.lost.get(run.key, 0) >= LOST_RERUNS:
            return _interrupted(run, why)
        self.lost[run.key] = self.lost.get(run.key, 0) + 1
        self.redo.append(run)
        self.hosts_changed = True   # dask_costs counts it
        return Finished(run, Outcome(status=Status.INTERRUPTED, error=why),
                        again=f"interrupted: {why}; run once more on another worker of the same campaign")

    def _refresh_workers(self) -> list[Finished]:
        """Notice workers that died (their run: interrupted) and workers that joined (set them up)."""
        lost = []
        present = self._addresses()
        for future, (run, worker, _started) in list(self.inflight.items()):
            if worker.address not in present:
                del self.inflight[future]
                future.cancel()
                lost.append(self._lost(run, f"worker {worker.address} on {worker.host} died during the run"))
        for address in [a for a in self.ready if a not in present]:
            self._worker_gone(self.ready.pop(address))
        for future, address in list(self.setting_up.items()):
            if address not in present:
                del self.setting_up[future]
                future.cancel()
                self._setup_void(future, address)
        for address in sorted(present - self.seen):
            self._setup(address)
        return lost

    def _worker_gone(self, worker: _Worker) -> None:
        self.reporter.say(f"[yellow]worker {worker.address} ({worker.host}, pid {worker.pid}) left the cluster[/]")
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
            if worker.address in busy or not (queue or self.redo):
                continue
            if self.redo:   # a run lost with another worker goes first
                run = self.redo.popleft()
            else:
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
            except Exception as exc:
                # The scheduler cancelled some (their worker gone: seen when a host was killed, 2 runs and 2 set-ups).
                if type(exc).__name__ != "FuturesCancelledError":
                    raise
                finished = {future for future in pending if future.cancelled()}
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
            if future.cancelled():   # its worker left: set it up again if it comes back
                self._setup_void(future, address)
                return []
            try:
                self._ready(address, self._read(future, address))
                self._setup_took(future)
                self.hosts_changed = True
            except WorkerLeft:
                self._setup_void(future, address)
            except Exception as exc:  # a late worker that is not comparable is left out, not fatal
                self.reporter.say(f"[yellow]worker {address} left out: {exc}[/]")
            return []
        if future not in self.inflight:
            return []
        run, worker, sent = self.inflight.pop(future)
        if future.cancelled():
            if worker.address in self.ready and worker.address not in self._addresses():
                self._worker_gone(self.ready.pop(worker.address))
            return [self._lost(run, f"worker {worker.address} on {worker.host}: Dask cancelled the run (its worker "
                                    "left)")]
        try:
            result = self._read(future, worker.address)
        except WorkerLeft:   # the run ended there, but its outcome left with the worker: run it once more here
            if worker.address in self.ready:
                self._worker_gone(self.ready.pop(worker.address))
            return [self._lost(run, f"worker {worker.address} on {worker.host} left before the run's outcome "
                                    "was read")]
        except WorkerRefused as exc:  # the worker lost its setup (restarted): the run never started
            if self.ready.pop(worker.address, None) is not None:
                self._setup(worker.address)
            return [self._lost(run, f"worker {worker.address}: {exc}")]
        except Exception as exc:
            if type(exc).__name__ == "KilledWorker" or worker.address not in self._addresses():
                if worker.address in self.ready:
                    self._worker_gone(self.ready.pop(worker.address))
                return [self._lost(run, f"worker {worker.address} on {worker.host} died during the run")]
            return [Finished(run, Outcome(status=Status.FAILED, error=f"harness: {type(exc).__name__}: {exc}"),
                             harness_error=True)]
        self.overhead_s.append(max(0.0, time.monotonic() - sent - result["duration_s"]))
        if len(self.overhead_s) % 16 == 0:
            self.hosts_changed = True   # host_json's dask_costs, now and then
        return [Finished(run, result["outcome"], result["harness_error"], result["duration_s"])]

    def cancel(self, reason: str) -> list[Finished]:
        """Cancel what is outstanding; the runs in flight, interrupted."""
        futures = list(self.inflight) + list(self.setting_up)
        with contextlib.suppress(Exception):
            self.client.cancel(futures, force=True)
        lost = [_interrupted(run, reason) for run, _worker, _started in self.inflight.values()]
        self.inflight.clear()
        self.redo.clear()   # recorded interrupted when they were lost: the next `fecbench run` does them
        return lost

    def abort_reason(self) -> str | None:
        if self.ready or self.setting_up:
            self.no_worker_since = None
        elif self.no_worker_since is None:
            self.no_worker_since = time.monotonic()
        elif time.monotonic() - self.no_worker_since > WORKER_WAIT_S:
            return f"no Dask worker left for {WORKER_WAIT_S} s"
        return None


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
                 reporter: Reporter) -> CampaignSecurity | None:
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
        reporter.say(f"[yellow]warning: --dask {dask} is unauthenticated: anyone who can reach it can run code "
                     "as root on its workers; the campaign records this[/]")
    return security
