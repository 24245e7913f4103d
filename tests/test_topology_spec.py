"""Topology specs and plans: pure logic, no root needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fecbench.cli.topo import parse_sets
from fecbench.emulation.layout import (
    built,
    built_mismatches,
    changed_parts,
    make_layout,
    netem_limit,
    shaping_commands,
    tbf_burst,
)
from fecbench.emulation.spec import Shaping
from fecbench.emulation.topology_file import load_topology
from fecbench.inputs.errors import SpecError, UserError

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "topologies" / "single.toml"
MULTI = ROOT / "topologies" / "multipath.toml"

BASE_SPEC = """
[topology]
name = "t"
[factors]
bw = 10.0
owd = 20.0
[[node]]
name = "client"
role = "host"
[[node]]
name = "r1"
[[node]]
name = "server"
role = "host"
[[link]]
id = "a"
ends = ["client", "r1"]
[[link]]
id = "b"
ends = ["r1", "server"]
bw = "bw"
owd = "owd"
loss = true
[[path]]
nodes = ["client", "r1", "server"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_shipped_single_spec() -> None:
    topo = load_topology(SINGLE)
    assert topo.paths == 1
    assert topo.factors() == {"bw", "owd", "queue"}
    assert topo.lossy_links() == ["bottleneck"]
    shaping = topo.resolve({"bw": 10, "owd": 50})
    fwd = shaping["bottleneck"]["forward"]
    assert (fwd.bw, fwd.owd) == (10, 50)
    # One BDP, in bytes (a time of the link's rate is bytes): 10 Mbit/s × 100 ms RTT = 125,000 B.
    assert (fwd.queue, fwd.queue_unit) == (125_000, "bytes")
    assert topo.configured_rtt(0, shaping) == 100
    assert set(shaping) == {"bottleneck"}


def test_shipped_multipath_spec_and_n_paths() -> None:
    topo = load_topology(MULTI)
    assert topo.paths == 2
    assert topo.factors() == {"bw_1", "bw_2", "owd_1", "owd_2", "queue_1", "queue_2"}
    assert topo.lossy_links() == ["path1", "path2"]
    three = load_topology(MULTI, paths=3)
    assert three.paths == 3
    assert three.lossy_links() == ["path1", "path2", "path3"]
    assert "owd_3" in three.factors()
    shaping = three.resolve({"owd_3": 70})
    assert three.configured_rtt(2, shaping) == 140
    assert three.configured_rtt(0, shaping) == 40


def test_a_factor_given_once_sets_every_path() -> None:
    """Homogeneous paths: "owd" alone gives owd_1 and owd_2 its value; a per-path value wins over it."""
    topo = load_topology(MULTI)
    shaping = topo.resolve({"owd": 35, "bw": 4})
    assert topo.configured_rtt(0, shaping) == topo.configured_rtt(1, shaping) == 70
    assert shaping["path1"]["forward"].bw == shaping["path2"]["reverse"].bw == 4
    assert topo.configured_rtt(1, topo.resolve({"owd": 35, "owd_2": 5})) == 10
    topo.check_values({"owd": 35, "queue_1": 20}, strict=True)
    with pytest.raises(SpecError, match="unknown factor name"):
        load_topology(SINGLE).check_values({"owd_1": 3}, strict=True)


def test_a_queue_is_counted_as_written() -> None:
    """Packets when written as a number, bytes when written as a size or a time of the link's rate (a BDP or
    "24ms": never less than ten full frames)."""
    topo = load_topology(SINGLE)

    def queue(values: dict) -> tuple[int, str]:
        s = topo.resolve(values)["bottleneck"]["forward"]
        return s.queue, s.queue_unit

    assert queue({"bw": 1, "owd": 1}) == (10 * 1514, "bytes")
    # 100 Mbit/s for 24 ms = 300 kB.
    assert queue({"bw": 100, "queue": "24ms"}) == (300_000, "bytes")
    assert queue({"queue": "30kB"}) == (30_000, "bytes") and queue({"queue": "2KiB"}) == (2048, "bytes")
    assert queue({"queue": 30}) == (30, "packets")
    assert queue({"queue": 37.4}) == (37, "packets")
    with pytest.raises(UserError, match="less than one full frame"):
        queue({"queue": "1kB"})


@pytest.mark.parametrize("values, message", [
    ({"owd": -1}, "owd"),
    ({"bw": 0}, "bw"),
    ({"queue": "lots"}, "queue"),
    ({"queue": 0.2}, "queue"),
])
def test_bad_values_are_user_errors(values: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_topology(SINGLE).resolve(values)


def test_unknown_set_name_is_rejected() -> None:
    with pytest.raises(SpecError, match="bww: unknown factor name"):
        load_topology(SINGLE).check_values({"bww": 3}, strict=True)


@pytest.mark.parametrize("old, new, key, problem", [
    ('bw = "bw"', 'bw = "bandwidth"', "link[1].bw", "unknown factor name"),
    ('owd = "owd"', "owd = -5", "link[1].owd", "delay must be ≥ 0"),
    ('bw = "bw"', "bw = 0", "link[1].bw", "bandwidth must be > 0"),
    ('nodes = ["client", "r1", "server"]', 'nodes = ["client", "r1"]', "path[0].nodes", "to the server"),
    ('name = "r1"', 'name = "client"', "node[1].name", "duplicate node name"),
    ('ends = ["r1", "server"]', 'ends = ["r1", "nowhere"]', "link[1].ends", "unknown node"),
    ('loss = true', 'loss = true\ncolour = "red"', "link[1].colour", "unknown key"),
    ("bw = 10.0", "bw = 0", "factors.bw", "bandwidth must be > 0"),
])
def test_bad_specs_name_file_and_key(tmp_path: Path, old: str, new: str, key: str, problem: str) -> None:
    assert old in BASE_SPEC
    path = write(tmp_path, BASE_SPEC.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_topology(path)
    assert str(path) in str(info.value) and key in str(info.value) and problem in str(info.value)


def test_path_through_missing_link_does_not_reach_server(tmp_path: Path) -> None:
    text = BASE_SPEC + '[[node]]\nname = "r9"\n[[link]]\nid = "c"\nends = ["r9", "server"]\n' \
        '[[path]]\nnodes = ["client", "r9", "server"]\n'
    with pytest.raises(SpecError, match=r"path\[1\]\.nodes: no link between 'client' and 'r9'"):
        load_topology(write(tmp_path, text))


def test_per_direction_override_and_orientation(tmp_path: Path) -> None:
    # Written server-side first: forward must still be client -> server.
    text = BASE_SPEC.replace('ends = ["r1", "server"]', 'ends = ["server", "r1"]\nforward = { bw = 2 }')
    topo = load_topology(write(tmp_path, text))
    link = topo.link("b")
    assert (link.a, link.b) == ("r1", "server")
    shaping = topo.resolve({})
    # [link.forward] means client -> server whatever the order of `ends`.
    assert shaping["b"]["forward"].bw == 2
    assert shaping["b"]["reverse"].bw == 10


def test_plan_addresses_routes_and_policy_rules() -> None:
    topo = load_topology(MULTI)
    plan = make_layout(topo, "fbT")
    assert plan.client_addresses == ["10.0.0.1", "10.0.1.1"]
    assert plan.server_address == "10.0.4.2"
    client = plan.nodes["client"]
    assert ["from", "10.0.1.1", "table", "102", "priority", "1001"] in client.rules
    assert ["default", "via", "10.0.1.2", "dev", "fbTl1a", "table", "102"] in client.routes
    r0 = plan.nodes["r0"]
    # R0 returns traffic for the client's address 2 over path 2.
    assert ["10.0.1.0/24", "via", "10.0.3.1", "dev", "fbTl3b"] in r0.routes
    names = [i.name for n in plan.nodes.values() for i in n.ifaces]
    assert len(names) == len(set(names))
    assert all(len(n) <= 15 for n in names)
    assert set(plan.delay_nodes) == {"path1", "path2"}
    assert plan.delay_nodes["path1"].egress("forward") == "fbTl2y"


def test_interface_names_fit_with_longest_prefix() -> None:
    topo = load_topology(MULTI, paths=16)
    plan = make_layout(topo, "fb99999z")
    assert max(len(i.name) for n in plan.nodes.values() for i in n.ifaces) <= 15


def test_shaping_commands() -> None:
    s = Shaping(bw=100.0, owd=200.0, queue=50)
    tbf = shaping_commands("d0", s, "delayline")
    # The bucket: one full frame and 0.25 ms of 100 Mbit/s (3,125 B); the queue a pfifo of 50 packets,
    # tbf's limit the same number (the kernel gives it to the child on every change).
    assert tbf == [["qdisc", "replace", "dev", "d0", "root", "handle", "1:", "tbf", "rate", "100mbit",
                    "burst", "4639", "limit", "50"],
                   ["qdisc", "replace", "dev", "d0", "parent", "1:1", "handle", "10:", "pfifo", "limit", "50"]]
    in_bytes = shaping_commands("d0", Shaping(bw=4.0, owd=20.0, queue=30_000, queue_unit="bytes"), "delayline")
    assert in_bytes[0][8:] == ["rate", "4mbit", "burst", str(1514 + 125), "limit", "30000"]
    assert in_bytes[1][6:] == ["handle", "11:", "bfifo", "limit", "30000"]
    netem = shaping_commands("d0", s, "netem")
    assert netem[0][:8] == ["qdisc", "replace", "dev", "d0", "root", "handle", "1:", "netem"]
    assert netem[1][4:8] == ["parent", "1:1", "handle", "10:"]
    assert netem[2][4:9] == ["parent", "10:1", "handle", "20:", "pfifo"]
    # 100 Mbit/s × 200 ms is ~1700 full packets: netem's default limit of 1000 would cap throughput.
    assert netem_limit(s) >= 1700
    assert shaping_commands("d0", Shaping(bw=None, owd=5.0, queue=10), "delayline") == []


def test_the_burst_is_one_frame_and_a_quarter_millisecond_of_the_rate() -> None:
    assert tbf_burst(0.468) == 1514 + 15 and tbf_burst(4.0) == 1514 + 125
    assert tbf_burst(100.0) == 1514 + 3125 and tbf_burst(1000.0) == 1514 + 31_250


def test_a_change_sets_only_the_parts_it_changes() -> None:
    old = Shaping(bw=4.0, owd=20.0, queue=20)
    assert changed_parts(old, Shaping(4.0, 35.0, 20), "delayline") == ()
    assert changed_parts(old, Shaping(4.0, 35.0, 20), "netem") == ("delay",)
    assert changed_parts(old, Shaping(8.0, 20.0, 20), "delayline") == ("rate",)
    assert changed_parts(old, Shaping(4.0, 20.0, 30), "delayline") == ("rate", "queue")
    assert shaping_commands("d0", Shaping(8.0, 35.0, 20), "netem", ("rate",))[0][7:9] == ["10:", "tbf"]


def test_the_link_as_built_is_read_back_and_compared() -> None:
    shown = [{"kind": "tbf", "handle": "1:", "dev": "d0", "options": {"rate": 500000, "burst": 1638}},
             {"kind": "pfifo", "handle": "10:", "dev": "d0", "options": {"limit": 20}},
             {"kind": "tbf", "handle": "1:", "dev": "d1", "options": {"rate": 1, "burst": 1}}]
    have = built(shown, "d0")
    assert have == {"rate_mbit": 4.0, "burst_bytes": 1638, "queue": 20, "queue_unit": "packets"}
    assert built_mismatches(Shaping(4.0, 20.0, 20), have) == []
    wrong = built_mismatches(Shaping(4.0, 20.0, 20, "bytes"), {**have, "burst_bytes": 15140})
    assert len(wrong) == 2 and "burst 15140" in wrong[0] and "asked 20 bytes" in wrong[1]


def test_parse_sets() -> None:
    assert parse_sets(["bw=10", "queue=50ms"]) == {"bw": 10.0, "queue": "50ms"}
    with pytest.raises(UserError):
        parse_sets(["bw"])


def test_cli_show_and_bad_input_exit_2(tmp_path: Path) -> None:
    fecbench = [sys.executable, "-m", "fecbench"]
    ok = subprocess.run([*fecbench, "topo", "show", str(MULTI), "--paths", "3", "--json", "--set", "owd_3=9"],
                        capture_output=True, text=True, check=False, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert '"server_address": "10.0.6.2"' in ok.stdout and '"owd_3": 9.0' in ok.stdout
    bad = write(tmp_path, BASE_SPEC.replace('owd = "owd"', "owd = -1"))
    fail = subprocess.run([*fecbench, "topo", "show", str(bad)], capture_output=True, text=True, check=False)
    assert fail.returncode == 2
    assert "link[1].owd" in fail.stderr and "Traceback" not in fail.stderr
    unknown = subprocess.run([*fecbench, "topo", "show", str(SINGLE), "--set", "delay=3"],
                             capture_output=True, text=True, check=False)
    assert unknown.returncode == 2 and "unknown factor name" in unknown.stderr


def test_backend_selection_env_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from fecbench.emulation.backend import ENV_VAR, select_backend

    monkeypatch.setenv(ENV_VAR, "bogus")
    with pytest.raises(UserError, match=ENV_VAR):
        select_backend()
    with pytest.raises(UserError, match="--link-backend"):
        select_backend("bogus")
    monkeypatch.delenv(ENV_VAR)
    with pytest.raises(UserError, match="unknown link backend"):
        select_backend("tc")


@pytest.mark.require_root
def test_netem_probe_matches_request() -> None:
    from fecbench.emulation import netem_available, netem_probe
    from fecbench.emulation.backend import select_backend

    if netem_available():
        assert select_backend("netem") == "netem"
    else:
        with pytest.raises(UserError, match="no netem"):
            select_backend("netem")
        assert netem_probe()[1]  # the reason is reported


def test_rtt_bound_and_its_override_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from fecbench.emulation.fidelity import RTT_TOLERANCE_ENV, rtt_ok

    monkeypatch.delenv(RTT_TOLERANCE_ENV, raising=False)
    assert rtt_ok(20, 21.0) and not rtt_ok(20, 21.01) and rtt_ok(400, 399.0) and not rtt_ok(400, 401.1)
    monkeypatch.setenv(RTT_TOLERANCE_ENV, "3")   # an emulated guest (make test-kernels)
    assert rtt_ok(20, 23) and not rtt_ok(20, 23.1) and rtt_ok(200, 197)
    for bad in ("x", "0", "-1", "1000"):
        monkeypatch.setenv(RTT_TOLERANCE_ENV, bad)
        with pytest.raises(UserError, match=RTT_TOLERANCE_ENV):
            rtt_ok(20, 20)


def test_network_names_stay_distinct_and_short_beyond_26_networks() -> None:
    """`--jobs` may build up to 32 networks in one process: each gets its own tag (a–z, then aa–zz), and
    the longest base name still leaves every interface name within Linux's 15 characters."""
    from fecbench.emulation.network import build_tag

    tags = [build_tag(n) for n in range(702)]
    assert len(set(tags)) == 702 and tags[:2] == ["a", "b"] and tags[26] == "aa" and tags[-1] == "zz"
    assert build_tag(702) == "a"  # wraps only past 702 networks alive at once
    for spec in ("single.toml", "multipath.toml"):
        plan = make_layout(load_topology(Path(__file__).resolve().parent.parent / "topologies" / spec),
                           "fb99999zz")
        names = [i.name for node in plan.nodes.values() for i in node.ifaces]
        assert names and max(len(n) for n in names) <= 15, names
