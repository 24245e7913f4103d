"""Server and client processes inside the emulated hosts: start, readiness, timeout, reaping, exits watched (pidfd).

Processes are started through a host's `popen` (Mininet's mnexec, which calls setsid, so each
process leads its own process group) or, without a host, directly with a new session. Either way
`stop()` signals the whole group: SIGTERM, a short grace, then SIGKILL, and waits for the leader,
so nothing a run started survives it. Output goes to log files; the tails are kept with the run.
Every process carries this process's marker (fecbench.host.marks), so `fecbench clean` finds it after a
kill -9 even when the harness died between starting it and recording its PID.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.host import cleanup, marks

if TYPE_CHECKING:
    from mininet.node import Node

    from fecbench.host.cgroups import EndpointGroup

TAIL_BYTES = 4000


def tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of a log file, decoded leniently ('' if missing)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


@dataclass
class Process:
    """One started program: its Popen, log files and start time."""
    name: str
    popen: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    started: float
    ended: float | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        code = self.popen.poll()
        if code is not None and self.ended is None:
            self.ended = time.monotonic()
        return code

    def wait(self, timeout: float) -> int | None:
        """Wait up to `timeout` seconds; the exit status, or None if still running."""
        try:
            code = self.popen.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None
        if self.ended is None:
            self.ended = time.monotonic()
        return code

    @property
    def wall_ms(self) -> float | None:
        return None if self.ended is None else (self.ended - self.started) * 1000

    def output(self) -> str:
        return f"{tail(self.stdout_path)}{tail(self.stderr_path)}"

    def log_tail(self) -> str:
        out, err = tail(self.stdout_path, TAIL_BYTES // 2), tail(self.stderr_path, TAIL_BYTES // 2)
        parts = [f"--- stdout\n{out}" if out else "", f"--- stderr\n{err}" if err else ""]
        return "\n".join(p for p in parts if p)

    def terminate(self) -> None:
        """Ask the whole process group to end (SIGTERM) without waiting: `stop` then waits for it."""
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)

    def stop(self, grace_s: float = 2.0) -> None:
        """Terminate the whole process group (SIGTERM, then SIGKILL after `grace_s`) and reap it."""
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            if self.wait(grace_s) is None:
                self._signal_group(signal.SIGKILL)
                self.wait(5.0)
        # Whatever the leader left in its group (children that ignored SIGTERM) goes too.
        self._signal_group(signal.SIGKILL)
        if self.ended is None:
            self.ended = time.monotonic()
        with contextlib.suppress(Exception):
            cleanup.forget("pid", str(self.pid))

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)


def start(name: str, argv: list[str], log_dir: Path, host: Node | None = None, env: dict[str, str] | None = None,
          cwd: Path | None = None, group: EndpointGroup | None = None) -> Process:
    """Start `argv` in `host` (a Mininet node) or locally, its own process group, output to log files;
    `group`: the endpoint cgroup to start it in instead of the host's own (fecbench.host.cgroups)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    # The marker goes to the process whatever `env` says: `fecbench clean` finds it by the marker even if
    # this process is killed before the state file names it.
    full_env = {**os.environ, **(env or {}), marks.VARIABLE: marks.mark_owner()}
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        started = time.monotonic()
        if host is not None:
            extra = {"cgroup": group} if group is not None else {}
            popen = host.popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=full_env,
                               cwd=str(cwd) if cwd else None, **extra)
        else:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=full_env,
                                     cwd=str(cwd) if cwd else None, start_new_session=True)
    cleanup.record("pid", str(popen.pid))
    return Process(name=name, popen=popen, stdout_path=stdout_path, stderr_path=stderr_path, started=started)


def pidfd(process: Any) -> int | None:
    """A pidfd of a started process (it turns readable when the process exits, without reaping it: several
    can be waited for at once, each exit seen as it happens), or None where there is none (a process that is
    gone or unknown, a kernel without pidfd_open). The caller closes it."""
    try:
        return os.pidfd_open(process.pid)
    except (OSError, AttributeError, TypeError):
        return None


def pause(seconds: float) -> list[int]:
    """Sleep `seconds` (nothing if not positive); no descriptor became ready meanwhile (select's shape)."""
    if seconds > 0:
        time.sleep(seconds)
    return []


def wait_ready(process: Process, pattern: str | None, delay_s: float, timeout_s: float) -> str | None:
    """Wait until the server is ready: a line of its output matches `pattern`, or `delay_s` elapsed.
    Returns None when ready, else the reason it is not (exited, or timed out)."""
    deadline = time.monotonic() + timeout_s
    if pattern is None:
        code = process.wait(min(delay_s, timeout_s))
        return None if code is None else f"server exited with status {code} before being ready"
    regex = re.compile(pattern, re.MULTILINE)
    pause = 0.002
    while True:
        if regex.search(process.output()):
            return None
        code = process.poll()
        if code is not None:
            if regex.search(process.output()):
                return None
            return f"server exited with status {code} before being ready"
        if time.monotonic() >= deadline:
            return f"server not ready after {timeout_s:g} s (no output matching {pattern!r})"
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
