"""Process control without root: readiness, timeouts, and reaping the whole process group."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from fecbench.host import cleanup, marks
from fecbench.runners.run import procs


@pytest.fixture(autouse=True)
def _private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Record started processes in a private state folder (works without root, touches nothing shared)."""
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


def _process(pid: int) -> marks.Owner:
    """The process as (PID, start time), taken while it runs: PIDs wrap within minutes here (pid_max 32768), so
    whether it ended is judged on both, never on a PID another process may hold by then."""
    started = marks.start_time(pid)
    assert started is not None, f"process {pid} is not running"
    return (pid, started)


def test_ready_line_and_group_kill(tmp_path: Path) -> None:
    """A server that forks a grandchild ignoring SIGTERM: stop() still leaves nothing behind."""
    script = tmp_path / "server.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    print(f'child {os.getpid()}', flush=True)\n"
        "    time.sleep(60)\n"
        "    sys.exit(0)\n"
        "time.sleep(0.2)\n"
        "print('listening 127.0.0.1:1', flush=True)\n"
        "time.sleep(60)\n")
    server = procs.start("server", [sys.executable, str(script)], tmp_path)
    parent = _process(server.pid)
    assert procs.wait_ready(server, r"^listening ", 0, timeout_s=10) is None
    child = int(next(line.split()[1] for line in server.output().splitlines() if line.startswith("child")))
    child = _process(child)
    server.stop(grace_s=0.2)
    deadline = time.monotonic() + 5
    while marks.running(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not marks.running(parent) and not marks.running(child)
    assert "listening" in server.log_tail()


def test_not_ready_reasons(tmp_path: Path) -> None:
    quiet = procs.start("quiet", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path)
    reason = procs.wait_ready(quiet, r"^listening", 0, timeout_s=0.3)
    assert reason and "not ready after 0.3 s" in reason
    quiet.stop(grace_s=0.1)
    dead = procs.start("dead", [sys.executable, "-c", "import sys; print('oops'); sys.exit(4)"], tmp_path)
    reason = procs.wait_ready(dead, r"^listening", 0, timeout_s=10)
    assert reason == "server exited with status 4 before being ready"
    dead.stop()


def test_client_timeout_and_wall_time(tmp_path: Path) -> None:
    client = procs.start("client", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path)
    process = _process(client.pid)
    assert client.wait(0.2) is None  # still running: the runner records a timeout
    client.stop(grace_s=0.1)
    assert not marks.running(process)
    quick = procs.start("quick", [sys.executable, "-c", "print('hi')"], tmp_path)
    assert quick.wait(10) == 0 and quick.wall_ms is not None and quick.wall_ms > 0
    assert procs.tail(tmp_path / "quick.out") == "hi\n"
