"""A baseline from another machine (issue 68 item 3): `fecbench compare --same-machine` (what fecbench-ci's
recorded-baseline mode passes unless --any-machine) refuses two campaigns recorded on machines of another kind or
kernel, naming what differs; the same machine, or a new hostname (a container's), passes."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

from tests.helpers.campaign import ROOT

GOLDEN = ROOT / "golden" / "no-loss.sqlite"
FECBENCH = ROOT / ".venv" / "bin" / "fecbench"


def _copy_with_host(tmp_path: Path, name: str, **changes: object) -> Path:
    db = tmp_path / name
    shutil.copy(GOLDEN, db)
    with sqlite3.connect(db) as conn:
        for cid, text in conn.execute("SELECT id, host_json FROM campaigns").fetchall():
            host = {**json.loads(text), **changes}
            conn.execute("UPDATE campaigns SET host_json = ? WHERE id = ?", (json.dumps(host), cid))
    return db


def _compare(a: Path, b: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(FECBENCH), "compare", str(a), str(b), "--margin", "5%", *extra], capture_output=True,
                          text=True, timeout=120, check=False)


def test_a_baseline_from_another_machine_is_refused_unless_asked(tmp_path: Path) -> None:
    base = _copy_with_host(tmp_path, "base.sqlite")
    renamed = _copy_with_host(tmp_path, "renamed.sqlite", hostname="a-new-container-id", mem_kib=24684000)
    out = _compare(base, renamed, "--same-machine")
    assert out.returncode in (0, 3), out.stdout[-2000:] + out.stderr

    other = _copy_with_host(tmp_path, "other.sqlite", cpu="Intel Xeon", kernel="6.1.0-28-amd64")
    out = _compare(base, other, "--same-machine")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "different machines (cpu, kernel differ)" in out.stderr and "fecbench-ci ab" in out.stderr, out.stderr
    assert _compare(base, other).returncode in (0, 3)     # without the check: compared, as before
