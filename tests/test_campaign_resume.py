"""Resume: kill -9 a campaign half-way (a run's server running), `fecbench clean` (no process the campaign
started survives, found by its marker), run again → every run ok exactly once.
Ctrl-C: the current run is marked interrupted, the network is torn down, the database stays consistent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fecbench.host import cleanup, marks
from tests.helpers.campaign import ROOT, campaign_processes, endpoint_leftovers, fecbench, leftover_processes, rows
from tests.helpers.campaign import smoke_copy as _smoke_copy

pytestmark = [pytest.mark.require_root, pytest.mark.slow]


def _start(design: Path, db: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db), *extra],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_finished_runs(proc: subprocess.Popen, db: Path, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the campaign ended early: {proc.stderr.read()}"
        if db.exists():
            try:
                done = rows(db, "SELECT COUNT(*) AS n FROM runs WHERE status = 'ok'")[0]["n"]
            except Exception:  # tables not created yet
                done = 0
            if done >= count:
                return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} runs finished in {timeout} s")


def _server_of(owner: int, start: int, timeout: float = 60) -> int:
    """Freeze (SIGSTOP) the campaign while a run's server it started is running; that server's PID."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, argv in campaign_processes(owner, start):
            if " server " not in f" {argv} ":
                continue
            started = marks.start_time(pid) or 0
            os.kill(owner, signal.SIGSTOP)
            if marks.running((pid, started)):
                return pid
            os.kill(owner, signal.SIGCONT)  # that run just ended: the next one
        time.sleep(0.01)
    raise AssertionError(f"no server of campaign {owner} seen running in {timeout} s")


def test_kill_9_clean_and_resume(tmp_path: Path) -> None:
    design = _smoke_copy(tmp_path)
    db = tmp_path / "smoke.sqlite"
    proc = _start(design, db)
    start = marks.start_time(proc.pid)
    _wait_for_finished_runs(proc, db, 5)
    server = _server_of(proc.pid, start)  # killed mid-run, as in the observed leftover fecq server
    proc.kill()  # SIGKILL: no cleanup of any kind
    proc.wait()
    state = cleanup.state_file(proc.pid)
    assert state.exists()  # it left resources behind, recorded
    # among them its scheduler tracer (pinned: still attached) and its network's endpoint cgroups
    left = endpoint_leftovers(proc.pid)
    assert any(p.name.endswith("-schedlat") for p in left) and any(p.name.startswith("fecbench-") for p in left)
    # Everything the campaign started carries its marker; the run's server (at least) survives the kill.
    survivors = campaign_processes(proc.pid, start)
    starts = [marks.start_time(pid) or 0 for pid, _ in survivors]
    assert server in {pid for pid, _ in survivors}

    before = {r["key"]: r["status"] for r in rows(db, "SELECT key, status FROM runs")}
    assert len(before) == 16
    assert sum(s == "ok" for s in before.values()) >= 5
    # the run in flight when it was killed stays `running` in the raw database until a campaign finds it left over
    assert sum(s in ("running", "interrupted") for s in before.values()) <= 1
    assert set(before.values()) <= {"ok", "running", "interrupted", "pending", "fidelity"}

    out = fecbench("clean")
    assert out.returncode == 0, out.stderr
    assert f"left by pid {proc.pid}" in out.stdout
    assert not state.exists()
    assert not endpoint_leftovers(proc.pid)  # the tracer detached, the cgroups removed
    # No process started by the campaign survives `clean`, whatever its command line (checked by the
    # marker in each process's environment), and each of those seen after the kill is gone.
    assert campaign_processes(proc.pid, start) == []
    assert not [(pid, argv) for (pid, argv), st in zip(survivors, starts, strict=True) if marks.running((pid, st))]
    assert not leftover_processes(str(tmp_path))

    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    after = rows(db, "SELECT key, status, attempts FROM runs")
    assert len(after) == 16 and {r["key"] for r in after} == set(before)
    # Every run finished exactly once (`fidelity` is a finished run: the shared machine's load can
    # make a point's RTT check fail; that is the fidelity probe's business, not this test's).
    assert {r["status"] for r in after} <= {"ok", "fidelity"}
    for r in after:  # the runs finished before the kill were not run again
        assert r["attempts"] == (2 if before[r["key"]] in ("running", "interrupted") else 1)
    ok = sum(r["status"] == "ok" for r in after)
    assert ok >= 5 and len(rows(db, "SELECT run_key FROM metrics")) == ok
    assert len(rows(db, "SELECT run_key FROM link_stats")) == 2 * ok
    assert len(rows(db, "SELECT id FROM campaigns")) == 1


def test_kill_9_of_a_dask_coordinator_then_clean_ends_its_workers_and_their_runs(tmp_path: Path) -> None:
    """`--dask local:2`: the coordinator killed, its worker processes (and their servers, clients, delay
    elements) live on; `clean` ends every one of them, by marker, and removes the workers' networks."""
    pytest.importorskip("distributed", reason="the cluster extra is not installed")
    design = _smoke_copy(tmp_path)
    db = tmp_path / "smoke.sqlite"
    proc = _start(design, db, "--dask", "local:2")
    start = marks.start_time(proc.pid)
    cleaned = False
    try:
        _wait_for_finished_runs(proc, db, 2)
        _server_of(proc.pid, start)
        proc.kill()
        proc.wait()
        # Its workers live on (and may end the runs they were executing, servers included).
        assert campaign_processes(proc.pid, start)
        # The workers' own markers follow the coordinator's in the chains of what they started.
        workers = {o[0] for p in marks.scan() if (proc.pid, start) in p.owners
                   for o in p.owners[p.owners.index((proc.pid, start)) + 1:]}
        assert workers, "no worker of the campaign marked itself"

        out = fecbench("clean")
        cleaned = True
        assert out.returncode == 0, out.stderr
        assert campaign_processes(proc.pid, start) == []
        assert not any(cleanup.state_file(pid).exists() for pid in [proc.pid, *workers])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if not cleaned:
            fecbench("clean")  # a failed test leaves nothing behind either

    # (A run may end `fidelity` under the load of two workers: finished, not run again.)
    before = {r["key"]: r["status"] for r in rows(db, "SELECT key, status FROM runs")}
    out = fecbench("run", str(design), "--db", str(db), "--dask", "local:2")
    assert out.returncode == 0, out.stdout + out.stderr
    after = rows(db, "SELECT key, status, attempts FROM runs")
    assert len(after) == 16 and {r["key"] for r in after} == set(before)
    assert {r["status"] for r in after} <= {"ok", "fidelity"}
    for r in after:  # every run exactly once: those finished before the kill were not run again
        assert r["attempts"] == (2 if before[r["key"]] in ("running", "interrupted") else 1), (r, before[r["key"]])
    assert len(rows(db, "SELECT run_key FROM metrics")) == sum(r["status"] == "ok" for r in after)


def test_ctrl_c_marks_interrupted_and_tears_down(tmp_path: Path) -> None:
    design = _smoke_copy(tmp_path)
    db = tmp_path / "smoke.sqlite"
    proc = _start(design, db)
    _wait_for_finished_runs(proc, db, 3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    statuses = [r["status"] for r in rows(db, "SELECT status FROM runs")]
    assert statuses.count("interrupted") <= 1 and statuses.count("ok") >= 3
    assert set(statuses) <= {"ok", "interrupted", "pending"}
    assert not cleanup.state_file(proc.pid).exists()  # it removed everything it created itself
    assert not leftover_processes(str(tmp_path))
    interrupted = rows(db, "SELECT error FROM runs WHERE status = 'interrupted'")
    assert all("interrupted" in r["error"] for r in interrupted)
