"""The worker side of Dask campaigns: tasks that a Dask worker runs for a campaign's coordinator.

Each worker process is set up once per campaign: it checks that it runs the same fecbench, design and
implementation binaries as the coordinator (else results would not be comparable) and holds a
certificate from the campaign's CA, builds its own network (names carry its own per-process prefix)
and then executes runs with the same `Runner` and `run_one` as every other executor, returning each
run's Outcome. The coordinator side is fecbench.runners.executors.distributed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench import __version__
from fecbench.host.paths import REPO_ROOT
from fecbench.records.provenance import git_sha
from fecbench.runners.executors import dask_security
from fecbench.runners.executors.dask_security import CampaignSecurity
from fecbench.runners.experiment.prepare import Prepared, prepare
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.lifecycle import Runner, run_one
from fecbench.runners.run.recorder import impls_fingerprint
from fecbench.runners.run.testbed import MininetTestbed

# --- what must be the same on every host ---------------------------------------------------------

def identity(prepared: Prepared, impls: dict[str, Any]) -> dict[str, Any]:
    """What makes results comparable: fecbench version and commit, design, topology, implementations."""
    return {
        "fecbench": __version__, "git_sha": git_sha(), "design_hash": prepared.design.hash,
        "experiment_hash": prepared.experiment_hash, "repetitions_as": prepared.repetitions_as,
        "impls": {label: {"version": info.get("version"), "descriptor": info.get("descriptor"),
                          "binaries": {k: (v or {}).get("sha256") for k, v in info.get("binaries", {}).items()},
                          "files": {k: _in_checkout((v or {}).get("path"))
                                    for k, v in info.get("binaries", {}).items()}}
                  for label, info in impls.items()},
    }


def _in_checkout(path: str | None) -> str | None:
    """A binary's path as the checkout sees it (the same on every host built alike)."""
    if path is None:
        return None
    return str(Path(path).relative_to(REPO_ROOT)) if Path(path).is_relative_to(REPO_ROOT) else path


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
                where = (info.get("files") or {}).get(name)
                out.append(f"implementation {label!r}: binary {name} sha256 {_short(other['binaries'].get(name))} "
                           f"(coordinator: {_short(digest)})" + (f", file {where}" if where else ""))
    return out


def _short(digest: str | None) -> str | None:
    return digest[:16] if digest else digest


class WorkerRefused(Exception):
    """A worker cannot take part in this campaign (not root, other fecbench, other binaries, …)."""


# --- worker side: one campaign network per worker process -----------------------------------------

@dataclass
class _WorkerCampaign:
    token: str
    runner: Runner
    testbed: MininetTestbed
    info: dict[str, Any]
    runs: dict[str, Run]
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


_CURRENT: dict[str, _WorkerCampaign] = {}   # "campaign" -> this worker's campaign, if any


def _find_design(design_path: str, relative: str | None, text: str | None = None) -> Path:
    """The campaign's design file on this host: at the coordinator's path, or at the same path relative to the
    checkout; else, when the coordinator sent its text (a file it wrote, e.g. a reproduction's profile design
    under results/), written there first (the identity check then compares its hash like any other)."""
    for candidate in (Path(design_path), REPO_ROOT / relative if relative else None):
        if candidate is not None and candidate.is_file():
            return candidate
    where = f" or {REPO_ROOT / relative}" if relative else ""
    if text is None:
        raise WorkerRefused(f"design file {design_path}{where} not found (put it at the same path on every host)")
    target = REPO_ROOT / relative if relative else Path(design_path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    except OSError as exc:
        raise WorkerRefused(f"design file {design_path}{where} not found, and writing the coordinator's copy there "
                            f"failed: {exc}") from None
    return target


def worker_setup(token: str, design_path: str, relative: str | None, expected: dict[str, Any],
                 log_root: str, link_backend: str | None, keep_logs: bool, ca_pem: str | None,
                 design_text: str | None = None) -> dict[str, Any]:
    """(A Dask task.) Check this host against the coordinator (software, and a certificate from the
    campaign's CA when the campaign is authenticated), build this worker's network once."""
    from fecbench.runners.executors.hostinfo import fingerprint

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
    prepared = prepare(_find_design(design_path, relative, design_text))
    if expected.get("repetitions_as") is not None:   # a campaign extended: keyed as its database's runs
        prepared.rekey(expected["repetitions_as"])
    impls = impls_fingerprint(prepared.design)
    problems = differences(expected, identity(prepared, impls))
    if problems:
        raise WorkerRefused("results would not be comparable: " + "; ".join(problems))
    testbed = MininetTestbed(prepared.topology, prepared.runs[0].values, link_backend)
    try:
        runner = Runner(prepared, testbed, Path(log_root), keep_logs)
        info = {"host": testbed.hostname, "pid": os.getpid(), "prefix": testbed.prefix, "backend": testbed.backend,
                "fingerprint": fingerprint(testbed.backend)}
    except BaseException:
        testbed.stop()
        raise
    _CURRENT["campaign"] = _WorkerCampaign(token=token, runner=runner, testbed=testbed, info=info,
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
        outcome, harness_error = run_one(current.runner, current.runs[key])
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
        current.runner.stop_all()
        locked = current.lock.acquire(timeout=0.2)
    try:
        current.testbed.stop()
    finally:
        if locked:
            current.lock.release()
        _CURRENT.pop("campaign", None)
    return True
