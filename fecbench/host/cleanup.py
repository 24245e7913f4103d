"""What this process created, recorded so that `fecbench clean` can remove a killed process's leftovers.

Every resource name carries a per-process prefix (`prefix()`), and every resource is recorded in a
state file <state dir>/<pid>.json as soon as it exists (`STATE_DIR`: /run/fecbench for root, a folder of the user's
own otherwise). `clean()` removes the resources of state
files whose owner process is dead, and nothing else: no pattern matching on names, no broad process kills.

Processes are also marked: a fecbench process that creates resources puts its marker
`FECBENCH_OWNER=<pid>:<start time>` (appended to the markers of the fecbench processes that started it)
into its own environment before it starts anything, so every process it starts, and everything those
start (Mininet shells, servers, clients, delay elements, probes, Dask workers), inherits it. A process
killed while it was starting a child, before the state file named it, still leaves a marked child;
`clean()` ends exactly the processes whose /proc/PID/environ carries the marker of a dead owner (the
start time tells a dead owner from a new process with its PID) and never touches anything else.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from fecbench.host import marks


def _state_dir() -> Path:
    """Root's records in /run/fecbench; any other user's in a folder of its own ($XDG_RUNTIME_DIR/fecbench, else
    <tmp>/fecbench-<uid>): a user never shares, nor trips on, root's lock file and records."""
    if os.environ.get("FECBENCH_STATE_DIR"):
        return Path(os.environ["FECBENCH_STATE_DIR"])
    if os.geteuid() == 0:
        return Path("/run/fecbench")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.access(runtime, os.W_OK):
        return Path(runtime) / "fecbench"
    return Path(tempfile.gettempdir()) / f"fecbench-{os.geteuid()}"


STATE_DIR = _state_dir()


def prefix(pid: int | None = None) -> str:
    """Short per-process prefix for names (interfaces allow 15 characters, so keep it short). Naming a
    resource of this process marks the process first (`marks.mark_owner`): what it starts from now on
    carries its marker."""
    if pid is None:
        marks.mark_owner()
    return f"fb{(pid or os.getpid()) % 100000}"


def own_state_dir() -> Path:
    """The state folder, made private to this user (0700) if new; one that another user owns or may write to
    is refused: its records could be someone else's to plant (a shared /tmp)."""
    STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = STATE_DIR.stat()
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"{STATE_DIR}: fecbench's state folder must be this user's own and not writable by "
                              f"others (owner uid {info.st_uid}, mode {stat.filemode(info.st_mode)}); remove it or "
                              f"set FECBENCH_STATE_DIR to a folder of your own")
    return STATE_DIR


def state_file(pid: int | None = None) -> Path:
    return STATE_DIR / f"{pid or os.getpid()}.json"


@contextlib.contextmanager
def _locked_state(pid: int | None = None):
    own_state_dir()
    path = state_file(pid)
    with open(STATE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = json.loads(path.read_text()) if path.exists() else []
        yield entries
        if entries:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(entries, indent=1))
            tmp.replace(path)
        else:
            path.unlink(missing_ok=True)


def record(kind: str, name: str, **info: Any) -> None:
    """Record a resource this process just created. Kinds: pid, netns, bpf_pin, path, link, tc_filter, cgroup."""
    if kind not in _REMOVERS:
        raise ValueError(f"unknown resource kind {kind!r}")
    marks.mark_owner()
    with _locked_state() as entries:
        entry = {"kind": kind, "name": name, "owner_start": marks.own_owner()[1], **info}
        if kind == "pid":
            entry.setdefault("start_time", _start_time(int(name)))
        entries.append(entry)


def forget(kind: str, name: str) -> None:
    """Drop a resource from the record once this process removed it itself."""
    with _locked_state() as entries:
        entries[:] = [e for e in entries if not (e["kind"] == kind and e["name"] == name)]


def _start_time(pid: int) -> int | None:
    """Process start time (clock ticks since boot) so a recycled PID is never mistaken for ours."""
    return marks.start_time(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_running(owner: int, entries: list[dict[str, Any]]) -> bool:
    """Whether the process that wrote a state file still runs: its PID, and the start time it recorded
    (a state file written before start times were recorded only has the PID to go by)."""
    starts = {e.get("owner_start") for e in entries} - {None}
    if not starts:
        return _alive(owner) and not _zombie(owner)
    return any(marks.running((owner, int(start))) for start in starts)


def _zombie(pid: int) -> bool:
    fields = marks.stat_fields(pid)
    return bool(fields) and fields[0] in ("Z", "X", "x")


def _kill_pid(entry: dict[str, Any]) -> None:
    """SIGTERM, then SIGKILL after a short grace, through a pidfd opened after checking the start time
    recorded with the PID: a recycled PID is never signalled."""
    pid = int(entry["name"])
    start = entry.get("start_time")
    if start is None:  # recorded without a start time: the process at that PID now
        start = _start_time(pid)
    if start is None:
        return
    # Up to 5 s for SIGKILL to take effect: a process inside a kernel operation (a namespace's teardown on a
    # loaded machine) dies only when it returns. The wait ends as soon as the process has.
    marks.end([marks.Marked(pid=pid, start=int(start), owners=())], grace_s=0.5, wait_s=5.0)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # a child of this very process: reap it


def _del_netns(entry: dict[str, Any]) -> None:
    subprocess.run(["ip", "netns", "delete", entry["name"]], capture_output=True, check=False)


def _del_path(entry: dict[str, Any]) -> None:
    path = Path(entry["name"])
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _del_link(entry: dict[str, Any]) -> None:
    argv = ["ip", "link", "delete", entry["name"]]
    if entry.get("netns"):
        argv = ["ip", "-n", entry["netns"], *argv[1:]]
    subprocess.run(argv, capture_output=True, check=False)


def _del_tc_filter(entry: dict[str, Any]) -> None:
    """A clsact filter (a dropper on kernels without tcx) outlives its pins: delete it by handle and
    priority in its namespace, then the clsact qdisc if we created it and it is empty. A namespace that
    is gone took the filter with it; one whose path now names another namespace is not touched."""
    ns = entry.get("netns") or "/proc/self/ns/net"
    try:
        st = os.stat(ns)
    except OSError:
        return
    if (st.st_dev, st.st_ino) != (entry["netns_dev"], entry["netns_ino"]):
        return
    tc = ["nsenter", f"--net={ns}", "tc"] if entry.get("netns") else ["tc"]
    dev = entry["dev"]
    subprocess.run([*tc, "filter", "delete", "dev", dev, entry["direction"], "protocol", "all",
                    "pref", str(entry["priority"]), "handle", hex(entry["handle"]), "bpf"],
                   capture_output=True, check=False)
    if entry.get("created_qdisc"):
        shows = [subprocess.run([*tc, "filter", "show", "dev", dev, hook], capture_output=True, text=True,
                                check=False) for hook in ("ingress", "egress")]
        if all(p.returncode == 0 and not p.stdout.strip() for p in shows):
            subprocess.run([*tc, "qdisc", "delete", "dev", dev, "clsact"], capture_output=True, check=False)


def remove_cgroup(path: str | Path, wait_s: float = 2.0) -> bool:
    """rmdir a cgroup (fecbench.host.cgroups): possible once no process is in it, and a killed process may take
    a moment to leave; True when it is gone."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            Path(path).rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _del_cgroup(entry: dict[str, Any]) -> None:
    remove_cgroup(entry["name"])


_REMOVERS = {"pid": _kill_pid, "netns": _del_netns, "bpf_pin": _del_path, "path": _del_path, "link": _del_link,
             "tc_filter": _del_tc_filter, "cgroup": _del_cgroup}
# Processes first (they hold namespaces, interfaces and cgroups), then cgroups, tc filters (in namespaces that
# may still exist), links, namespaces, pins and files.
_ORDER = ["pid", "cgroup", "tc_filter", "link", "netns", "bpf_pin", "path"]


def remove_entries(entries: list[dict[str, Any]]) -> None:
    for kind in _ORDER:
        for entry in reversed([e for e in entries if e["kind"] == kind]):
            _REMOVERS[kind](entry)


def _read_entries(path: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return []
    return entries if isinstance(entries, list) else []


def end_marked(include_live: bool = False) -> list[dict[str, Any]]:
    """End every process carrying the marker of a dead fecbench process (any marker with `include_live`),
    except this process, its ancestors and what it started itself; until no more are found (ending a marked
    Dask worker makes its own children orphans). Returns what was ended, as `clean()` reports it."""
    ended: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    for _ in range(4):
        found = marks.orphans(marks.scan(), include_live, mine=[marks.own_owner()])
        targets = [p for p in found if (p.pid, p.start) not in seen]
        if not targets:
            break
        for process in marks.end(targets):
            seen.add((process.pid, process.start))
            ended.append({"kind": "process", "name": str(process.pid), "what": process.argv,
                          "owner": marks.dead_owner(process), "start_time": process.start})
    return ended


def remove_owner(owner: int) -> None:
    """Remove what one dead fecbench process left on this host: the live processes carrying its marker
    (the start time in the marker names that dead process, never a new one with its PID), then the
    resources its state file names. Nothing happens while a process with that PID runs."""
    if _alive(owner) and not _zombie(owner):
        return
    marks.end([p for p in marks.scan() if any(o[0] == owner and not marks.running(o) for o in p.owners)])
    path = state_file(owner)
    if path.exists():
        remove_entries(_read_entries(path))
        path.unlink(missing_ok=True)


def clean(include_live: bool = False) -> list[dict[str, Any]]:
    """Remove the resources of dead fecbench processes; return what was removed.

    First every process marked by a dead fecbench process (`marks`) is ended, recorded or not, then the
    resources its state file names. A process both marked and recorded is reported once, as recorded."""
    ended = end_marked(include_live)
    removed: list[dict[str, Any]] = []
    recorded: set[str] = set()
    if STATE_DIR.exists():
        for path in sorted(STATE_DIR.glob("*.json")):
            try:
                owner = int(path.stem)
            except ValueError:
                continue
            entries = _read_entries(path)
            if owner == os.getpid() or (not include_live and _owner_running(owner, entries)):
                continue
            remove_entries(entries)
            removed.extend({"owner": owner, **e} for e in entries)
            recorded.update(e["name"] for e in entries if e.get("kind") == "pid")
            path.unlink(missing_ok=True)
    return [*(e for e in ended if e["name"] not in recorded), *removed]
