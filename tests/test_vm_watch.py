"""vm/test-kernels ends a guest whose kernel stalled (CI, 2026-11-27: a soft lockup under TCG held the stage for the
whole hour) instead of waiting for --timeout, and still waits for a guest that only runs long. Pure logic: a child
process stands in for QEMU."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "vm" / "test-kernels"


@pytest.fixture(scope="module")
def tk():
    loader = importlib.machinery.SourceFileLoader("vm_test_kernels", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    module.POLL_S = 0.05
    return module


def _sleeper(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def test_the_first_stall_report_is_kept_and_ordinary_lines_are_not(tk) -> None:
    console = tk.Console()
    console.seen(b"FECBENCH-GUEST: group doctor ...\n")
    assert console.stalled_for() == 0.0 and console.stall_at is None
    console.seen(b"[ 3532.699130] watchdog: BUG: soft lockup - CPU#1 stuck for 3275s! [python:135]\n")
    first = console.stall_at
    console.seen(b"[ 3571.229380] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n")
    assert first is not None and console.stall_at == first and "CPU#1 stuck" in console.stall_line


def test_a_stalled_guest_is_ended_after_the_grace(tk, monkeypatch, capsys) -> None:
    monkeypatch.setattr(tk, "STALL_GRACE_S", 0.0)
    console = tk.Console()
    console.seen(b"rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n")
    qemu = _sleeper(120)
    try:
        assert tk.watch(qemu, timeout=600, console=console) is False
    finally:
        qemu.kill()
        qemu.wait()
    assert "reported a stall" in capsys.readouterr().err


def test_a_guest_that_ends_is_waited_for_and_one_past_its_timeout_is_not(tk, capsys) -> None:
    quick = _sleeper(0.2)
    assert tk.watch(quick, timeout=600, console=tk.Console()) is True
    slow = _sleeper(120)
    try:
        assert tk.watch(slow, timeout=0.0, console=tk.Console()) is False
    finally:
        slow.kill()
        slow.wait()
    assert "still running after" in capsys.readouterr().err
