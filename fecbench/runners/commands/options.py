"""Command-line options that `fecbench run` and `fecbench reproduce` share (the same names, help and checks)."""

from __future__ import annotations

import typer

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
