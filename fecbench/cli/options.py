"""Command-line options that `fecbench run` and `fecbench reproduce` share (the same names, help and checks)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fecbench.inputs.errors import UserError

if TYPE_CHECKING:
    from fecbench.runners.executors.dask_security import CampaignSecurity
    from fecbench.runners.executors.progress import Reporter

DASK = typer.Option(None, "--dask", help="Run on a Dask cluster: tls://SCHEDULER:8786, or local:N (N worker "
                    "processes here, TLS with per-campaign credentials).")
TLS_CA_FILE = typer.Option(None, "--tls-ca-file", help="tls:// cluster: the campaign CA (default: Dask config "
                           "distributed.comm.tls.ca-file).")
TLS_CERT = typer.Option(None, "--tls-cert", help="tls:// cluster: this host's certificate (default: "
                        "distributed.comm.tls.client.cert).")
TLS_KEY = typer.Option(None, "--tls-key", help="tls:// cluster: this host's private key (default: "
                       "distributed.comm.tls.client.key).")
INSECURE = typer.Option(False, "--insecure", help="Allow an unauthenticated tcp:// scheduler on another host "
                        "(anyone reaching it runs code as root on the workers).")
DASHBOARD = typer.Option(False, "--dashboard", help="local:N: serve Dask's dashboard on 127.0.0.1.")
RECALIBRATE = typer.Option(False, "--recalibrate", help="--jobs auto: calibrate in full, even if this machine "
                           "kept a recent calibration for this kind of workload.")


def error_rule(error: str | None) -> str | None:
    """`--error` of `reproduce` and `bench verdicts`: how a page's verdicts share α (UserError for another name; None:
    the pack's own rule)."""
    from fecbench.verdicts.statistics.error_control import RULES

    if error is not None and error not in RULES:
        raise UserError(f"--error {error!r}: choose {' or '.join(RULES)}")
    return error


def machine_options(*, link_backend: str | None, jobs: str | None, recalibrate: bool, dask: str | None,
                    tls_ca_file: Path | None, tls_cert: Path | None, tls_key: Path | None, insecure: bool,
                    dashboard: bool, reporter: Reporter) -> tuple[int | None, CampaignSecurity | None]:
    """`--link-backend`, `--jobs`, `--recalibrate` and the --dask options, checked together as `run` and
    `reproduce` take them: the number of networks (default 1; None: auto) and the campaign's Dask credentials
    (None without --dask). Bad values and combinations: UserError."""
    from fecbench.runners.executors.dask_security import TlsFiles
    from fecbench.runners.executors.jobs import parse_jobs

    if link_backend not in (None, "netem", "delayline"):
        raise UserError(f"--link-backend: unknown backend {link_backend!r} (allowed: netem, delayline)")
    if jobs is not None and dask is not None:
        raise UserError("--jobs and --dask: choose one (--dask local:N also runs N networks here)")
    count = parse_jobs(jobs or "1", allow_auto=True)
    if recalibrate and count is not None:
        raise UserError("--recalibrate goes with --jobs auto")
    tls = TlsFiles(tls_ca_file, tls_cert, tls_key)
    if dask is None and not (insecure or dashboard or tls.given()):
        return count, None      # distributed.py (and Dask) not imported by a command on this machine only
    from fecbench.runners.executors.distributed import dask_options

    return count, dask_options(dask, insecure, dashboard, tls, reporter)
