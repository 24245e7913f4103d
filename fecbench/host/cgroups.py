"""A cgroup for the endpoints of each network: measured apart, and kept from taking every CPU.

Every process a run starts on a network's client and server hosts (server, client, the descriptor's
setup commands, fidelity probes, whatever those start) runs in that network's endpoint group, so that:

- the scheduler tracer (`fecbench.timekeeping.schedlat`) counts the wake-up latency of exactly those threads, by the
  group's id in the unified (v2) hierarchy, which every kernel keeps;
- the `cpu` controller gives each network's group an equal share of contended CPUs (cgroup v1
  `cpu.shares`, v2 `cpu.weight`, both left at their defaults): a network whose endpoints burst, or
  run many threads, cannot starve the endpoints of the others. The delay elements stay outside (they
  run at real-time priority, on the CPU `fecbench.host.affinity` leaves them).

Three layouts, read from /proc/self/mounts (`fecbench doctor` says which one is used):
- ``unified``: cgroup v2 only (/sys/fs/cgroup is cgroup2); one cgroup identifies and isolates, with the
  cpu controller when the root enables it for its children;
- ``hybrid``: v1 controllers with cgroup2 mounted beside them (/sys/fs/cgroup/unified; this project's CI
  machines): the v2 cgroup identifies, a v1 ``cpu`` cgroup of the same name isolates;
- ``legacy``: v1 only; fecbench mounts the v2 hierarchy at <state dir>/cgroup2 to identify.

A process joins its group before it executes the program (`EndpointGroup.joiner`: a `sh` that writes its
own PID to the groups' ``cgroup.procs`` and then execs), so threads and children it starts are in the
group from their first instruction. Groups are recorded with `fecbench.host.cleanup`; `fecbench clean`
removes those of a killed campaign.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fecbench.host import cleanup

ENV = "FECBENCH_ENDPOINT_TIMING"    # off: no endpoint groups and no tracer (fecbench.timekeeping.schedlat)
MOUNTS = Path("/proc/self/mounts")


def enabled() -> bool:
    return os.environ.get(ENV, "on").strip().lower() not in ("off", "0", "no", "false")


@dataclass(frozen=True)
class Hierarchy:
    """Which cgroup hierarchies this machine mounts: the one that identifies a run's processes and the one
    that isolates them."""
    kind: str               # unified | hybrid | legacy
    v2: Path | None         # the cgroup2 hierarchy (None: legacy, not mounted yet)
    cpu: Path | None        # the hierarchy whose cpu controller isolates the groups (None: no isolation)
    cpu_version: int | None  # 1 or 2

    def describe(self) -> str:
        where = f"cgroup2 at {self.v2}" if self.v2 else "cgroup2 to be mounted by fecbench"
        isolation = f"cpu controller v{self.cpu_version} at {self.cpu}" if self.cpu else "no cpu controller"
        return f"{self.kind}: {where} (identifies), {isolation} (isolates)"


def _mounts(text: str) -> list[tuple[str, str, set[str]]]:
    """(mount point, type, options) of every cgroup mount in a /proc/mounts text."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            out.append((fields[1].replace("\\040", " "), fields[2], set(fields[3].split(","))))
    return out


def detect(mounts_text: str | None = None) -> Hierarchy:
    """The cgroup layout of this machine (from /proc/self/mounts, or the given text)."""
    mounts = _mounts(MOUNTS.read_text() if mounts_text is None else mounts_text)
    v2 = next((Path(point) for point, kind, _ in mounts if kind == "cgroup2"), None)
    v1_cpu = next((Path(point) for point, kind, opts in mounts if kind == "cgroup" and "cpu" in opts), None)
    if v2 is not None and not any(kind == "cgroup" for _, kind, _ in mounts):
        cpu = v2 if "cpu" in _words(v2 / "cgroup.subtree_control") else None
        return Hierarchy("unified", v2, cpu, 2 if cpu else None)
    return Hierarchy("hybrid" if v2 is not None else "legacy", v2, v1_cpu, 1 if v1_cpu else None)


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def v2_root(layout: Hierarchy) -> Path:
    """The mounted cgroup2 hierarchy; on a legacy machine, fecbench's own mount (made once, kept)."""
    if layout.v2 is not None:
        return layout.v2
    own = cleanup.STATE_DIR / "cgroup2"
    if own.is_dir() and (own / "cgroup.procs").exists():
        return own
    own.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "cgroup2", "none", str(own)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise OSError(f"cannot mount cgroup2 at {own}: {proc.stderr.strip()}")
    return own


class EndpointGroup:
    """One network's endpoint group: a v2 cgroup (identity) and, on hybrid and legacy machines, a v1
    ``cpu`` cgroup of the same name (isolation)."""

    def __init__(self, name: str, dirs: list[Path], layout: Hierarchy) -> None:
        self.name, self.dirs, self.layout = name, dirs, layout

    @classmethod
    def create(cls, name: str, layout: Hierarchy | None = None, parent: EndpointGroup | None = None) -> EndpointGroup:
        """Make the group's cgroups (OSError when this machine cannot); with `parent`, inside the parent's (a
        competing flow's processes: measured apart, sharing the network's CPU share)."""
        if parent is not None:
            return cls._make(name, [d / f"flow-{name}" for d in parent.dirs], parent.layout)
        layout = layout or detect()
        dirs = [v2_root(layout) / f"fecbench-{name}"]
        if layout.cpu is not None and layout.cpu != layout.v2:
            dirs.append(layout.cpu / f"fecbench-{name}")
        return cls._make(name, dirs, layout)

    @classmethod
    def _make(cls, name: str, dirs: list[Path], layout: Hierarchy) -> EndpointGroup:
        made: list[Path] = []
        try:
            for path in dirs:
                path.mkdir()
                made.append(path)
                cleanup.record("cgroup", str(path))
        except OSError:
            for path in made:
                cleanup.remove_cgroup(path)
            raise
        return cls(name, dirs, layout)

    @property
    def id(self) -> int:
        """The v2 cgroup's id (its directory's inode number), by which the tracer counts its threads."""
        return os.stat(self.dirs[0]).st_ino

    def joiner(self) -> list[str]:
        """An argv prefix that puts the process into the group, then executes the rest of the argv."""
        writes = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.dirs)))
        script = (f'{{ {writes}; }} || {{ echo "fecbench: cannot join the endpoint cgroup {self.name}" >&2; '
                  f'exit 125; }}; shift {len(self.dirs)}; exec "$@"')
        return ["sh", "-c", script, "fecbench-join", *(str(d / "cgroup.procs") for d in self.dirs)]

    def adopt(self, pid: int) -> None:
        """Move a running process (all its threads) into the group."""
        for path in self.dirs:
            (path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        text = (self.dirs[0] / "cgroup.procs").read_text()
        return [int(v) for v in text.split()]

    def cpu_usage_us(self) -> int | None:
        """CPU time the group's threads used so far (µs; v2 cpu.stat, kept for threads that ended)."""
        return _stat_field(self.dirs[0] / "cpu.stat", "usage_usec")

    def pressure_us(self) -> int | None:
        """Time during which at least one of the group's threads waited for a CPU (µs; PSI "some" total)."""
        try:
            line = (self.dirs[0] / "cpu.pressure").read_text().splitlines()[0]
        except (OSError, IndexError):
            return None
        fields = dict(item.split("=", 1) for item in line.split()[1:] if "=" in item)
        return int(fields["total"]) if fields.get("total", "").isdigit() else None

    def remove(self) -> bool:
        """Remove the group once its processes are gone; False (recorded for `fecbench clean`) if one stays."""
        ok = True
        for path in self.dirs:
            if cleanup.remove_cgroup(path):
                cleanup.forget("cgroup", str(path))
            else:
                ok = False
        return ok


def _stat_field(path: Path, name: str) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return None
