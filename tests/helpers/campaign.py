"""Helpers for the campaign tests: write small designs, run `fecbench` as a subprocess, read the database."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fecbench.host.paths import REPO_ROOT
from tests.helpers.designs import BW_OWD_P, MULTIPATH, UNIFORM_P, design_file, per_path

ROOT = REPO_ROOT
FAKE_DIR = ROOT / "tests" / "fake_impl"
TOPOLOGY = ROOT / "topologies" / "single.toml"
FECQ = ROOT / "quic-impls" / "fecq" / "target" / "release" / "fecq"
#: What a fecq client may still put on a path after it read its counters (metrics `packets_sent`): an
#: ACK of the server's stats reply, the CONNECTION_CLOSE (repeated while the server's packets still
#: arrive) and their repairs. Measured over 32 client paths: 0-5, and 14 twice, each time with other tests'
#: campaigns on the same 2 CPUs.
CLIENT_PACKETS_AFTER_COUNTERS = 20


def fake_design(path: Path, labels: dict[str, dict[str, str]], *, points: int = 2, sizes: str = '["1kB"]',
                timeout_s: float = 3, name: str = "fakecamp", extra: str = "") -> Path:
    """A design running the fake implementation once per label (args per label) on the single topology."""
    return design_file(path, name, seed=3, timeout_s=timeout_s, settings=f"impl_dirs = [\"{FAKE_DIR}\"]\n{extra}",
                       points=points, factors=BW_OWD_P, loss=UNIFORM_P, workload=f'kind = "download"\nsizes = {sizes}',
                       impls=[("fake", label, args) for label, args in labels.items()])


def fecbench(*args: str, cwd: Path | None = None, timeout: float = 300, columns: int = 200,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fecbench", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, check=False, timeout=timeout,
                          env={**os.environ, "COLUMNS": str(columns), **(env or {})})


def rows(db: Path, sql: str, *params: Any) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def unexplained_attempts(db: Path) -> list[dict[str, Any]]:
    """Runs started more often than once plus their re-runs after a flag: a run a check of
    timekeeping.checks flagged (a loaded machine can) is run again at the campaign's end with its first outcome
    kept in earlier_outcomes, which is allowed; any other extra start (a run executed twice) is returned."""
    reruns: dict[str, int] = {}
    for r in rows(db, "SELECT run_key, why_again FROM earlier_outcomes"):
        if (r["why_again"] or "").startswith("fidelity: re-run"):
            reruns[r["run_key"]] = reruns.get(r["run_key"], 0) + 1
    return [r for r in rows(db, "SELECT key, status, attempts, decided_by FROM runs")
            if r["attempts"] != 1 + reruns.get(r["key"], 0)]


def queue_drops(db: Path) -> dict[tuple[str, str, str], int]:
    """Datagrams each link's qdiscs dropped (queue overflow), per (run key, link, direction)."""
    return {(r["run_key"], r["link"], r["direction"]):
            sum(q.get("drops") or 0 for q in json.loads(r["delay_json"]).get("qdiscs") or [])
            for r in rows(db, "SELECT run_key, link, direction, delay_json FROM link_stats")}


def leftover_processes(marker: str) -> list[str]:
    """Command lines of live processes mentioning `marker` (the campaign's log folder is in their argv)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(cmdline)
    return found


def campaign_processes(owner: int, start: int | None = None) -> list[tuple[int, str]]:
    """(PID, command line) of every live process started by fecbench process `owner` (with that start
    time), directly or not, whatever its command line: found by the owner's marker in /proc/PID/environ
    (fecbench.host.marks). Zombies are not processes that survive (they hold nothing but a PID)."""
    from fecbench.host import marks

    return [(p.pid, p.argv) for p in marks.scan()
            if any(o[0] == owner and (start is None or o[1] == start) for o in p.owners)]


def endpoint_leftovers(owner: int | None = None) -> set[Path]:
    """Tracer pins and endpoint cgroups of fecbench processes (of `owner` only, if given) that exist now;
    only those of dead processes are leftovers (fecbench.timekeeping.schedlat, fecbench.host.cgroups)."""
    from fecbench.host import cgroups, cleanup
    from fecbench.timekeeping import schedlat

    prefix = cleanup.prefix(owner) if owner is not None else "fb"
    layout = cgroups.detect()
    roots = [r for r in (layout.v2, layout.cpu) if r is not None]
    found = set(schedlat.PIN_ROOT.glob(f"{prefix}*-schedlat"))
    for root in roots:
        found |= set(root.glob(f"fecbench-{prefix}*"))
    return found


def smoke_copy(tmp_path: Path) -> Path:
    """designs/smoke.toml copied into a test's folder, its topology path made absolute."""
    if not FECQ.exists():
        pytest.skip("fecq is not built (make bootstrap)")
    design = tmp_path / "smoke.toml"
    shutil.copy(ROOT / "designs" / "smoke.toml", design)
    design.write_text(design.read_text().replace('topology = "topologies/single.toml"',
                                                 f'topology = "{ROOT / "topologies" / "single.toml"}"'))
    return design



def two_path_design(tmp_path: Path, name: str, points: list[tuple[float, ...]], *, loss: str, workload: str,
                    impls: dict[str, str], extra: str = "", repetitions: int = 1) -> Path:
    """A design of fecq labels (label -> its args, the inside of an inline table) on the two-path topology
    at listed points, each (bw_1, bw_2, owd_1, owd_2, queue_1, queue_2), `repetitions` runs of each;
    `loss` and `workload` are the bodies of those sections (TOML lines), `extra` more [design] keys.
    Fidelity is off: these tests read the droppers' verdicts and the endpoints' counters, not the
    network's timing."""
    (tmp_path / "points.csv").write_text("bw_1,bw_2,owd_1,owd_2,queue_1,queue_2\n"
                                         + "".join(",".join(f"{v:g}" for v in p) + "\n" for p in points))
    return design_file(tmp_path / f"{name}.toml", topology=MULTIPATH, repetitions=repetitions, seed=13, timeout_s=60,
                       settings='fidelity = "off"\n' + textwrap.dedent(extra), method="list", file="points.csv",
                       factors={"bw": per_path(5, 20), "owd": per_path(5, 30), "queue": per_path(10, 5000)},
                       loss=loss, workload=workload, impls=[("fecq", label, args) for label, args in impls.items()])
