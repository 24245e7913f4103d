"""A campaign over a measured link (issue 71, items 4 and 5): real QUIC (fecq) downloads over Verizon's LTE trace
(topologies/lte-trace.toml), each run starting the trace from its beginning; the run records which trace it replayed
(sha256, where it started, loops) and `fecbench explain` draws the trace's capacity beside the sending rate. (A bulk
download's throughput against the trace's capacity, a timing measurement: tests/test_trace_link.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fecbench.inputs.traces import load_trace
from tests.helpers.campaign import FECQ, ROOT, fecbench, rows
from tests.helpers.designs import design_file

pytestmark = [pytest.mark.require_root,
              pytest.mark.skipif(not FECQ.exists(), reason="fecq is not built: make fecq")]


def lte_design(path: Path, repetitions: int, size: str, queue: int = 100) -> Path:
    """fecq downloads without losses over topologies/lte-trace.toml, qlog kept."""
    return design_file(path, "lte-trace-smoke", seed=71, topology=ROOT / "topologies" / "lte-trace.toml",
                       repetitions=repetitions, timeout_s=120, method=None,
                       factors={"p": {"value": 0.0}, "queue": {"value": queue, "unit": "packets"}},
                       loss={"model": "uniform", "p": "p"}, workload={"kind": "download", "sizes": [size]},
                       impls=[("fecq", "quic", {"fec": "none"})], tail='[capture]\nqlog = "all"\n')


def test_downloads_over_an_lte_trace_record_and_explain_it(tmp_path: Path) -> None:
    design = lte_design(tmp_path / "lte.toml", 2, "1MiB")
    db = tmp_path / "lte.sqlite"
    out = fecbench("run", str(design), "--db", str(db), "--link-backend", "delayline")
    assert out.returncode == 0, out.stdout + out.stderr
    runs = rows(db, "SELECT key, status FROM runs")
    assert [r["status"] for r in runs] == ["ok", "ok"], runs
    down = load_trace(ROOT / "traces" / "mahimahi" / "Verizon-LTE-short.down")
    for run in runs:
        stats = rows(db, "SELECT delay_json FROM link_stats WHERE run_key = ? AND link = 'cell' AND "
                         "direction = 'reverse'", run["key"])
        used = json.loads(stats[0]["delay_json"])["trace"]
        # every run meets the trace from its start: recorded as offset 0, within its first loop
        assert used["sha256"] == down.sha256 and used["offset_ms"] == 0 and used["loops"] == 0, used
    key = runs[0]["key"]
    out = fecbench("explain", str(db), key[:12], "-o", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    summary = (tmp_path / f"{key[:12]}-summary.txt").read_text()
    assert "trace link cell: capacity" in summary and "idle (opportunities unused) in" in summary, summary
    assert (tmp_path / f"{key[:12]}-timeline.png").stat().st_size > 0

