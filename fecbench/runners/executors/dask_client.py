"""Connecting a campaign's coordinator to Dask: a LocalCluster of this machine (`local:N`, 127.0.0.1 only,
mutual TLS with the campaign's in-memory credentials) or a scheduler's address (probed first: a service
that is not a Dask scheduler is an error within seconds), and the plugin that tears a worker's network
down when the worker closes. Dask is imported only inside these functions: fecbench works without the
`cluster` extra.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import TYPE_CHECKING, Any

from fecbench.inputs.errors import UserError
from fecbench.runners.executors import dask_security
from fecbench.runners.executors.dask_security import CampaignSecurity
from fecbench.runners.executors.dask_worker import worker_teardown

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

    from distributed import Client, Worker, WorkerPlugin

    from fecbench.runners.executors.progress import Reporter

INSTALL_HINT = "pip install 'fecbench[cluster]'"
CONNECT_TIMEOUT_S = 10


def require_distributed() -> ModuleType:
    try:
        import distributed
    except ImportError:
        raise UserError(f"--dask needs Dask's distributed scheduler, which is not installed: {INSTALL_HINT}") \
            from None
    return distributed


def teardown_plugin(ignore_sigint: bool = False) -> WorkerPlugin:
    """The plugin every worker of a campaign gets: its network torn down when the worker closes."""
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

    return TeardownOnClose(ignore_sigint=ignore_sigint)


@contextlib.contextmanager
def connect(kind: str, value: int | str, security: CampaignSecurity, dashboard: bool,
            reporter: Reporter) -> Iterator[Client]:
    """A Dask client on the given scheduler, or on a LocalCluster of `value` processes that lives as long.
    The local cluster listens on 127.0.0.1 only and speaks mutual TLS with the campaign's own credentials."""
    distributed = require_distributed()
    import dask

    silence = logging.CRITICAL  # the coordinator reports dead and refused workers itself
    for name in ("distributed", "distributed.client", "distributed.comm", "distributed.core"):
        logging.getLogger(name).setLevel(silence)
    if kind == "local":
        # A dying worker's run must fail at once (the coordinator runs it once more itself), never be retried by
        # Dask elsewhere.
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
                reporter.say(f"Dask dashboard (this machine only): {cluster.dashboard_link}")
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
