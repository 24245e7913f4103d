"""The delay element for real: namespaces A — D — B, delayline bridging D's two veth ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from fecbench.host import cleanup
from fecbench.inputs.errors import UserError
from fecbench.timekeeping import lateness
from fecbench.timekeeping.delayline import CPUS_ENV, DelayLine, binary_path, stop_all
from tests.helpers.delayline_line import ADDR_A, ADDR_B, TCP_SINK, TCP_SOURCE, UDP_SINK, UDP_SOURCE, Line, line

pytestmark = pytest.mark.require_root


@pytest.fixture
def net() -> Iterator[Line]:
    binary_path()  # fail early with the build hint
    with line() as built:
        yield built


def recorded(kind: str, name: str) -> bool:
    path = cleanup.state_file()
    entries = json.loads(path.read_text()) if path.exists() else []
    return any(e["kind"] == kind and e["name"] == name for e in entries)


def assert_counters_add_up(stats: dict) -> None:
    for way in ("ab", "ba"):
        c = stats[way]
        assert c["rx"] == c["tx"] + c["drop_queue"] + c["drop_egress"] + c["errors"] + c["queue"] + c["flushed"], \
            (way, c)


def test_ping_rtt_follows_the_delay_and_set_changes_it(net: Line) -> None:
    with DelayLine.start(net.if_a, net.if_b, 10.0, 10.0, run_in=net.run_in("D")) as dl:
        rtt = net.ping()
        assert 20.0 <= rtt["min"] and rtt["avg"] <= 25.0, rtt

        dl.set_delay(ab_ms=30.0, ba_ms=20.0)
        rtt = net.ping()
        assert 50.0 <= rtt["min"] and rtt["avg"] <= 55.0, rtt
        dl.set_delay(ba_ms=5.0)  # one direction only
        rtt = net.ping()
        assert 35.0 <= rtt["min"] and rtt["avg"] <= 40.0, rtt

        stats = dl.stats()
        assert (stats["delay_ab_us"], stats["delay_ba_us"]) == (30000, 5000)
        assert stats["ab"]["tx"] == stats["ba"]["tx"] == 15  # 3 × 5 echo requests and replies
        assert_counters_add_up(stats)


def test_udp_arrives_in_order_without_loss_and_counters_add_up(net: Line) -> None:
    net.offloads(False)
    with DelayLine.start(net.if_a, net.if_b, 20.0, 5.0, run_in=net.run_in("D")) as dl:
        got = net.udp(3000, rate=3000)
        stats = dl.stats()
    seqs = [row[0] for row in got]
    assert seqs == list(range(3000))
    one_way_ms = [(recv - sent) / 1e6 for _, sent, recv, *_ in got]
    assert min(one_way_ms) >= 20.0
    assert stats["ab"]["rx"] == stats["ab"]["tx"] == 3000
    assert stats["ba"]["rx"] == 0
    assert stats["ab"]["max_queue"] >= 30  # 20 ms at 3000/s holds ~60 datagrams
    assert stats["ab"]["errors"] == stats["ab"]["drop_queue"] == stats["ab"]["gso"] == 0
    assert_counters_add_up(stats)


def test_lateness_counts_every_sent_frame_and_clear_starts_a_new_window(net: Line) -> None:
    """Each frame sent is counted once in its direction's lateness histogram; `clear` empties the
    histograms and maxima (what a run reports is its own), and the summary reads them."""
    net.offloads(False)
    with DelayLine.start(net.if_a, net.if_b, 5.0, 5.0, run_in=net.run_in("D")) as dl:
        net.udp(500, rate=2000)
        before = dl.stats()
        assert sum(before["ab"]["late_hist"]) == before["ab"]["tx"] == 500
        assert len(before["ab"]["late_hist"]) == len(before["late_edges_us"]) + 1
        assert before["ab"]["late_max_us"] * 500 >= before["ab"]["late_sum_us"] > 0
        dl.clear_lateness()
        cleared = dl.stats()
        assert sum(cleared["ab"]["late_hist"]) == 0 and cleared["ab"]["late_max_us"] == 0
        assert cleared["ab"]["tx"] == 500  # the traffic counters stay cumulative
        net.udp(200, rate=2000)
        after = dl.stats()
    assert sum(after["ab"]["late_hist"]) == 200 and after["ab"]["tx"] == 700
    late = lateness.summary(after["ab"], after["late_edges_us"])
    assert late["frames"] == 200 and late["p50_us"] <= late["p99_us"] <= late["max_us"]
    assert lateness.summary(after["ba"], after["late_edges_us"])["p99_us"] is None  # nothing sent b→a


def test_flush_discards_what_is_queued_and_counts_it(net: Line) -> None:
    """`flush` (between runs): the frames a delay element holds are discarded, never sent, counted as
    `flushed`; frames arriving afterwards are delayed as usual."""
    net.offloads(False)
    with DelayLine.start(net.if_a, net.if_b, 500.0, 500.0, run_in=net.run_in("D")) as dl:
        sink = net.python("B", UDP_SINK, ADDR_B, 5000, 1.5)
        net.wait_listening(sink)
        net.exec(net.ns["A"], [sys.executable, "-c", UDP_SOURCE, ADDR_B, "5000", "40", "0", "200"])
        deadline = time.monotonic() + 5
        while dl.stats()["ab"]["rx"] < 40 and time.monotonic() < deadline:
            time.sleep(0.005)  # read by the delay element (its packet socket may lag the sender's exit)
        assert dl.stats()["ab"]["queue"] == 40  # all still waiting out their 500 ms
        assert dl.flush() == 40
        stats = dl.stats()
        assert stats["ab"]["queue"] == 0 and stats["ab"]["flushed"] == 40 and stats["ab"]["tx"] == 0
        assert_counters_add_up(stats)
        out, _ = sink.communicate(timeout=60)
        assert json.loads(out) == []  # nothing flushed ever arrived
        dl.set_delay(ab_ms=5.0)
        got = net.udp(20, rate=1000)
        assert [row[0] for row in got] == list(range(20))
        after = dl.stats()
    assert after["ab"]["tx"] == 20 and after["ab"]["flushed"] == 40
    assert_counters_add_up(after)


def test_full_queue_drops_and_counts(net: Line) -> None:
    with DelayLine.start(net.if_a, net.if_b, 300.0, 300.0, run_in=net.run_in("D"), max_queue=50) as dl:
        got = net.udp(400, rate=0)  # a burst far shorter than the delay
        stats = dl.stats()
    ab = stats["ab"]
    assert ab["rx"] == 400 and ab["max_queue"] == 50 and ab["limit"] == 50
    assert ab["drop_queue"] >= 300
    assert len(got) == ab["tx"] == 400 - ab["drop_queue"]
    assert [row[0] for row in got] == sorted(row[0] for row in got)
    assert_counters_add_up(stats)


def test_egress_qdisc_applies_to_forwarded_frames(net: Line) -> None:
    # A tiny tbf queue on D's egress towards B: a fast burst overflows it, and the drops are counted.
    net.exec(net.ns["D"], ["tc", "qdisc", "add", "dev", net.if_b, "root", "tbf", "rate", "1mbit",
                           "burst", "15kb", "limit", "20kb"])
    with DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D")) as dl:
        got = net.udp(500, rate=0, size=1000)
        stats = dl.stats()
    qdisc = json.loads(net.exec(net.ns["D"], ["tc", "-s", "-j", "qdisc", "show", "dev", net.if_b]).stdout)[0]
    ab = stats["ab"]
    assert ab["rx"] == 500 and ab["drop_egress"] > 0
    assert ab["drop_egress"] == qdisc["drops"]
    assert len(got) == ab["tx"] == qdisc["packets"]
    assert_counters_add_up(stats)


def test_per_flow_counters_attribute_every_queue_drop_to_its_flow(net: Line) -> None:
    """`flows ab bin_us=N`: each frame that reaches the queue counted under its flow (protocol and ports) in the
    bin of its arrival, and each one the queue behind (tbf's limit, here a tiny one) refused counted as its
    flow's drop: the flows' drops add up to the element's drop_egress, and the frames and bytes to what each
    sender sent (issue 49: before, queue drops were known per link only)."""
    net.offloads(False)
    net.exec(net.ns["D"], ["tc", "qdisc", "add", "dev", net.if_b, "root", "tbf", "rate", "1mbit",
                           "burst", "15kb", "limit", "20kb"])
    sent = {5000: 300, 5001: 200}
    with DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D")) as dl:
        before = dl.control.flow_stats()
        dl.control.count_flows("ab", 50.0)
        for port, n in sent.items():   # no receiver: B answers with ICMP port unreachable (counted b→a)
            net.exec(net.ns["A"], [sys.executable, "-c", UDP_SOURCE, ADDR_B, str(port), str(n), "0", "1000"])
        deadline = time.monotonic() + 10
        while (dl.stats()["ab"]["rx"] < 500 or dl.stats()["ab"]["queue"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        stats, flows = dl.stats(), dl.control.flow_stats()
        dl.control.count_flows("ab", None)
        stopped = dl.control.flow_stats()
    assert before["ab"]["counting"] is False and before["ab"]["flows"] == []
    ab = flows["ab"]
    assert ab["counting"] is True and ab["bin_ns"] == 50_000_000 and ab["lost"] == 0
    assert flows["ba"]["counting"] is False and flows["ba"]["flows"] == []   # b→a was not asked for
    per_port: dict[int, list[int]] = {}
    for proto, _sport, dport, _bin, packets, size, dropped, dropped_bytes in ab["flows"]:
        assert proto == 17, ab["flows"]
        totals = per_port.setdefault(dport, [0, 0, 0, 0])
        for i, value in enumerate((packets, size, dropped, dropped_bytes)):
            totals[i] += value
    frame = 1000 + 8 + 20 + 14   # UDP payload, UDP and IP headers, Ethernet header
    assert {port: totals[0] for port, totals in per_port.items()} == sent
    assert all(totals[1] == totals[0] * frame and totals[3] == totals[2] * frame for totals in per_port.values())
    assert stats["ab"]["drop_egress"] > 0
    assert sum(totals[2] for totals in per_port.values()) == stats["ab"]["drop_egress"] + stats["ab"]["drop_queue"]
    assert stopped["ab"]["counting"] is False and stopped["ab"]["flows"] == []


def test_tcp_with_offloads_delivers_every_byte(net: Line) -> None:
    net.offloads(True)
    size = 30 << 20
    with DelayLine.start(net.if_a, net.if_b, 5.0, 5.0, run_in=net.run_in("D")) as dl:
        sink = net.python("B", TCP_SINK, ADDR_B, 5001)
        net.wait_listening(sink)
        sent = net.exec(net.ns["A"], [sys.executable, "-c", TCP_SOURCE, ADDR_B, "5001", str(size)],
                        timeout=120).stdout.split()
        received, _ = sink.communicate(timeout=60)
        stats = dl.stats()
    assert received.split() == sent and int(sent[0]) == size
    assert stats["ab"]["gso"] > 0, "no offloaded frame crossed: the test did not exercise GSO"
    snmp = net.exec(net.ns["B"], ["cat", "/proc/net/snmp"]).stdout.splitlines()
    tcp_names, tcp_values = (row.split()[1:] for row in snmp if row.startswith("Tcp:"))
    assert dict(zip(tcp_names, tcp_values, strict=True))["InCsumErrors"] == "0"
    assert stats["ab"]["errors"] == stats["ba"]["errors"] == 0
    assert_counters_add_up(stats)


def test_sigterm_leaves_nothing_behind_also_under_mnexec(net: Line) -> None:
    # A process in D stands for a Mininet node: mnexec -a joins its network namespace.
    holder = net.popen("D", ["sleep", "120"])
    holder_pid = int(net.exec(net.ns["D"], ["ip", "netns", "pids", net.ns["D"]]).stdout.split()[0])
    dl = DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=["mnexec", "-da", str(holder_pid)], name="term")
    try:
        assert dl.control_path.exists() and recorded("pid", str(dl.pid))
        assert os.readlink(f"/proc/{dl.pid}/ns/net") == os.readlink(f"/proc/{holder_pid}/ns/net")
        assert net.ping(count=2)["min"] >= 2.0
    finally:
        dl.stop()
    stat = f"/proc/{dl.pid}/stat"
    assert not os.path.exists(stat) or open(stat).read().rsplit(")", 1)[1].split()[0] == "Z"
    assert not dl.control_path.exists()
    assert not recorded("pid", str(dl.pid)) and not recorded("path", str(dl.control_path))
    holder.kill()


def test_sigterm_exit_status_is_zero_and_scheduling_policy(net: Line) -> None:
    dl = DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D"))
    try:
        if dl.warnings:  # e.g. a cgroup without real-time budget
            pytest.skip(f"no real-time priority here: {dl.warnings}")
        # Real-time by default, so timer wake-ups are on time on a busy machine.
        assert os.sched_getscheduler(dl.pid) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO
    finally:
        dl.stop()
    assert dl.returncode == 0
    assert not dl.control_path.exists()
    with DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D"), rt_priority=0) as dl:
        assert os.sched_getscheduler(dl.pid) == os.SCHED_OTHER and dl.warnings == []
    assert dl.returncode == 0


def test_stop_all_stops_every_delayline(net: Line) -> None:
    d = net.ns["D"]
    net.exec(d, ["ip", "link", "add", "xa", "type", "veth", "peer", "name", "xb"])
    for dev in ("xa", "xb"):
        net.exec(d, ["ip", "link", "set", dev, "up"])
    lines = [DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D")),
             DelayLine.start("xa", "xb", 1.0, 1.0, run_in=net.run_in("D"))]
    stop_all(lines)
    assert [dl.returncode for dl in lines] == [0, 0]
    assert not any(dl.control_path.exists() or recorded("pid", str(dl.pid)) for dl in lines)


def test_control_protocol_errors(net: Line) -> None:
    with DelayLine.start(net.if_a, net.if_b, 1.0, 2.0, run_in=net.run_in("D")) as dl:
        assert dl._command("bogus").startswith("error unknown command")
        assert dl._command("set delay_ab_us=-5").startswith("error")
        assert dl._command("set speed=1").startswith("error unknown key")
        assert dl._command("flows up bin_us=5").startswith("error flows needs a direction")
        with pytest.raises(UserError):
            dl.set_delay(ab_ms=-1.0)
        with pytest.raises(UserError):
            dl.control.count_flows("ab", 0)
        stats = dl.stats()
        assert (stats["delay_ab_us"], stats["delay_ba_us"]) == (1000, 2000)


def test_bad_arguments(net: Line) -> None:
    with pytest.raises(UserError, match="no interface"):
        DelayLine.start("nosuchif0", net.if_b, 1.0, 1.0, run_in=net.run_in("D"))
    with pytest.raises(UserError, match="milliseconds"):
        DelayLine.start(net.if_a, net.if_b, float("nan"), 1.0, run_in=net.run_in("D"))
    base = [str(binary_path()), "--if-a", ADDR_A, "--if-b", "x", "--control", "/nonexistent/dir/c.sock"]
    for argv in (base, [*base, "--delay-ab-us", "5", "--delay-ba-us", "1e3"], [str(binary_path()), "--bogus"]):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert proc.returncode == 2 and proc.stderr.startswith("delayline: "), (argv, proc.stderr)


def test_delay_elements_run_on_the_cpus_asked_for(net: Line, monkeypatch: pytest.MonkeyPatch) -> None:
    """$FECBENCH_DELAYLINE_CPUS: the delay element (the real process, behind mnexec) runs on those CPUs."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: nothing to choose")
    last = (os.cpu_count() or 1) - 1
    monkeypatch.setenv(CPUS_ENV, str(last))
    with DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D")) as dl:
        assert os.sched_getaffinity(dl.pid) == {last}
    monkeypatch.delenv(CPUS_ENV)
    with DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D")) as dl:
        assert os.sched_getaffinity(dl.pid) == os.sched_getaffinity(0)
