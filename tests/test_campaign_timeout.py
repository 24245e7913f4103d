"""One timeout (issue 15, item 1; real Mininet, real fecq): a download that needs more than fecq's own
default limit (60 s) — 17 MB at 2 Mbit/s, ~70 s — ends `ok` with timeout_s = 150; with timeout_s too
small it is refused before anything runs, and with --accept-short-timeout it ends `timeout` (fecq gave
up at timeout_s, exit 124) with the bytes received so far. No assertion on wall-clock time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.campaign import FECQ, fecbench, rows
from tests.helpers.designs import design_file

pytestmark = [pytest.mark.require_root, pytest.mark.slow,
              pytest.mark.skipif(not FECQ.exists(), reason="fecq is not built (make native)")]

SIZE = 17_000_000


def _design(tmp_path: Path, name: str, timeout_s: float) -> Path:
    design = design_file(tmp_path / f"{name}.toml", seed=15, timeout_s=timeout_s, settings={"fidelity": "off"},
                         method="list", file="points.csv", factors={"bw": (1, 10), "owd": (1, 50)},
                         workload={"kind": "download", "sizes": ["17MB"]}, impls=[("fecq", "quic")])
    (tmp_path / "points.csv").write_text("bw,owd\n2,10\n")
    return design


def test_slow_download_ok_refused_or_timeout_never_failed(tmp_path: Path) -> None:
    db = tmp_path / "long.sqlite"
    out = fecbench("run", str(_design(tmp_path, "long", 150)), "--db", str(db), timeout=400)
    (run,) = rows(db, "SELECT r.status, r.error, m.bytes_app, m.dct_ms FROM runs r "
                      "LEFT JOIN metrics m ON m.run_key = r.key")
    assert run["status"] == "ok", out.stdout + out.stderr
    assert run["bytes_app"] == SIZE and run["dct_ms"] > 60_000  # beyond fecq's own default limit

    short = _design(tmp_path, "short", 12)
    db = tmp_path / "short.sqlite"
    out = fecbench("run", str(short), "--db", str(db))
    assert out.returncode == 2 and "point 0 (bw=2, owd=10)" in out.stderr + out.stdout
    assert not db.exists()

    out = fecbench("run", str(short), "--db", str(db), "--accept-short-timeout", timeout=400)
    (run,) = rows(db, "SELECT r.status, r.error, m.bytes_app, m.dct_ms, m.json FROM runs r "
                      "LEFT JOIN metrics m ON m.run_key = r.key")
    assert run["status"] == "timeout", out.stdout + out.stderr
    assert "gave up at timeout_s = 12 s (exit status 124)" in run["error"]
    assert 0 < run["bytes_app"] < SIZE and run["dct_ms"] is None
    assert json.loads(run["json"])["timed_out"] is True
