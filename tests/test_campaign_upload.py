"""Uploads and request/response exchanges end to end (real Mininet, real droppers, real fecq and tquic):
a scripted loss trace on both directions of the bottleneck; fecq's uploads are confirmed by the server
with every byte checked, tquic (no upload capability) is recorded `unsupported` in the same campaign;
request/response runs record each exchange's time with both directions losing packets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.campaign import FECQ, ROOT, fecbench, rows
from tests.helpers.designs import QUIC_AND_RS, Impl, design_file

pytestmark = [pytest.mark.require_root, pytest.mark.slow]

TQUIC = ROOT / "quic-impls" / "tquic" / "build" / "bin" / "tquic_client"
# The same packet indices dropped on each direction of the bottleneck (each direction counts its own
# packets from 0 after the fidelity check): every run loses these packets of the client's and of the
# server's, whatever the implementation (common random numbers).
TRACE = [10, 20, 30]


def _design(tmp_path: Path, name: str, workload: dict[str, Any], impls: list[Impl]) -> Path:
    (tmp_path / "trace.txt").write_text("\n".join(map(str, TRACE)) + "\n")
    loss = {"model": "trace", "file": tmp_path / "trace.txt", "directions": ["forward", "reverse"]}
    return design_file(tmp_path / f"{name}.toml", seed=18, timeout_s=30, points=2,
                       factors={"bw": (5, 20), "owd": (5, 15)}, loss=loss, workload=workload, impls=impls)


def _run(design: Path, tmp_path: Path) -> Path:
    if not FECQ.exists():
        pytest.skip("fecq is not built (make bootstrap)")
    db = tmp_path / f"{design.stem}.sqlite"
    out = fecbench("run", str(design), "--db", str(db), timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return db


def _drops(db: Path) -> dict[str, dict[str, int]]:
    """Per run key: packets dropped on the bottleneck per direction."""
    out: dict[str, dict[str, int]] = {}
    for s in rows(db, "SELECT run_key, direction, dropped, matched FROM link_stats WHERE link = 'bottleneck'"):
        out.setdefault(s["run_key"], {})[s["direction"]] = s["dropped"]
    return out


def test_upload_confirmed_and_tquic_unsupported(tmp_path: Path) -> None:
    assert TQUIC.exists(), f"{TQUIC} is missing: build it with `make native` (part of make bootstrap)"
    impls = [*QUIC_AND_RS, ("tquic", "tquic")]
    db = _run(_design(tmp_path, "upload", {"kind": "upload", "sizes": ["50kB"]}, impls), tmp_path)
    runs = rows(db, "SELECT * FROM runs")
    assert len(runs) == 6
    tquic = [r for r in runs if r["label"] == "tquic"]
    assert {r["status"] for r in tquic} == {"unsupported"}
    assert all("does not declare workload 'upload'" in r["error"] for r in tquic)
    metrics = {m["run_key"]: m for m in rows(db, "SELECT * FROM metrics")}
    drops = _drops(db)
    for run in (r for r in runs if r["label"] != "tquic"):
        assert run["status"] == "ok", (run["label"], run["error"])
        m = metrics[run["key"]]
        full = json.loads(m["json"])
        assert full["workload"] == "upload" and full["ok"] is True
        assert m["bytes_app"] == run["size"] == 50000  # confirmed by the server after checking every byte
        assert 0 < m["dct_ms"] <= m["client_wall_ms"]
        # The client's data went forward and lost exactly the traced packets; the reverse direction
        # (handshake, confirmation, ACKs) lost some too.
        assert drops[run["key"]]["forward"] == len(TRACE)
        assert drops[run["key"]]["reverse"] >= 1
        # The client is the data sender: the top-level counters are its own.
        assert m["packets_sent"] == full["client"]["packets_sent"] > 42
        if run["label"] == "quic":
            assert m["lost"] >= 1 and m["retransmitted_bytes"] > 0 and m["repair_sent"] == 0
        else:
            assert m["repair_sent"] > 0
    assert not [k for k in metrics if k in {r["key"] for r in tquic}]


def test_reqresp_records_every_exchange_with_loss_on_both_directions(tmp_path: Path) -> None:
    workload = {"kind": "reqresp", "sizes": ["8kB"], "exchanges": 5, "request": "1kB", "response": "size"}
    db = _run(_design(tmp_path, "reqresp", workload, QUIC_AND_RS), tmp_path)
    runs = rows(db, "SELECT * FROM runs")
    assert len(runs) == 4
    metrics = {m["run_key"]: m for m in rows(db, "SELECT * FROM metrics")}
    drops = _drops(db)
    for run in runs:
        assert run["status"] == "ok", (run["label"], run["error"])
        assert run["workload"] == "reqresp" and run["size"] == 8000
        m = metrics[run["key"]]
        full = json.loads(m["json"])
        assert (full["exchanges"], full["request"], full["response"]) == (5, 1000, 8000)
        times = full["exchange_ms"]
        assert len(times) == full["exchanges_done"] == 5 and all(t > 0 for t in times)
        assert sorted(times)[2] == pytest.approx(full["exchange_median_ms"])
        assert full["exchange_p95_ms"] == pytest.approx(max(times))  # nearest rank of 5: the largest
        assert sum(times) <= m["dct_ms"] <= m["client_wall_ms"]
        assert m["bytes_app"] == 5 * (1000 + 8000)  # both directions checked byte by byte
        assert drops[run["key"]]["forward"] >= 1 and drops[run["key"]]["reverse"] == len(TRACE)
