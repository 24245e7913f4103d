"""XQUIC end to end, plugged in by its descriptor alone (real Mininet, droppers and delay elements,
the real test programs built by `make xquic`, which `make test` runs first): its smoke designs on one
path (each FEC scheme once) and on two paths, an upload, and a run whose server is missing, which the
client (exiting 0 all the same) must not turn into an `ok` run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fecbench.analysis import tables
from fecbench.analysis.traces import qlog
from tests.helpers.campaign import ROOT, fecbench, rows
from tests.helpers.designs import UNIFORM_P, design_file

pytestmark = [pytest.mark.require_root, pytest.mark.slow]

XQUIC_DIR = ROOT / "quic-impls" / "xquic"


def _built() -> None:
    client = XQUIC_DIR / "build" / "bin" / "test_client"
    assert client.exists(), f"{client} is missing: build it with `make xquic` (make test does)"


def _run(design: Path, db: Path, *options: str) -> list[dict]:
    _built()
    out = fecbench("run", str(design), "--db", str(db), *options)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return rows(db, "SELECT r.*, m.dct_ms, m.bytes_app, m.packets_sent, m.repair_sent, m.recovered, "
                    "m.json AS metrics_json FROM runs r LEFT JOIN metrics m ON m.run_key = r.key "
                    "ORDER BY r.point, r.label")


def test_smoke_single_path_each_fec_scheme(tmp_path: Path) -> None:
    """Every run ok with the size verified; each FEC scheme sent repairs, none without FEC; the
    version recorded is the build's (pinned commit and patch)."""
    runs = _run(ROOT / "designs" / "xquic-smoke.toml", tmp_path / "xquic-smoke.sqlite")
    assert len(runs) == 8
    assert {r["status"] for r in runs} == {"ok"}, [(r["label"], r["error"]) for r in runs]
    for run in runs:
        assert run["bytes_app"] == 50_000 and run["dct_ms"] > 0
        if run["label"] == "xquic":
            assert run["repair_sent"] == 0
        else:
            assert run["repair_sent"] > 0, run["label"]
    impls = json.loads(rows(tmp_path / "xquic-smoke.sqlite", "SELECT impls_json FROM campaigns")[0]["impls_json"])
    assert re.match(r"xquic d67938db7\w+, fecbench.patch sha256 \w{64}", impls["xquic"]["version"])


def test_smoke_two_paths(tmp_path: Path) -> None:
    """Multipath runs carry packets on both paths (the droppers' counts and XQUIC's own); the
    single-path label stays on path 1; with FEC, repairs go out (on the standby path 2). Every run keeps
    its qlog (--capture qlog=all): XQUIC's text events converted to JSON-SEQ that the qlog reader parses
    whole, with packets sent on both paths and the recovery metrics."""
    db = tmp_path / "xquic-multipath-smoke.sqlite"
    runs = _run(ROOT / "designs" / "xquic-multipath-smoke.toml", db, "--capture", "qlog=all")
    assert len(runs) == 6 and {r["status"] for r in runs} == {"ok"}, [(r["label"], r["error"]) for r in runs]
    traffic = tables.path_traffic(db)
    down = traffic.pivot_table(index="key", columns="path", values="packets_down")
    for run in runs:
        metrics = json.loads(run["metrics_json"])
        assert run["bytes_app"] == 200_000
        if run["label"] == "xquic-sp":
            assert down.loc[run["key"], 2] == 0 and "sender_path2_sent" not in metrics
        else:
            assert down.loc[run["key"], 2] > 0 and metrics["sender_path2_sent"] > 0, (run["label"], metrics)
    assert all(r["repair_sent"] > 0 for r in runs if r["label"] == "xquic-mp-fec-rs")
    _check_qlogs(db, runs)


def _check_qlogs(db: Path, runs: list[dict]) -> None:
    artifacts = rows(db, "SELECT run_key, kind, path FROM artifacts WHERE kind = 'qlog'")
    root = db.with_name(f"{db.stem}.artifacts")
    for run in runs:
        files = [root / a["path"] for a in artifacts if a["run_key"] == run["key"]]
        traces = {t.vantage: t for f in files for t in qlog.read(f)}
        assert set(traces) == {"client", "server"}, (run["label"], files)
        sender = traces["server"]          # a download: the server sends the data
        assert sender.skipped == 0 and {"transport:packet_sent", "recovery:metrics_updated"} <= set(sender.names)
        sent = sender.events[sender.events["kind"] == "sent"]
        assert sent["bytes"].sum() > 200_000 and (sender.events["cwnd"] > 0).any()
        assert set(sent["path"]) == ({1} if run["label"] == "xquic-sp" else {1, 2}), run["label"]
        # each path's congestion controller on its own panel (fecbench.patch: the metrics line names its path)
        updated = sender.events.loc[sender.events["kind"] == "metrics", "path"]
        assert updated.notna().all() and set(updated) == ({1} if run["label"] == "xquic-sp" else {1, 2}), \
            (run["label"], updated.value_counts(dropna=False).to_dict())


def test_upload_and_missing_server(tmp_path: Path) -> None:
    """An upload is ok with the bytes the server read; the same client against a server that is not
    there exits 0 (when its idle timeout, here 3 s, comes before the design's timeout_s), but its run
    is `failed` with the client's own reason."""
    impls = tmp_path / "impls" / "xquic-noserver"
    impls.mkdir(parents=True)
    text = (XQUIC_DIR / "impl.toml").read_text()
    text = text.replace('"build/bin/', f'"{XQUIC_DIR}/build/bin/')
    # The server: a process that is up (so the run goes ahead) but no QUIC server.
    text, n = re.subn(r'(?ms)^argv = \["\{binary\}", "-a".*?\]\nready = .*?\n',
                      'argv = ["sleep", "60"]\nready_delay_s = 0.2\n', text)
    assert n == 1
    (impls / "impl.toml").write_text(text)
    impls = [("xquic", "xquic-fec-xor", {"fec": "xor", "fec_block": "4"}),
             ("xquic-noserver", "no-server", {"idle_timeout": "3"})]
    design = design_file(tmp_path / "upload.toml", "xquic-upload", seed=7, timeout_s=20,
                         settings={"impl_dirs": [tmp_path / "impls"]}, method="list", file="points.csv",
                         factors={"bw": (5, 20), "owd": (1, 10), "p": (0, 0.05)}, loss=UNIFORM_P,
                         workload={"kind": "upload", "sizes": ["30kB"]}, impls=impls)
    (tmp_path / "points.csv").write_text("bw,owd,p\n10,5,0.02\n")
    runs = {r["label"]: r for r in _run(design, tmp_path / "upload.sqlite")}
    upload = runs["xquic-fec-xor"]
    assert upload["status"] == "ok" and upload["bytes_app"] == 30_000 and upload["dct_ms"] > 0, upload["error"]
    assert upload["repair_sent"] > 0  # the client sent them: it is the upload's sender
    missing = runs["no-server"]
    assert missing["status"] == "failed"
    assert "reported an error: connection closed before the last response completed (handshake not completed" \
        in missing["error"], missing["error"]
