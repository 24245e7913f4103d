"""Multipath fecq (noq under the FEC layer) through the campaign runner: a real 2-path Mininet
topology with a different seeded loss process on each path, and the checks a design gets before
anything runs (multipath arguments the topology cannot satisfy are exit 2, nothing written)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.campaign import CLIENT_PACKETS_AFTER_COUNTERS, FECQ, ROOT, fecbench, rows
from tests.helpers.designs import design_file, per_path

MULTIPATH_TOPOLOGY = ROOT / "topologies" / "multipath.toml"
SINGLE_TOPOLOGY = ROOT / "topologies" / "single.toml"


def _design(tmp_path: Path, *, topology: Path, args: str, points: str, name: str = "fecqmp",
            sizes: str = '["1MB"]') -> Path:
    multipath = topology == MULTIPATH_TOPOLOGY
    factors = {"bw": (5, 20), "owd": (5, 20), "p": (0.0, 0.05)}
    if multipath:
        factors = {factor: per_path(*bounds) for factor, bounds in factors.items()}
    (tmp_path / "points.csv").write_text(points)
    return design_file(tmp_path / f"{name}.toml", topology=topology, seed=13, timeout_s=60,
                       settings={"fidelity": "off"}, method="list", file="points.csv", factors=factors,
                       loss={"model": "uniform", "p": "p_{path}" if multipath else "p"},
                       workload=f'kind = "download"\nsizes = {sizes}', impls=[("fecq", "fecq-mp", args)])


@pytest.mark.parametrize(("topology", "args", "expect"), [
    (MULTIPATH_TOPOLOGY, 'multipath = "on", scheduler = "minrtt"', "unknown value 'minrtt'"),
    (MULTIPATH_TOPOLOGY, 'multipath = "on", paths = 3', "3 paths asked for, the topology has 2"),
    (SINGLE_TOPOLOGY, 'multipath = "on"', "is multipath"),
    (MULTIPATH_TOPOLOGY, 'multipath = "on", repair_path = "elsewhere"', "unknown value 'elsewhere'"),
])
def test_bad_multipath_input_is_exit_2_before_the_campaign(tmp_path: Path, topology: Path, args: str,
                                                           expect: str) -> None:
    points = ("bw_1,bw_2,owd_1,owd_2,p_1,p_2\n10,10,10,10,0,0\n" if topology == MULTIPATH_TOPOLOGY
              else "bw,owd,p\n10,10,0\n")
    design = _design(tmp_path, topology=topology, args=args, points=points)
    db = tmp_path / "out.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 2, out.stdout + out.stderr
    assert expect in out.stderr + out.stdout
    assert str(design) in out.stderr + out.stdout
    assert not db.exists()
    assert not (tmp_path / "out.logs").exists()


@pytest.mark.require_root
@pytest.mark.slow
def test_two_path_download_per_path_metrics_match_the_droppers(tmp_path: Path) -> None:
    """1 MB over two 10 Mbit/s paths (owd 10 and 15 ms), uniform loss 1 % on path 1 and 3 % on
    path 2, each dropper with its own stream of the run's seed; RS(30,20) per-path blocks. Both paths
    carry data (dropper counters), the bytes are verified by the client, and each path's metrics agree
    with what its droppers saw: the server's datagrams on path i are what path i's reverse dropper saw,
    the client's on path i what its forward dropper saw, and the client received at most what path i's
    dropper let through (the bottleneck queue after it may drop more)."""
    assert FECQ.exists(), "build fecq first (make fecq)"
    design = _design(tmp_path, topology=MULTIPATH_TOPOLOGY, args='multipath = "on", fec = "rs:30,20"',
                     points="bw_1,bw_2,owd_1,owd_2,p_1,p_2\n10,10,10,15,0.01,0.03\n")
    db = tmp_path / "mp.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    runs = rows(db, "SELECT r.*, m.bytes_app, m.json AS metrics_json FROM runs r JOIN metrics m ON m.run_key = r.key")
    assert len(runs) == 1
    run = runs[0]
    assert (run["status"], run["error"]) == ("ok", None)
    assert run["bytes_app"] == 1_000_000
    m = json.loads(run["metrics_json"])
    assert m["multipath"]["paths_requested"] == m["multipath"]["paths_established"] == 2
    stats = {(s["link"], s["direction"]): s
             for s in rows(db, "SELECT * FROM link_stats WHERE run_key = ?", run["key"])}
    # Each path's droppers: the run's seed, their own stream, the path's loss rate.
    models = [json.loads(stats[(f"path{i}", "reverse")]["model"]) for i in (1, 2)]
    assert [mo["params"]["p"] for mo in models] == [0.01, 0.03]
    assert {mo["seed"] for mo in models} == {run["loss_seed"]} and models[0]["stream"] != models[1]["stream"]
    assert len(m["paths"]) == 2
    recovered = 0
    for i, path in enumerate(m["paths"], start=1):
        client, server = path["client"], path["server"]
        assert path["client_address"] == client["local"] and server["remote"].startswith(client["local"] + ":")
        down, up = stats[(f"path{i}", "reverse")], stats[(f"path{i}", "forward")]
        # Both paths carry a real share of the data, and lose some of it at their dropper.
        assert down["seen"] > 100 and down["dropped"] > 0, (i, down)
        # Per-path attribution: what each side put on path i is what path i's dropper saw (the
        # server's view is read when it answers `stats`, before the reply and the close; the client's
        # before its ACK of the reply and its close: CLIENT_PACKETS_AFTER_COUNTERS).
        assert 0 <= down["seen"] - server["packets_sent"] <= 8, (i, down, server)
        assert 0 <= up["seen"] - client["packets_sent"] <= CLIENT_PACKETS_AFTER_COUNTERS, (i, up, client)
        # What path i's dropper let through reached its delay element, which lost only what the path's queue
        # refused (drop_egress; 5-23 % of it here, as fecq's window and the two paths' split vary from run to
        # run, so no share is asserted); what it forwarded is what the client received on path i, but for
        # the packets sent after the client read its counters (0-4 measured, as many as the server's).
        delay = json.loads(down["delay_json"])
        if delay["backend"] == "delayline":
            line = delay["delay"]["ba"]   # path i's reverse: r0 → ri
            assert line["rx"] == down["seen"] - down["dropped"], (i, down, line)
            assert 0 <= line["tx"] - client["packets_received"] <= 8, (i, line, client)
        assert client["packets_received"] <= down["seen"] - down["dropped"], (i, down, client)
        assert server["repair_sent"] > 0 and server["rtt_ms"] > 2 * 10
        recovered += client["recovered"]
    assert recovered == m["recovered"] > 0
    # Path 2's one-way delay is longer (15 ms against 10), but path 1's queue now holds ~5 ms more (see
    # above): the two RTTs are no longer ordered by the delays alone. Each is above its path's 2 × 10 ms.


@pytest.mark.require_root
@pytest.mark.slow
def test_path_outage_mid_download_completes_on_the_other_path(tmp_path: Path) -> None:
    """A 4 MB download over two 10 Mbit/s paths; 0.8 s in, path 2 goes dark (its droppers lose every
    packet, both directions) for good. The per-path idle timeout (1 s, kept alive by 0.2 s PINGs)
    abandons path 2 and the transfer completes on path 1: status ok, every byte verified."""
    from fecbench.dropper import Uniform
    from fecbench.emulation import Network, load_topology

    assert FECQ.exists(), "build fecq first (make fecq)"
    out = tmp_path / "m.json"
    values = {"bw_1": 10, "bw_2": 10, "owd_1": 10, "owd_2": 10}
    with Network(load_topology(MULTIPATH_TOPOLOGY), values) as net:
        port = 4777
        server = net.server.popen([str(FECQ), "server", "--listen", f"{net.server_address}:{port}", "--multipath",
                                   "--fec", "rs:30,20"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert server.stdout is not None and server.stdout.readline().startswith("listening ")
            client = net.client.popen([str(FECQ), "client", "--server", f"{net.server_address}:{port}", "--multipath",
                                       "--local-addresses", ",".join(net.client_addresses), "--fec", "rs:30,20",
                                       "--size", "4000000", "--timeout", "60", "--out", str(out)],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(0.8)
            assert client.poll() is None, "the download ended before the outage"
            for direction in ("forward", "reverse"):
                net.set_loss("path2", direction, Uniform(1.0), seed=1)
            text, _ = client.communicate(timeout=90)
            stats = {(s["link"], s["direction"]): s for s in net.link_stats()}
        finally:
            server.terminate()
            server.wait(timeout=10)
    assert client.returncode == 0, text
    m = json.loads(out.read_text())
    assert m["ok"] and m["bytes_app"] == 4_000_000
    assert m["multipath"]["paths_established"] == 2
    # Path 2 carried data before the outage, and is gone at the end (no QUIC path any more).
    path2 = m["paths"][1]
    assert path2["client"]["packets_received"] > 50
    assert path2["client"]["quic_path_id"] is None
    assert stats[("path2", "reverse")]["dropper"]["dropped"] > 0
