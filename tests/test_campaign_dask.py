"""Campaigns on a Dask cluster (`fecbench run --dask local:N`): the same runs, keys and loss seeds as a
local campaign, each run recorded exactly once with the host that ran it; a worker killed mid-run: its run
recorded `interrupted`, kept aside and run once more within the same campaign while the others go on."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fecbench.host import cleanup, marks
from fecbench.runners.executors.dask_worker import differences
from fecbench.runners.executors.distributed import parse_target
from tests.helpers.campaign import ROOT, fecbench, leftover_processes, rows, unexplained_attempts
from tests.helpers.campaign import smoke_copy as _smoke_copy

pytest.importorskip("distributed", reason="the cluster extra is not installed")


# --- pure logic -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["local:0", "local:", "local:x", "local:-1", "local:100", "nohost:8786",
                                  "tcp://", "tcp://host", "http://host:8786", "8786"])
def test_bad_dask_values_are_user_errors(text: str) -> None:
    from fecbench.inputs.errors import UserError

    with pytest.raises(UserError, match="--dask"):
        parse_target(text)


def test_good_dask_values() -> None:
    assert parse_target("local:2") == ("local", 2)
    assert parse_target("tcp://10.0.0.1:8786") == ("address", "tcp://10.0.0.1:8786")
    assert parse_target("tcp://sched.example.org:8786")[0] == "address"


def test_bad_dask_values_exit_2() -> None:
    for text in ("local:0", "bogus"):
        out = fecbench("run", str(ROOT / "designs" / "smoke.toml"), "--dask", text, "--dry-run")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "--dask" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.require_root
def test_unreachable_scheduler_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    out = fecbench("run", str(ROOT / "designs" / "smoke.toml"), "--db", str(db), "--dask", "tcp://127.0.0.1:1")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "cannot reach the Dask scheduler" in out.stderr and "Traceback" not in out.stderr
    assert not db.exists()


def test_without_the_cluster_extra_a_clear_error() -> None:
    """distributed made unimportable: the error names the extra to install."""
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from fecbench.inputs.errors import UserError\n"
            "from fecbench.runners.executors.distributed import require_distributed\n"
            "try:\n    require_distributed()\nexcept UserError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'fecbench[cluster]'" in out.stdout


def test_identity_differences() -> None:
    mine = {"fecbench": "0.1.0", "git_sha": "abc", "design_hash": "d", "experiment_hash": "e",
            "impls": {"quic": {"version": "fecq 1", "descriptor": "t", "binaries": {"binary": "h1"}}}}
    assert differences(mine, json.loads(json.dumps(mine))) == []
    other = json.loads(json.dumps(mine))
    other["git_sha"] = "def"
    other["impls"]["quic"]["binaries"]["binary"] = "h2"
    found = differences(mine, other)
    assert any("git_sha def" in d for d in found) and any("binary binary sha256 h2" in d for d in found)
    assert differences(mine, {**mine, "impls": {}}) == ["implementation 'quic' missing"]


def test_live_workers_are_not_taken_for_dead_when_the_client_refreshes_its_cache() -> None:
    """The client's periodic refresh of its cached scheduler identity lists no workers; when it lands
    between the coordinator's fetch and read, the old `scheduler_info()` lookup saw no workers and marked
    both runs in flight interrupted (a make test failure). Here the refresh always lands there."""
    from types import SimpleNamespace

    import dask
    from distributed import Client, LocalCluster

    from fecbench.runners.executors.distributed import DaskExecutor

    # In process (inproc:// between client, scheduler and worker); the nodes' HTTP servers, which always
    # listen, on loopback and serving nothing, as the campaigns' own local clusters.
    quiet = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    with dask.config.set(quiet), LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0",
                                              worker_dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster) as client:
        fetch = client._update_scheduler_info

        async def fetch_then_periodic_refresh(n_workers: int = 0) -> None:
            await fetch(n_workers=n_workers)
            await fetch()  # what the periodic callback does (n_workers=0)

        client._update_scheduler_info = fetch_then_periodic_refresh
        assert client.scheduler_info()["workers"] == {}  # the cache, overwritten
        assert DaskExecutor._addresses(SimpleNamespace(client=client)) == set(cluster.scheduler.workers)


def test_a_result_whose_worker_left_is_a_lost_run_not_a_wait_for_ever() -> None:
    """A run finished on a worker that then left before the coordinator read its outcome (a host killed in
    the middle of a campaign, issue 52): Dask waits for the run to be computed again, which never happens
    (runs are pinned to their worker), and the coordinator's unbounded `result()` hung the campaign with 65
    runs to go. Now: the worker's absence is noticed and the run is lost (run once more elsewhere)."""
    import threading

    import dask
    from distributed import Client, LocalCluster, wait

    from fecbench.runners.executors.distributed import WorkerLeft, read_result

    quiet = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    with dask.config.set(quiet), LocalCluster(n_workers=2, processes=False, dashboard_address="127.0.0.1:0",
                                              worker_dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster) as client:
        gone = sorted(cluster.scheduler.workers)[0]
        future = client.submit(dict, outcome="ok", workers=[gone], allow_other_workers=False, pure=False)
        wait([future])
        assert read_result(future, lambda: True) == {"outcome": "ok"}   # read while its worker is there
        client.sync(next(w for w in cluster.workers.values() if w.address == gone).close)
        # The read runs in a thread: on the old code it never returns, and the test fails instead of hanging.
        outcome: list[object] = []
        reader = threading.Thread(target=lambda: outcome.append(_raised(read_result, future,
                                                                        lambda: gone in cluster.scheduler.workers)),
                                  daemon=True)
        reader.start()
        reader.join(timeout=120)
        assert outcome == [WorkerLeft], "reading the result of a run whose worker left did not end"


def _raised(function, *args) -> type[BaseException] | None:
    try:
        function(*args)
    except Exception as exc:
        return type(exc)
    return None


# --- real campaigns (root, Mininet, fecq) ------------------------------------------------------------

def _keys_and_seeds(db: Path) -> dict[str, int]:
    return {r["key"]: r["loss_seed"] for r in rows(db, "SELECT key, loss_seed FROM runs")}


@pytest.mark.require_root
@pytest.mark.slow
def test_smoke_on_two_local_workers(tmp_path: Path, smoke_db: Path) -> None:
    db = tmp_path / "smoke.sqlite"  # the design itself, as the local fixture ran it: the same run keys
    out = fecbench("run", str(ROOT / "designs" / "smoke.toml"), "--db", str(db), "--dask", "local:2")
    assert out.returncode == 0, out.stdout + out.stderr
    runs = rows(db, "SELECT * FROM runs")
    assert len(runs) == 16 and [r for r in runs if r["status"] != "ok"] == []
    assert unexplained_attempts(db) == []   # each run ran once, or again after a flag (a loaded machine)
    # The same runs and common-random-number loss seeds as the local campaign.
    assert _keys_and_seeds(db) == _keys_and_seeds(smoke_db)
    assert all(r["host"] and r["link_backend"] for r in runs)
    assert len(rows(db, "SELECT run_key FROM metrics")) == 16
    assert len(rows(db, "SELECT run_key FROM link_stats")) == 32
    seeds = {r["run_key"]: json.loads(r["model"])["seed"]
             for r in rows(db, "SELECT run_key, model FROM link_stats WHERE direction = 'reverse'")}
    assert seeds == {r["key"]: r["loss_seed"] for r in runs}
    campaign = rows(db, "SELECT * FROM campaigns")
    assert len(campaign) == 1
    host = json.loads(campaign[0]["host_json"])
    assert host["dask"] == "local:2" and host["link_backend"] == campaign[0]["link_backend"]
    workers = [w for info in host["hosts"].values() for w in info["workers"]]
    assert len(workers) == 2 and len({w["prefix"] for w in workers}) == 2  # no name collision on one host
    assert all(info["kernel"] for info in host["hosts"].values())
    assert {r["host"] for r in runs} <= set(host["hosts"])
    for worker in workers:  # every worker removed its network and processes
        assert not cleanup.state_file(worker["pid"]).exists()
    assert not leftover_processes(str(tmp_path))


def _wait_for_ok_runs(proc: subprocess.Popen, db: Path, count: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"the campaign ended early: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, f"fewer than {count} ok runs after {timeout} s"
        try:
            if rows(db, "SELECT COUNT(*) AS n FROM runs WHERE status = 'ok'")[0]["n"] >= count:
                return
        except sqlite3.Error:  # not created yet
            pass
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill_campaign(proc: subprocess.Popen) -> None:
    """(A failed test) kill a campaign still running and its workers, then remove what they left."""
    if proc.poll() is not None:
        return
    workers = [c for c in _children(proc.pid) if "spawn_main" in _cmdline(c)]
    for pid in [proc.pid, *workers]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    for pid in workers:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    for pid in [proc.pid, *workers]:
        state = cleanup.state_file(pid)
        if state.exists():
            cleanup.remove_entries(json.loads(state.read_text()))
            state.unlink()


def _worker_in_a_run(coordinator: int, timeout: float = 60) -> int:
    """A Dask worker process (child of the coordinator) that is running a run's fecq right now."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for worker in _children(coordinator):
            if "spawn_main" in _cmdline(worker) and any("fecq" in _cmdline(p) for p in _descendants(worker)):
                return worker
        time.sleep(0.02)
    raise AssertionError("no worker was seen running a run")


@pytest.mark.require_root
@pytest.mark.slow
def test_killed_worker_its_run_runs_again_in_the_same_campaign(tmp_path: Path) -> None:
    design = _smoke_copy(tmp_path)
    db = tmp_path / "smoke.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db),
                             "--dask", "local:2"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_for_ok_runs(proc, db, 2)
        victim = _worker_in_a_run(proc.pid)
        os.kill(victim, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        _kill_campaign(proc)
    assert proc.returncode == 0, stderr
    # The lost run was recorded interrupted, kept aside and run once more on the other (or a restarted) worker:
    # the campaign completed without a second command, every key once.
    runs = rows(db, "SELECT key, status, attempts FROM runs")
    assert len(runs) == 16 and {r["status"] for r in runs} <= {"ok", "fidelity"}, runs
    earlier = rows(db, "SELECT run_key, status, error, why_again FROM earlier_outcomes WHERE status = 'interrupted'")
    assert len(earlier) == 1 and "died" in earlier[0]["error"] and "once more" in earlier[0]["why_again"]
    assert {r["key"]: r["attempts"] for r in runs}[earlier[0]["run_key"]] >= 2
    # The coordinator removed what the killed worker left (its namespaces, shells, droppers).
    assert not cleanup.state_file(victim).exists()
    assert not leftover_processes(str(tmp_path))
    out = fecbench("run", str(design), "--db", str(db), "--dask", "local:2")
    assert out.returncode == 0 and "0 of 16 run(s) executed" in " ".join(out.stdout.split()), out.stdout + out.stderr


@pytest.mark.require_root
@pytest.mark.slow
def test_ctrl_c_on_the_coordinator(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal does): in-flight runs interrupted, the
    other runs untouched, every worker gone with its network."""
    design = _smoke_copy(tmp_path)
    db = tmp_path / "smoke.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db),
                             "--dask", "local:2"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _wait_for_ok_runs(proc, db, 2)
        # (PID, start time): once ended, a PID soon names another process on a busy machine (pid_max wraps).
        workers = [(c, marks.start_time(c)) for c in _children(proc.pid) if "spawn_main" in _cmdline(c)]
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        _kill_campaign(proc)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    statuses = [r["status"] for r in rows(db, "SELECT status FROM runs")]
    assert len(statuses) == 16 and set(statuses) <= {"ok", "interrupted", "pending"}
    assert statuses.count("ok") >= 2 and statuses.count("interrupted") <= 2  # one run in flight per worker
    assert len(workers) == 2 and not any(marks.running((pid, start or 0)) for pid, start in workers)
    assert not any(cleanup.state_file(pid).exists() for pid in [proc.pid, *(pid for pid, _ in workers)])
    assert not leftover_processes(str(tmp_path))
