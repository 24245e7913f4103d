"""Process markers: which processes a fecbench process started, found again after it was killed.

A fecbench process that creates resources appends its marker `<pid>:<start time>` (start time: clock
ticks since boot, /proc/PID/stat field 22) to the `FECBENCH_OWNER` variable of its own environment
before it starts anything (`mark_owner`). Environments are inherited, so every process it starts and
everything those start (Mininet shells, servers, clients, delay elements, probes, tc and ip helpers,
Dask workers) carries the marker, whether or not it was recorded in a state file: a harness killed
between starting a child and recording it still leaves a marked child. The variable holds the whole
chain, outermost first (`"812:4711 900:5123"` for a Dask worker 900 started by coordinator 812), so
ending a dead coordinator's processes also ends its workers' processes.

`orphans()` picks, from a scan of /proc (`scan()`), the processes whose chain names an owner that is
dead (no process with that PID and start time) and `end()` ends them through pidfds after checking
their start time again, so a recycled PID is never signalled. A process that scrubs its environment
(`env -i`, sudo) loses the marker; the state file still names what fecbench started directly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

VARIABLE = "FECBENCH_OWNER"
MAX_CHAIN = 16          # markers kept in one environment (the outermost are dropped first)

Owner = tuple[int, int]  # (pid, start time)


def format_owner(owner: Owner) -> str:
    return f"{owner[0]}:{owner[1]}"


def parse_owners(text: str) -> list[Owner]:
    """The owners named by a FECBENCH_OWNER value, outermost first; malformed items are ignored."""
    owners: list[Owner] = []
    for item in text.replace(",", " ").split():
        pid, sep, start = item.partition(":")
        if sep and pid.isdigit() and start.isdigit() and int(pid) > 0:
            owners.append((int(pid), int(start)))
    return owners


def owners_in_environ(environ: bytes) -> list[Owner]:
    """The owners named in a /proc/PID/environ block (NUL-separated NAME=value entries)."""
    key = VARIABLE.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(key):
            return parse_owners(entry[len(key):].decode(errors="replace"))
    return []


def chain_with(value: str, owner: Owner) -> str:
    """A FECBENCH_OWNER value with `owner` appended (once), at most MAX_CHAIN markers."""
    owners = [o for o in parse_owners(value) if o != owner] + [owner]
    return " ".join(format_owner(o) for o in owners[-MAX_CHAIN:])


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on, or None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """Process start time (clock ticks since boot): with the PID, it names one process for good."""
    fields = stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def running(owner: Owner) -> bool:
    """Whether this very process (PID and start time) still runs; a zombie does not."""
    fields = stat_fields(owner[0])
    if not fields or len(fields) < 20:
        return False
    return fields[0] not in ("Z", "X", "x") and fields[19] == str(owner[1])


_OWN: dict[int, Owner] = {}   # this process's marker (keyed by PID: a forked child gets its own)


def own_owner() -> Owner:
    pid = os.getpid()
    if pid not in _OWN:
        _OWN[pid] = (pid, start_time(pid) or 0)
    return _OWN[pid]


def mark_owner() -> str:
    """Put this process's marker into its environment (idempotent; again in a forked child, whose PID
    differs) and return the FECBENCH_OWNER value that every process started from now on inherits."""
    current = os.environ.get(VARIABLE, "")
    if own_owner() not in parse_owners(current):
        os.environ[VARIABLE] = chain_with(current, own_owner())
    return os.environ[VARIABLE]


@dataclass(frozen=True)
class Marked:
    """A live process that carries fecbench markers."""
    pid: int
    start: int
    owners: tuple[Owner, ...]
    argv: str = ""


def _ancestors(pid: int) -> set[int]:
    """`pid` and the PIDs of its parents up to init (never ended: `fecbench clean` may run under them)."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        fields = stat_fields(pid)
        if not fields:
            break
        pid = int(fields[1])
    return seen


def scan(proc: Path = Path("/proc")) -> list[Marked]:
    """Every live process (not a zombie) whose environment carries a marker, except this process and
    its ancestors. Processes whose environment cannot be read are skipped."""
    keep_out = _ancestors(os.getpid())
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in keep_out:
            continue
        pid = int(entry.name)
        try:
            owners = owners_in_environ((entry / "environ").read_bytes())
        except OSError:
            continue
        fields = stat_fields(pid)
        if not owners or not fields or fields[0] in ("Z", "X", "x"):
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            argv = ""
        found.append(Marked(pid=pid, start=int(fields[19]), owners=tuple(owners), argv=argv[:200]))
    return found


def orphans(processes: Iterable[Marked], include_live: bool = False,
            is_running: Callable[[Owner], bool] = running, mine: Iterable[Owner] = ()) -> list[Marked]:
    """The processes to end: those whose chain names a dead owner (any owner with `include_live`),
    never one whose innermost marker is one of `mine` (what this very process started)."""
    protected = set(mine)
    out = []
    for process in processes:
        if process.owners[-1] in protected:
            continue
        if include_live or any(not is_running(owner) for owner in process.owners):
            out.append(process)
    return out


def dead_owner(process: Marked, is_running: Callable[[Owner], bool] = running) -> int:
    """The PID of the innermost dead owner in a process's chain (its innermost owner if all run)."""
    dead = [owner for owner in process.owners if not is_running(owner)]
    return (dead or list(process.owners))[-1][0]


def _pidfd(process: Marked) -> int | None:
    """A pidfd for exactly this process (PID and start time), or None when it is gone."""
    try:
        fd = os.pidfd_open(process.pid)
    except OSError:
        return None
    if start_time(process.pid) != process.start:  # the PID now names another process
        os.close(fd)
        return None
    return fd


def end(processes: Iterable[Marked], grace_s: float = 1.0, wait_s: float = 5.0) -> list[Marked]:
    """SIGTERM each process, SIGKILL those still running after `grace_s`; returns the ones signalled.
    Signals go through pidfds opened after checking the start time: a recycled PID is never signalled."""
    fds: dict[Marked, int] = {}
    for process in processes:
        fd = _pidfd(process)
        if fd is not None:
            fds[process] = fd
    try:
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, wait_s)):
            for fd in fds.values():
                with contextlib.suppress(ProcessLookupError, OSError):
                    signal.pidfd_send_signal(fd, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(running((p.pid, p.start)) for p in fds):
                time.sleep(0.02)
            if not any(running((p.pid, p.start)) for p in fds):
                break
    finally:
        for fd in fds.values():
            os.close(fd)
    return list(fds)
