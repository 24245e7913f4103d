"""`fecbench run designs/smoke.toml --capture all` (issue 34's test of done): every run keeps a qlog of each
endpoint that parses whole, with the fields qlog requires and fecq's FEC events on the FEC label, and packet
captures in which tshark decodes the QUIC frames of the run's connection from the file alone (the TLS
secrets embedded); `fecbench explain` draws one of its runs. Real Mininet, droppers, fecq and tshark."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fecbench.analysis.traces import qlog
from tests.helpers.campaign import ROOT, fecbench, rows

pytestmark = [pytest.mark.require_root, pytest.mark.slow]

ACKS, STREAMS = {0x02, 0x03}, set(range(0x08, 0x10))   # ACK, ACK with ECN counts (quinn's)
FEC_EVENTS = {"fecq:repair_sent"}
DISSECTOR = ROOT / "quic-impls" / "fecq" / "wireshark" / "fecq.lua"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], dict[str, list[Path]], dict]:
    assert shutil.which("tshark"), "tshark is missing: make apt"
    db = tmp_path_factory.mktemp("capture-smoke") / "smoke.sqlite"
    out = fecbench("run", str(ROOT / "designs" / "smoke.toml"), "--db", str(db), "--capture", "all", timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    runs = rows(db, "SELECT key, label, size, status, point, repetition FROM runs")
    root = db.with_name(f"{db.stem}.artifacts")
    files: dict[str, list[Path]] = {}
    for row in rows(db, "SELECT run_key, kind, path FROM artifacts"):
        files.setdefault(row["run_key"], []).append(root / row["path"])
    from fecbench.runners.experiment.prepare import prepare

    prepared = prepare(ROOT / "designs" / "smoke.toml")
    ports = {r.key: prepared.design.port + r.index % 1000 for r in prepared.runs}
    return db, runs, files, ports


def _records(path: Path) -> list[dict]:
    """Every record of a JSON-SEQ qlog, each parsed on its own (one that does not parse fails the test)."""
    text = gzip.decompress(path.read_bytes()).decode()
    return [json.loads(chunk) for chunk in text.split("\x1e") if chunk.strip()]


def test_every_run_keeps_a_valid_qlog_of_each_endpoint(smoke) -> None:
    _, runs, files, _ = smoke
    assert len(runs) == 16 and {r["status"] for r in runs} == {"ok"}, runs
    for run in runs:
        qlogs = [f for f in files[run["key"]] if qlog.is_qlog(f)]
        vantages = set()
        names: set[str] = set()
        for path in qlogs:
            header, *events = _records(path)
            # qlog 0.3 (quinn) names its format and version; the newer layout (noq) its file schema
            assert header.get("qlog_format", header.get("serialization_format", "")).endswith("JSON-SEQ") or \
                "json-seq" in header.get("serialization_format", ""), path
            assert header.get("qlog_version") or header.get("file_schema"), path
            vantage = header["trace"]["vantage_point"]["type"]
            vantages.add(vantage)
            for event in events:
                assert isinstance(event["time"], (int, float)) and ":" in event["name"], (path, event)
                assert isinstance(event["data"], dict), (path, event)
                names.add(event["name"])
            [trace] = qlog.read(path)
            assert trace.skipped == 0 and trace.vantage == vantage
        assert vantages == {"client", "server"}, (run["label"], qlogs)
        assert {"quic:packet_sent", "transport:packet_sent"} & names, names
        if run["label"] == "quic-fec-rs" and run["size"] >= 50_000:
            assert FEC_EVENTS <= names, (run["key"], sorted(names))
        if run["label"] == "quic":   # no FEC: no FEC events, but each datagram and where the transfer ended
            assert not FEC_EVENTS & names, sorted(names)
            assert {"fecq:datagram_sent", "fecq:transfer_over"} <= names, sorted(names)


def test_every_run_keeps_captures_tshark_decodes(smoke) -> None:
    _, runs, files, ports = smoke
    for run in runs:
        captures = {p.name.split(".pcapng")[0]: p for p in files[run["key"]] if ".pcapng" in p.name}
        assert set(captures) == {"client", "bottleneck-bottleneck"}, captures
        for where, path in captures.items():
            # With FEC, fecq frames each datagram (a source id before the QUIC packet, a 1-byte plain header
            # before a packet it does not protect, or a repair): its dissector hands the QUIC packets on
            # (quic-impls/fecq/wireshark/fecq.lua).
            fec = run["label"] == "quic-fec-rs"
            decode = ["-X", f"lua_script:{DISSECTOR}", "-d", f"udp.port=={ports[run['key']]},fecq"] if fec else \
                ["-d", f"udp.port=={ports[run['key']]},quic"]
            shown = ["-e", "quic.frame_type", *(["-e", "fecq.kind"] if fec else [])]
            out = subprocess.run(["tshark", "-r", str(path), *decode, "-T", "fields", *shown],
                                 capture_output=True, text=True, timeout=60, check=True).stdout
            fields = [line.split("\t") for line in out.splitlines()]
            types = {int(t, 0) for line in fields for t in line[0].split(",") if t}
            assert types & ACKS and types & STREAMS, (run["label"], where, sorted(types))
            if fec and run["size"] >= 50_000:
                assert {"1", "3"} <= {line[1] for line in fields if len(line) > 1}, (where, "sources and RS repairs")
            if fec:
                # --fec-protect stream (fecq's default): the handshake and ACK-only packets go out plain.
                assert "5" in {line[1] for line in fields if len(line) > 1}, (where, "plain datagrams")


def test_explain_draws_a_run_of_the_campaign(smoke, tmp_path: Path) -> None:
    db, runs, _, _ = smoke
    run = next(r for r in runs if r["label"] == "quic-fec-rs" and r["size"] >= 50_000)
    out = fecbench("explain", str(db), run["key"][:12], "-o", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / f"{run['key'][:12]}-timeline.png").read_bytes()[:4] == b"\x89PNG"
    summary = (tmp_path / f"{run['key'][:12]}-summary.txt").read_text()
    assert "repairs sent" in summary
