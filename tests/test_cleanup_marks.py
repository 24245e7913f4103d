"""Process markers (fecbench.host.marks): parsing and matching without root; marked processes of a dead
owner are ended, others never (only this test's own child processes are involved)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fecbench.host import cleanup, marks

DEAD, ALIVE, OTHER = (4242, 100), (4343, 200), (4444, 300)


def test_parse_owners_ignores_malformed_items() -> None:
    assert marks.parse_owners("812:4711 900:5123") == [(812, 4711), (900, 5123)]
    assert marks.parse_owners("812:4711,900:5123") == [(812, 4711), (900, 5123)]
    assert marks.parse_owners("") == []
    assert marks.parse_owners("x:1 12 :3 4: 0:9 -1:2 5:6") == [(5, 6)]


def test_owners_in_environ_reads_only_the_variable() -> None:
    environ = b"PATH=/bin\0FECBENCH_OWNER_X=1:2\0FECBENCH_OWNER=812:4711 900:5123\0HOME=/root\0"
    assert marks.owners_in_environ(environ) == [(812, 4711), (900, 5123)]
    assert marks.owners_in_environ(b"PATH=/bin\0MY_FECBENCH_OWNER=1:2\0") == []
    assert marks.owners_in_environ(b"") == []


def test_chain_appends_once_and_stays_bounded() -> None:
    assert marks.chain_with("", (1, 2)) == "1:2"
    assert marks.chain_with("1:2", (3, 4)) == "1:2 3:4"
    assert marks.chain_with("1:2 3:4", (1, 2)) == "3:4 1:2"
    long = " ".join(f"{i}:{i}" for i in range(1, 40))
    chain = marks.parse_owners(marks.chain_with(long, (99, 99)))
    assert len(chain) == marks.MAX_CHAIN and chain[-1] == (99, 99)


def test_orphans_are_the_processes_of_dead_owners_only() -> None:
    def is_running(owner: marks.Owner) -> bool:
        return owner != DEAD

    a = marks.Marked(pid=10, start=1, owners=(DEAD,))
    b = marks.Marked(pid=11, start=1, owners=(ALIVE,))
    c = marks.Marked(pid=12, start=1, owners=(DEAD, ALIVE))   # a live worker's child, coordinator dead
    d = marks.Marked(pid=13, start=1, owners=(ALIVE, DEAD))
    e = marks.Marked(pid=14, start=1, owners=(DEAD, OTHER))   # OTHER is this process: never ended
    f = marks.Marked(pid=15, start=1, owners=(OTHER, DEAD))   # started by a dead process this one started
    everything = [a, b, c, d, e, f]
    assert marks.orphans(everything, is_running=is_running, mine=[OTHER]) == [a, c, d, f]
    assert marks.orphans(everything, include_live=True, is_running=is_running, mine=[OTHER]) == [a, b, c, d, f]
    assert marks.dead_owner(c, is_running) == DEAD[0]
    assert marks.dead_owner(b, is_running) == ALIVE[0]


def test_running_needs_the_same_start_time() -> None:
    me = marks.own_owner()
    assert me[0] == os.getpid() and marks.running(me)
    assert not marks.running((me[0], me[1] + 1))  # the same PID, another process
    assert not marks.running((2**22 + 7, 1))


def _dead_owner() -> marks.Owner:
    """The (PID, start time) of a process that ran and is gone."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    start = marks.start_time(proc.pid)
    assert start is not None
    proc.wait()
    return proc.pid, start


def _sleeper(owner_value: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != marks.VARIABLE}
    if owner_value is not None:
        env[marks.VARIABLE] = owner_value
    return subprocess.Popen(["sleep", "120"], env=env)


def test_children_inherit_the_marker_and_only_dead_owners_children_end() -> None:
    value = marks.mark_owner()
    assert marks.own_owner() in marks.parse_owners(value) and marks.mark_owner() == value  # idempotent
    dead = _dead_owner()
    orphan = _sleeper(marks.format_owner(dead))
    chained = _sleeper(f"{marks.format_owner(dead)} {marks.format_owner(marks.own_owner())}")
    ours = subprocess.Popen(["sleep", "120"])                       # inherits this process's marker
    unmarked = _sleeper(None)
    children = [orphan, chained, ours, unmarked]
    try:
        for _ in range(100):  # exec done: /proc shows the child's own environment
            if all(Path(f"/proc/{c.pid}/cmdline").read_bytes().startswith(b"sleep") for c in children):
                break
            time.sleep(0.01)
        found = {p.pid: p for p in marks.scan() if p.pid in {c.pid for c in children}}
        assert set(found) == {orphan.pid, chained.pid, ours.pid}
        assert found[ours.pid].owners[-1] == marks.own_owner()
        # What this process started is protected: `chained` carries its marker.
        targets = marks.orphans(found.values(), mine=[marks.own_owner()])
        assert [p.pid for p in targets] == [orphan.pid]
        # A marker naming a live owner is left alone even without protection; a dead one's child goes.
        targets = marks.orphans(found.values())
        assert sorted(p.pid for p in targets) == sorted([orphan.pid, chained.pid])
        # A recycled PID (another start time) is never signalled.
        impostor = marks.Marked(pid=ours.pid, start=found[ours.pid].start + 1, owners=(dead,))
        assert marks.end([impostor]) == []
        ended = marks.end(targets, grace_s=0.5)
        assert sorted(p.pid for p in ended) == sorted([orphan.pid, chained.pid])
        assert orphan.wait(5) is not None and chained.wait(5) is not None
        assert ours.poll() is None and unmarked.poll() is None
    finally:
        for child in children:
            child.kill()
            child.wait()


@pytest.mark.parametrize("how", ["clean", "remove_owner"])
def test_a_child_started_but_not_yet_recorded_is_ended(how: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness killed between starting a process and recording it (today's surviving fecq server):
    the process is not in the state file, but it carries the dead harness's marker. `clean` (every dead
    owner) and `remove_owner` (a dead Dask worker, from its coordinator) both end it."""
    state = tmp_path / "state"
    leftover, logs = str(tmp_path / "x"), str(tmp_path / "logs")
    code = (
        "import time\n"
        "from pathlib import Path\n"
        "from fecbench.host import cleanup\n"
        "from fecbench.runners.run import procs\n"
        f"cleanup.record('path', {leftover!r})\n"
        "def stuck(kind, name, **info):\n"
        "    print(name, flush=True)\n"
        "    time.sleep(300)\n"
        "cleanup.record = stuck\n"
        f"procs.start('server', ['sleep', '300'], Path({logs!r}))\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "FECBENCH_STATE_DIR": str(state)})
    child, start = 0, 0
    try:
        child = int(owner.stdout.readline())
        start = marks.start_time(child) or 0   # the child is (PID, start time): its PID is soon another's
        owner.kill()
        owner.wait()
        assert [e["kind"] for e in cleanup._read_entries(state / f"{owner.pid}.json")] == ["path"]
        assert marks.running((child, start))
        monkeypatch.setattr(cleanup, "STATE_DIR", state)
        if how == "clean":
            removed = {(e["kind"], e["name"], e["owner"]) for e in cleanup.clean()}
            assert ("process", str(child), owner.pid) in removed and ("path", leftover, owner.pid) in removed
        else:
            cleanup.remove_owner(owner.pid)
        # Ended: gone, a zombie, or its PID already another process's (on a busy machine PIDs wrap at pid_max).
        assert not marks.running((child, start))
        assert not list(state.glob("*.json"))
    finally:
        if child and marks.running((child, start)):
            marks.end([marks.Marked(pid=child, start=start, owners=())], grace_s=0.0)


def test_a_recorded_pid_is_ended_only_with_its_start_time() -> None:
    child = subprocess.Popen(["sleep", "120"])
    try:
        start = marks.start_time(child.pid)
        assert start is not None
        cleanup.remove_entries([{"kind": "pid", "name": str(child.pid), "start_time": start + 1}])
        assert child.poll() is None  # another process now has that PID, as far as the record says
        cleanup.remove_entries([{"kind": "pid", "name": str(child.pid), "start_time": start}])
        assert child.wait(5) is not None  # ended
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
