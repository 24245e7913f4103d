"""Packet captures of runs (fecbench.runners.run.pcap, fecbench.emulation.pcap): where tcpdump listens and with
what arguments, the runner's order (captures before the server, stopped after the client), key logs asked for
with a capture, the secrets embedded; and a real campaign over Mininet with tquic (single path and two paths)
whose kept captures tshark decodes into QUIC frames, at the client and at the bottleneck."""

from __future__ import annotations

import csv
import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from fecbench.emulation import load_topology
from fecbench.emulation.layout import make_layout
from fecbench.emulation.pcap import capture_points, comment, packet_bound, tcpdump_argv
from fecbench.inputs.errors import UserError
from fecbench.runners.experiment.capture import CaptureArgs, CapturePolicy, parse_option
from fecbench.runners.run import pcap
from tests.helpers.campaign import ROOT, fecbench, rows
from tests.helpers.designs import MULTIPATH, design_file

TQUIC = ROOT / "quic-impls" / "tquic" / "build" / "bin" / "tquic_client"
ACK, CRYPTO, STREAMS = 0x02, 0x06, set(range(0x08, 0x10))


# --- pure logic ---------------------------------------------------------------------------------------

def test_capture_points_client_every_path_and_each_bottleneck() -> None:
    topo = load_topology(ROOT / "topologies" / "multipath.toml")
    layout = make_layout(topo, "fbX")
    points = {p.where: p for p in capture_points(layout, topo.client)}
    assert set(points) == {"client", "bottleneck-path1", "bottleneck-path2"}
    assert points["client"].interfaces == tuple(i.name for i in layout.nodes["client"].ifaces)
    assert len(points["client"].interfaces) == 2
    dn = layout.delay_nodes["path2"]
    assert points["bottleneck-path2"].node == dn.name
    assert points["bottleneck-path2"].interfaces == (dn.toward_a, dn.toward_b)   # both directions, both sides
    single = load_topology(ROOT / "topologies" / "single.toml")
    assert [p.where for p in capture_points(make_layout(single, "fbY"), single.client)] == \
        ["client", "bottleneck-bottleneck"]


def test_tcpdump_arguments_snaplen_packet_bound_file_and_comment() -> None:
    argv = tcpdump_argv(Path("/r/pcap/x.pcap"), 65535, 7000)
    assert argv[0] == "tcpdump" and argv[argv.index("-i") + 1] == "any" and "--immediate-mode" in argv
    assert argv[argv.index("-s") + 1] == "65535" and argv[argv.index("-c") + 1] == "7000"
    assert argv[-2:] == ["-w", "/r/pcap/x.pcap"] and tcpdump_argv(Path("x"), 64, 0)[argv.index("-c") + 1] == "1"
    # the bound: whole frames of these links (MTU 1500, cooked header, record header), or snaplen when shorter
    assert packet_bound(1536, 65535) == 1000 and packet_bound(80, 64) == 1000 and packet_bound(0, 64) == 1
    topo = load_topology(ROOT / "topologies" / "single.toml")
    point = capture_points(make_layout(topo, "fbX"), topo.client)[1]
    text = comment(point, {point.interfaces[0]: 2, point.interfaces[1]: 3}, "fecbench run k: ")
    assert text.startswith("fecbench run k: bottleneck-bottleneck (sll.pkttype 3: arriving, 4: leaving)")
    assert f"sll.ifindex 2 = {point.interfaces[0]}: bottleneck of link bottleneck, facing the client side" in text


def test_budget_is_what_max_mb_has_left() -> None:
    assert pcap.budget_kb(500, 0) == 500_000
    assert pcap.budget_kb(1, 999_000) == 1
    assert pcap.budget_kb(1, 2_000_000) == 0
    assert CapturePolicy().snaplen == 65535   # whole packets: QUIC's AEAD decrypts only whole packets


def test_key_logs_asked_for_with_a_capture_without_qlog() -> None:
    args = CaptureArgs(qlog={"client": ["--qlog-dir", "{qlog_dir}"]},
                       keylog={"client": ["--keylog-file", "{keylog_file}"]}, off={"client": ["--no-qlog"]})
    values = {"keylog_file_client": "/r/keys/client.keys", "qlog_dir_client": "/r/qlog/client"}
    assert args.fragments(False, values)["client_args"] == ["--no-qlog"]
    assert args.fragments(False, values, keys=True)["client_args"] == ["--no-qlog", "--keylog-file",
                                                                        "/r/keys/client.keys"]
    assert args.fragments(True, values)["client_args"] == ["--qlog-dir", "/r/qlog/client", "--keylog-file",
                                                           "/r/keys/client.keys"]


def test_merged_key_log_editcap_arguments_and_notes(tmp_path: Path) -> None:
    (tmp_path / "c.keys").write_text("CLIENT_TRAFFIC_SECRET_0 aa bb\n# comment\n\nSERVER_TRAFFIC_SECRET_0 aa cc\n")
    (tmp_path / "s.keys").write_text("SERVER_TRAFFIC_SECRET_0 aa cc\n")
    merged = pcap.merged_key_log([tmp_path / "c.keys", tmp_path / "s.keys", tmp_path / "gone.keys"],
                                 tmp_path / "all.keylog")
    assert merged is not None and merged.read_text().splitlines() == ["CLIENT_TRAFFIC_SECRET_0 aa bb",
                                                                      "SERVER_TRAFFIC_SECRET_0 aa cc"]
    assert pcap.merged_key_log([tmp_path / "gone.keys"], tmp_path / "none.keylog") is None
    assert pcap.editcap_argv(Path("a.pcapng"), Path("k"), Path("b")) == [
        "editcap", "--inject-secrets", "tls,k", "a.pcapng", "b"]
    (tmp_path / "pcap").mkdir()
    (tmp_path / "pcap" / "client.pcapng").write_bytes(b"")
    assert "no TLS key log" in pcap.embed_secrets(tmp_path, [])[0]
    kept = [{"kind": "pcap", "path": "k/client.pcapng.gz", "why": "policy"},
            {"kind": "pcap", "path": "k/bottleneck-l.pcapng.gz", "why": "failed"}, {"kind": "qlog", "path": "q"}]
    pcap.annotate(kept, ["capture client stopped before the run's end (at its size bound)"])
    assert kept[0]["why"] == "policy; capture client stopped before the run's end (at its size bound)"
    assert kept[1]["why"] == "failed" and "why" not in kept[2]


def test_campaign_refused_without_tcpdump(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "tcpdump" else f"/usr/bin/{tool}")
    with pytest.raises(UserError, match="needs tcpdump.*tcpdump and tshark"):
        pcap.require_tools(parse_option("pcap=sample:2", CapturePolicy()))
    pcap.require_tools(CapturePolicy())   # pcap off: nothing needed


@pytest.mark.parametrize("rule", ["all", "off"])
def test_runner_captures_from_before_the_server_to_after_the_client(tmp_path: Path, rule: str) -> None:
    from fecbench.runners.experiment.prepare import prepare
    from fecbench.runners.run.lifecycle import Runner
    from tests.helpers.campaign import fake_design
    from tests.helpers.fake_testbed import FakeTestbed

    prepared = prepare(fake_design(tmp_path / "d.toml", {"q": {}}, points=1))
    prepared.design.capture = parse_option(f"pcap={rule},qlog=off", prepared.design.capture)
    run = prepared.runs[0]
    testbed = FakeTestbed(prepared.topology, run.values, None)
    runner = Runner(prepared, testbed, tmp_path / f"{rule}.logs")
    outcome = runner.execute(run)
    assert outcome.status == "ok", outcome.error
    if rule == "off":
        assert [kind for kind, _ in testbed.captures] == ["process", "process"]
        return
    assert [kind for kind, _ in testbed.captures] == ["start", "process", "process", "stop"]
    assert [what for kind, what in testbed.captures if kind == "process"] == [("server", True), ("client", True)]
    folder, snaplen, budget = testbed.captures[0][1]
    assert folder == tmp_path / f"{rule}.logs" / run.key[:16] / "pcap" and snaplen == 65535 and budget == 500_000


# --- a real campaign ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Path]], dict[str, int]]:
    """The campaign, with every run's capture kept: database, {label: {where: kept file}}, {label: port}."""
    import os

    if os.geteuid() != 0:
        pytest.skip("a real campaign needs root (network namespaces, BPF, Mininet)")
    assert TQUIC.exists(), f"{TQUIC} is missing: build it with `make native`"
    assert shutil.which("tshark"), "tshark is missing: make apt"
    folder = tmp_path_factory.mktemp("pcap")
    factors = {"bw": {"value": 10, "unit": "Mbit/s", "per_path": True},
               "owd": {"value": 5, "unit": "ms", "per_path": True}, "p": {"value": 0.01, "per_path": True}}
    impls = [("tquic", "tquic-sp", {"multipath": "off"}), ("tquic", "tquic-mp", {"multipath": "on"})]
    design = design_file(folder / "pcap-real.toml", topology=MULTIPATH, seed=11, timeout_s=20,
                         settings={"fidelity": "off"}, method=None, factors=factors,
                         loss={"model": "uniform", "p": "p_{path}"}, workload={"kind": "download", "sizes": ["100kB"]},
                         impls=impls)
    db = folder / "pcap-real.sqlite"
    out = fecbench("run", str(design), "--db", str(db), "--capture", "pcap=all,qlog=off", timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    from fecbench.runners.experiment.prepare import prepare

    prepared = prepare(design)
    ports = {r.label: prepared.design.port + r.index % 1000 for r in prepared.runs}
    runs = {r["key"]: r for r in rows(db, "SELECT key, label, status, error FROM runs")}
    assert {r["status"] for r in runs.values()} == {"ok"}, runs
    export = folder / "artifacts.csv"
    done = fecbench("export", str(db), "--table", "artifacts", "-o", str(export))
    assert done.returncode == 0, done.stderr
    with export.open() as handle:
        listed = list(csv.DictReader(handle))
    files: dict[str, dict[str, Path]] = {}
    for row in listed:
        path = Path(row["file"])
        files.setdefault(runs[row["run_key"]]["label"], {})[path.name.split(".pcapng")[0]] = path
        assert row["kind"] == "pcap" and path.name.endswith(".pcapng.gz") and int(row["bytes"]) == path.stat().st_size
        assert path.read_bytes()[:2] == b"\x1f\x8b"                       # stored compressed
        assert gzip.decompress(path.read_bytes())[:4] == b"\x0a\x0d\x0d\x0a"   # a pcapng
    return db, files, ports


def _frames(path: Path, port: int, shown: str = "quic", by: str = "sll.ifindex") -> list[tuple[int, set[int]]]:
    """(interface index or `by`, QUIC frame types) of each packet tshark decodes from the file alone (the
    secrets are embedded)."""
    out = subprocess.run(["tshark", "-r", str(path), "-d", f"udp.port=={port},quic", "-Y", shown, "-T", "fields",
                          "-e", by, "-e", "quic.frame_type"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    found = []
    for line in out.splitlines():
        iface, _, types = line.partition("\t")
        found.append((int(iface), {int(t, 0) for t in types.split(",") if t}))
    return found


def _decoded(frames: list[tuple[int, set[int]]], iface: int | None = None) -> set[int]:
    return set().union(*(types for i, types in frames if iface is None or i == iface))


def _comment(path: Path) -> str:
    return subprocess.run(["capinfos", "-k", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.mark.require_root
@pytest.mark.slow
def test_kept_captures_decode_at_the_client_and_the_bottleneck(captured) -> None:
    db, files, ports = captured
    assert set(files) == {"tquic-sp", "tquic-mp"}
    # every capture point the run's packets crossed (a single-path run never uses path 2: no file there)
    assert set(files["tquic-mp"]) == {"client", "bottleneck-path1", "bottleneck-path2"}
    assert set(files["tquic-sp"]) == {"client", "bottleneck-path1"}
    # The secrets are embedded: no key log needed (none kept beside the captures).
    assert [r for r in rows(db, "SELECT kind FROM artifacts") if r["kind"] != "pcap"] == []
    sp, port = files["tquic-sp"], ports["tquic-sp"]
    client = _frames(sp["client"], port)
    assert {ACK, CRYPTO} <= _decoded(client) and _decoded(client) & STREAMS, client[:5]
    assert "client: sll.ifindex" in _comment(sp["client"])
    bottleneck = _frames(sp["bottleneck-path1"], port, by="sll.pkttype")
    for direction in (3, 4):   # each packet on arrival and on departure
        assert {ACK, CRYPTO} <= _decoded(bottleneck, direction) and _decoded(bottleneck, direction) & STREAMS
    assert len({i for i, _ in _frames(sp["bottleneck-path1"], port, shown="udp")}) == 2   # both interfaces


@pytest.mark.require_root
@pytest.mark.slow
def test_multipath_captures_every_path(captured) -> None:
    """Two paths: the client's capture holds both interfaces, each bottleneck its path's packets. Wireshark 4.0
    decrypts the first path's packets only: draft-ietf-quic-multipath puts the path into the AEAD nonce."""
    _, files, ports = captured
    mp, port = files["tquic-mp"], ports["tquic-mp"]
    paths = {i for i, _ in _frames(mp["client"], port, shown="udp")}
    assert len(paths) == 2, paths
    decoded = _frames(mp["client"], port)
    assert {ACK, CRYPTO} <= _decoded(decoded) and _decoded(decoded) & STREAMS
    for where in ("bottleneck-path1", "bottleneck-path2"):
        assert {i for i, _ in _frames(mp[where], port, shown="udp", by="sll.pkttype")} == {3, 4}, where
