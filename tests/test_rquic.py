"""rQUIC (Zverev et al. 2021, the paper's own code: quic-impls/rquic/) plugged in by its descriptor alone: the
argv it renders, its program's own checks and exit statuses, `fecbench impls check` on the build `make rquic`
made (make test runs it first), and its smoke design end to end on a real network (a download with and
without rQUIC's FEC under loss, every run's qlog kept and read back)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from fecbench.analysis.traces import qlog
from fecbench.inputs.errors import SpecError
from fecbench.runners.experiment.argv_template import render
from fecbench.runners.experiment.descriptor import load_descriptor
from tests.helpers.campaign import ROOT, fecbench, rows

RQUIC_DIR = ROOT / "quic-impls" / "rquic"
BINARY = RQUIC_DIR / "build" / "bin" / "rquic-fecbench"
RQUIC = load_descriptor(RQUIC_DIR / "impl.toml")
VALUES = {"binary": "/b", "dir": "/d", "server_address": "10.0.9.2", "client_address": "10.0.1.1",
          "client_addresses": "10.0.1.1", "server_addresses": "10.0.9.2", "port": 4433, "size": 300000,
          "workload": "download", "metrics_path": "/r/m.json", "run_dir": "/r", "timeout_s": "30"}


def built() -> Path:
    if not BINARY.exists():
        pytest.skip(f"rQUIC is not built ({BINARY} is missing): `make rquic` (make test runs it)")
    return BINARY


def argv(**args: str) -> tuple[list[str], list[str]]:
    lists = RQUIC.arg_lists(RQUIC.validate_args(args, "design.toml", "impl"), VALUES)
    return render(RQUIC.server_argv, VALUES, lists), render(RQUIC.client_argv["download"], VALUES, lists)


def test_descriptor_argv() -> None:
    """Without FEC both ends run rQUIC off (the baseline from the same binary); FEC options go to both ends;
    each end's rQUIC configuration is written into the run's own folder."""
    assert RQUIC.workloads == ["download", "page"] and not RQUIC.multipath and RQUIC.codes == ["none", "xor", "rlc"]
    server, client = argv()
    assert server == ["/b", "server", "--listen", "10.0.9.2:4433", "--workload", "download", "--timeout", "30",
                      "--conf", "/r/rquic-server.json", "--fec", "none"]
    assert client == ["/b", "client", "--server", "10.0.9.2:4433", "--workload", "download", "--size", "300000",
                      "--out", "/r/m.json", "--timeout", "30", "--conf", "/r/rquic-client.json", "--fec", "none"]
    server, client = argv(fec="xor", ratio="4", dynamic="off", tperiod_ms="300")
    for side in (server, client):
        assert side[-8:] == ["--fec", "xor", "--ratio", "4", "--dynamic", "off", "--tperiod-ms", "300"]
    for bad in ({"ratio": "1"}, {"ratio": "64"}, {"fec": "rs"}, {"dynamic": "yes"}, {"reduns": "9"}):
        with pytest.raises(SpecError):
            argv(**bad)
    capture = RQUIC.capture.fragments(True, {"qlog_dir_server": "/q/s", "qlog_dir_client": "/q/c",
                                             "keylog_file_server": "/k/s", "keylog_file_client": "/k/c"})
    assert capture == {"server_args": ["--qlog-dir", "/q/s", "--keylog-file", "/k/s"],
                       "client_args": ["--qlog-dir", "/q/c", "--keylog-file", "/k/c"]}
    assert RQUIC.capture.fragments(False, {}) == {"server_args": [], "client_args": []}


def test_program_checks_and_exit_statuses(tmp_path: Path) -> None:
    """check-args accepts what rQUIC would use as asked and refuses the rest (exit 2, naming the value); a
    workload other than download is unsupported (127), before anything is opened."""
    binary = str(built())

    def run(*args: str) -> SimpleNamespace:
        out = subprocess.run([binary, *args], capture_output=True, text=True, timeout=30, check=False)
        return SimpleNamespace(code=out.returncode, text=out.stdout + out.stderr)

    ok = run("check-args", "server", "--fec", "xor", "--ratio", "4", "--dynamic", "off")
    assert ok.code == 0, ok.text
    refused = run("check-args", "client", "--fec", "xor", "--reduns", "2")
    assert refused.code == 2 and "--reduns must be 1 with --fec xor" in refused.text
    refused = run("check-args", "server", "--gamma", "2")
    assert refused.code == 2 and "--gamma" in refused.text
    assert run("check-args", "client", "--fec", "xor", "--bto-rtts", "1").code == 0
    refused = run("check-args", "client", "--fec", "xor", "--bto-ms", "100", "--bto-rtts", "1")
    assert refused.code == 2 and "--bto-ms and --bto-rtts set the same timeout" in refused.text
    unsupported = run("client", "--server", "192.0.2.1:9", "--size", "1", "--out", str(tmp_path / "m.json"),
                      "--workload", "upload")
    assert unsupported.code == 127 and "not supported" in unsupported.text
    assert run("--version").text.startswith("rquic-fecbench rquic f6427deb6d07")
    page = run("client", "--server", "192.0.2.1:9", "--workload", "page", "--out", str(tmp_path / "m.json"))
    assert page.code == 2 and "--page FILE is required" in page.text
    (tmp_path / "bad.json").write_text('{"format": "fecbench-page-1", "activities": [{"id": "a", "kind": "x"}]}')
    page = run("client", "--server", "192.0.2.1:9", "--workload", "page", "--page", str(tmp_path / "bad.json"),
               "--out", str(tmp_path / "m.json"))
    assert page.code == 2 and "kind download or compute" in page.text


def test_impls_check_lists_the_build() -> None:
    """`fecbench impls check` finds the built program and records its version (the pinned commit, the hashes
    of the patch, our endpoints and the build script, Debian's Go package)."""
    built()
    out = fecbench("impls", "check")
    line = next((ln for ln in out.stdout.splitlines() if "rquic:" in ln), "")
    assert line.startswith("✓ rquic: rquic-fecbench rquic f6427deb6d07, fecbench.patch "), out.stdout[-2000:]
    assert "go 1.15.15-1~deb11u4" in out.stdout


@pytest.mark.require_root
def test_client_gives_up_at_its_timeout(tmp_path: Path) -> None:
    """No server answers (a network namespace of the test's own, loopback only): the client gives up at
    --timeout with exit status 124 and writes what it measured, `timed_out` true."""
    binary = built()
    out = tmp_path / "m.json"
    proc = subprocess.run(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', str(binary),
                           "client", "--server", "127.0.0.1:9", "--size", "1000", "--out", str(out),
                           "--timeout", "1.5", "--fec", "xor"], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 124, proc.stdout + proc.stderr
    metrics = json.loads(out.read_text())
    assert metrics["timed_out"] is True and metrics["ok"] is False and "timed out" in metrics["error"]
    assert metrics["elapsed_ms"] >= 1500


@pytest.mark.require_root
@pytest.mark.slow
def test_smoke_download_with_and_without_fec(tmp_path: Path) -> None:
    """designs/rquic-smoke.toml: every run ok with the size received; with rQUIC's XOR the server sent coded
    packets and the client rebuilt lost ones, without it neither; every run's qlog (quic-go's, both ends)
    parses whole, with the server sending the download's packets and its congestion window, and rQUIC's own trace of
    its code ratio is kept beside it."""
    built()
    db = tmp_path / "rquic-smoke.sqlite"
    out = fecbench("run", str(ROOT / "designs" / "rquic-smoke.toml"), "--db", str(db), "--capture", "qlog=all")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = rows(db, "SELECT r.*, m.dct_ms, m.bytes_app, m.packets_sent, m.repair_sent, m.recovered, m.lost, "
                    "m.json AS metrics_json FROM runs r LEFT JOIN metrics m ON m.run_key = r.key "
                    "ORDER BY r.point, r.label")
    assert len(runs) == 4 and {r["status"] for r in runs} == {"ok"}, [(r["label"], r["error"]) for r in runs]
    for run in runs:
        metrics = json.loads(run["metrics_json"])
        assert run["bytes_app"] == 300_000 and 0 < run["dct_ms"] and metrics["handshake_ms"] > 0
        # 300 kB in packets of 1,252 bytes at most; datagrams and bytes as the server's socket wrote them
        assert metrics["server"]["quic_packets_sent"] >= 240, metrics
        assert run["packets_sent"] == metrics["server"]["datagrams_sent"] and metrics["bytes_sent"] > 300_000
        if run["label"] == "rquic":
            assert run["repair_sent"] == 0 and run["recovered"] == 0 and metrics["fec"] == "none"
        else:
            assert run["repair_sent"] > 0 and metrics["repair_received"] > 0, metrics
            assert run["recovered"] > 0, metrics   # 4-6 % of ~250 packets lost: some rebuilt by XOR
            assert run["packets_sent"] >= 240 + run["repair_sent"]   # coded packets are datagrams of their own
            assert 2 <= metrics["coding_ratio_mean"] <= 63
    version = json.loads(rows(db, "SELECT impls_json FROM campaigns")[0]["impls_json"])["rquic"]["version"]
    assert version.startswith("rquic-fecbench rquic f6427deb6d07")
    _check_qlogs(db, runs)


def _check_qlogs(db: Path, runs: list[dict]) -> None:
    artifacts = rows(db, "SELECT run_key, kind, path FROM artifacts")
    root = db.with_name(f"{db.stem}.artifacts")
    for run in runs:
        mine = [root / a["path"] for a in artifacts if a["run_key"] == run["key"]]
        traces = {t.vantage: t for f in mine if qlog.is_qlog(f) for t in qlog.read(f)}
        assert set(traces) == {"client", "server"}, (run["label"], mine)
        sender = traces["server"]
        assert sender.skipped == 0 and {"transport:packet_sent", "recovery:metrics_updated"} <= set(sender.names)
        # quic-go's draft-02 qlog gives a packet's size as header.packet_size, which the reader does not take
        # (its bytes are NaN): the download's packets are counted instead.
        sent = sender.events[sender.events["kind"] == "sent"]
        assert len(sent) >= 240 and (sender.events["cwnd"] > 0).any()
        names = {f.name for f in mine}
        assert {"server_rquic.csv.gz", "client_rquic.csv.gz", "client.keys.gz", "server.keys.gz"} <= names, names


@pytest.mark.require_root
def test_page_loads_with_and_without_fec(tmp_path: Path) -> None:
    """A page of the corpus loaded by rQUIC's own stack with and without its coding, under loss: every run ok,
    every object of the page downloaded (its bytes verified), the load time the critical path's end."""
    from fecbench.pages import corpus
    from tests.helpers.designs import design_file

    built()
    graph, _ = corpus.resolve("corpus:nghttp2.org", Path("unused"))
    factors = {"bw": {"levels": [10], "unit": "Mbit/s"}, "owd": {"levels": [20], "unit": "ms"},
               "p": {"levels": [0.0, 0.03]}}
    design = design_file(tmp_path / "pages.toml", seed=70, timeout_s=60, method="factorial", factors=factors,
                         loss={"model": "uniform", "p": "p"}, workload={"kind": "page", "page": "corpus:nghttp2.org"},
                         impls=[("rquic", "rquic", {"fec": "none"}), ("rquic", "rquic-xor", {"fec": "xor"})])
    db = tmp_path / "pages.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = rows(db, "SELECT r.label, r.status, r.error, m.dct_ms, m.bytes_app, m.json FROM runs r "
                    "LEFT JOIN metrics m ON m.run_key = r.key")
    assert len(runs) == 4 and [r for r in runs if r["status"] != "ok"] == []
    for run in runs:
        page = json.loads(run["json"])["page"]
        assert run["bytes_app"] == graph.app_bytes() and page["load_ms"] == run["dct_ms"]
        ends = [a["end_ms"] for a in page["activities"]]
        assert len(ends) == len(graph.activities) and max(ends) == pytest.approx(run["dct_ms"])


@pytest.mark.require_root
def test_buffer_timeout_is_the_one_asked(tmp_path: Path) -> None:
    """`bto_ms` / `bto_rtts` (fecbench.patch) set the decoder's buffer timeout: the same lossy download with a 1 ms BTO
    releases packets from the buffer by its timeout far more often than with 3 s (counted by the patch:
    bto_releases); the metrics say which rule ran."""
    from tests.helpers.designs import design_file

    built()
    factors = {"bw": {"levels": [10], "unit": "Mbit/s"}, "owd": {"levels": [50], "unit": "ms"}, "p": {"levels": [0.03]}}
    labels = {"bto-1ms": {"bto_ms": "1"}, "bto-3s": {"bto_ms": "3000"}, "bto-rtt": {"bto_rtts": "1"}}
    design = design_file(tmp_path / "bto.toml", seed=13, timeout_s=60, method="factorial", factors=factors,
                         loss={"model": "uniform", "p": "p"}, workload={"kind": "download", "sizes": ["2MiB"]},
                         repetitions=2,
                         impls=[("rquic", label, {"fec": "xor", **args}) for label, args in labels.items()])
    db = tmp_path / "bto.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = rows(db, "SELECT r.label, r.status, m.json FROM runs r LEFT JOIN metrics m ON m.run_key = r.key")
    assert len(runs) == 6 and [r for r in runs if r["status"] != "ok"] == []
    released = {label: 0 for label in labels}
    for run in runs:
        metrics = json.loads(run["json"])
        released[run["label"]] += metrics["bto_releases"]
        said = {"bto-1ms": "BTO 1 ms", "bto-3s": "BTO 3000 ms", "bto-rtt": "BTO 1 RTT"}[run["label"]]
        assert metrics["rquic"].endswith(said) or said + " (" in metrics["rquic"], metrics["rquic"]
    assert released["bto-1ms"] >= 10 and released["bto-1ms"] > 5 * max(1, released["bto-3s"]), released
