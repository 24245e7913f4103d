"""Trace links on a real network (root; issue 71 item 1): a link direction whose rate is a Mahimahi packet-delivery
trace, replayed by the delay element with mm-link's drop-tail. A synthetic trace of 12 Mbit/s for 3 s, a 2 s gap and
6 Mbit/s for 3 s, offered more than it carries: what the server receives in each phase is the trace's capacity, and
the gap stalls the flow for its length."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fecbench.emulation import Network, load_topology
from fecbench.inputs.errors import UserError
from fecbench.inputs.traces import load_trace
from tests.helpers.campaign import FECQ

pytestmark = pytest.mark.require_root

#: 1500-byte IP packets: each takes one delivery opportunity whole (1500 + mm-link's 4-byte tun header = 1504).
PAYLOAD = 1500 - 28
PPS = 1300            # offered: more than the 1000 opportunities a second of the trace's fast phase
OWD_MS = 5.0


def synthetic_trace(path: Path) -> Path:
    """1 opportunity a millisecond for 3 s (12.03 Mbit/s), none for 2 s, 1 every 2 ms for 3 s (6.02 Mbit/s)."""
    lines = [*range(1, 3001), *range(5002, 8001, 2)]
    path.write_text("".join(f"{ms}\n" for ms in lines))
    return path


def trace_topology(folder: Path, trace: str, queue: str = "queue = 50", factors: str = "") -> Path:
    """client — r1 — cell — server, the cell link's forward direction driven by `trace` (a file or a factor)."""
    return cell_topology(folder, f'owd = {OWD_MS}\n[link.forward]\ntrace = "{trace}"\n{queue}', factors)


def cell_topology(folder: Path, cell: str, factors: str = "") -> Path:
    """client — r1 — cell — server, the cell link's keys and tables as `cell` says."""
    spec = folder / "trace.toml"
    spec.write_text(f"""
[topology]
name = "trace"
[factors]
{factors}
[[node]]
name = "client"
role = "host"
[[node]]
name = "r1"
[[node]]
name = "server"
role = "host"
[[link]]
id = "access"
ends = ["client", "r1"]
[[link]]
id = "cell"
ends = ["r1", "server"]
{cell}
[[path]]
nodes = ["client", "r1", "server"]
""")
    return spec


def test_a_trace_link_carries_its_capacity_in_each_phase_and_stalls_in_its_gap(tmp_path: Path) -> None:
    trace = load_trace(synthetic_trace(tmp_path / "steps.down"))
    topo = load_topology(trace_topology(tmp_path, "steps.down"))
    assert topo.resolve({})["cell"]["forward"].trace == trace.path
    count = int(8.3 * PPS)
    probe = [sys.executable, "-m", "fecbench.emulation.probe"]
    with Network(topo, {}, backend="delayline") as net:
        recv = net.server.popen([*probe, "recv", "--bind", net.server_address, "--port", "9200", "--count",
                                 str(count), "--timeout", "60", "--idle", "4"], text=True)
        assert recv.stdout.readline().strip() == "ready"
        sender = net.client.popen([*probe, "send", "--dst", net.server_address, "--port", "9200", "--count",
                                   str(count), "--pps", str(PPS), "--size", str(PAYLOAD), "--start-at", "stdin"],
                                  text=True, stdin=subprocess.PIPE)
        assert sender.stdout.readline().strip() == "ready"   # started: it sends from the trace's start on
        net.restart_traces()
        line = net.delaylines["cell"]
        started_s = line.stats()["ab"]["trace"]["started_ns"] / 1e9
        offset_ns = time.time_ns() - time.monotonic_ns()   # CLOCK_REALTIME − CLOCK_MONOTONIC (receive stamps)
        sender.communicate(f"{started_s!r}\n", timeout=60)
        seen = json.loads(recv.communicate(timeout=90)[0].strip().splitlines()[-1])
        stats = line.stats()["ab"]
        recorded = next(row["trace"] for row in net.link_stats() if (row["link"], row["direction"]) == ("cell",
                                                                                                      "forward"))
    # the link's own clock: ms since the trace started, as the server received them (just after they left)
    at_ms = [(t - offset_ns) / 1e6 - started_s * 1e3 for t in seen["rx_ns"]]
    first = at_ms[0]
    assert OWD_MS < first < OWD_MS + 5, first   # the first opportunity after the first frame's delay

    def window(a: float, b: float) -> tuple[int, int]:
        """Packets received in (a, b] ms (shifted by 0.5 ms: the path after the delay element) and the trace's
        opportunities in (a, b]."""
        got = sum(a + 0.5 < t <= b + 0.5 for t in at_ms)
        return got, sum(a < ms <= b for ms in trace.offsets_ms)

    for a, b in ((first, 3000.0), (5000.0, 8000.0)):
        got, capacity = window(a, b)
        print(f"({a:.1f}, {b:.0f}] ms: {got} packets of {capacity} opportunities ({got / capacity:.4f})")
        assert abs(got / capacity - 1) <= 0.02, (a, b, got, capacity)
    stall = max(b - a for a, b in zip(at_ms, at_ms[1:], strict=False))
    print(f"longest silence {stall:.2f} ms (the trace's gap: 2002 ms); trace link stats {stats['trace']}, "
          f"drop_link {stats['drop_link']}")
    assert window(3000.0, 5000.0)[0] == 0 and abs(stall - 2002) <= 2, stall
    # what a run records: which trace (its hash), where in it the run started, how many loops it completed
    assert recorded["sha256"] == trace.sha256 and recorded["offset_ms"] == 0 and recorded["loops"] == 1
    # what the link could not carry was dropped at its queue (mm-link's drop-tail), and every frame is counted
    assert stats["drop_link"] > 0 and stats["trace"]["dropped"] == stats["drop_link"]
    assert stats["rx"] == stats["tx"] + stats["drop_queue"] + stats["drop_egress"] + stats["drop_link"] + \
        stats["errors"] + stats["queue"] + stats["flushed"]


def test_netem_refuses_a_trace_link(tmp_path: Path) -> None:
    """No kernel qdisc serves a trace's opportunities: asked for netem, a trace topology says so and builds nothing."""
    synthetic_trace(tmp_path / "steps.down")
    topo = load_topology(trace_topology(tmp_path, "steps.down", ""))
    with pytest.raises(UserError, match="follows a trace or a delay series, which only the delay element replays"):
        Network(topo, {}, backend="netem").start()


def test_a_delay_series_steps_the_delay_without_reordering(tmp_path: Path) -> None:
    """Issue 71 item 2: the forward delay follows a series (20 ms, 60 ms from 1 s, 20 ms from 2 s; 3 s loop): each
    probe's one-way delay is the step in force when it arrived, and after the step down the probes wait behind the
    last 60 ms ones rather than overtake them (a FIFO: no reordering, as the series' README says)."""
    (tmp_path / "steps.delays").write_text("0 20\n1000 60\n2000 20\n3000 20\n")
    topo = load_topology(cell_topology(tmp_path, '[link.forward]\ndelays = "steps.delays"\n[link.reverse]\nowd = 5'))
    forward = topo.resolve({})["cell"]["forward"]
    assert forward.delays and forward.owd == 20
    probe = [sys.executable, "-m", "fecbench.emulation.probe"]
    pps, count = 200, 580
    with Network(topo, {}, backend="delayline") as net:
        recv = net.server.popen([*probe, "recv", "--bind", net.server_address, "--port", "9201", "--count",
                                 str(count), "--timeout", "30", "--idle", "2"], text=True)
        assert recv.stdout.readline().strip() == "ready"
        sender = net.client.popen([*probe, "send", "--dst", net.server_address, "--port", "9201", "--count",
                                   str(count), "--pps", str(pps), "--start-at", "stdin"], text=True,
                                  stdin=subprocess.PIPE)
        assert sender.stdout.readline().strip() == "ready"
        net.restart_traces()
        started_s = net.delaylines["cell"].stats()["ab"]["delays"]["started_ns"] / 1e9
        sender.communicate(f"{started_s + 0.0025!r}\n", timeout=60)   # half a probe off the steps
        seen = json.loads(recv.communicate(timeout=60)[0].strip().splitlines()[-1])
        recorded = next(r["delays"] for r in net.link_stats() if (r["link"], r["direction"]) == ("cell", "forward"))
    assert seen["received"] == count and seen["seq"] == list(range(count))   # all there, in order
    sent_ms = [2.5 + 1000 * i / pps for i in range(count)]   # as scheduled: the phase each probe is in
    owd = seen["owd_ms"]
    rx_ms = [t / 1e6 for t in seen["rx_ns"]]
    stamp_ms = [rx - delay for rx, delay in zip(rx_ms, owd, strict=True)]   # when each actually left the sender
    last_60 = max(i for i, t in enumerate(sent_ms) if 1000 <= t < 2000)

    def expected(i: int) -> float:
        """The series' delay for probe i, or after the step down the wait behind the last 60 ms probe (whose arrival
        the FIFO makes the earliest this one can arrive)."""
        step = 60.0 if 1000 <= sent_ms[i] < 2000 else 20.0
        return max(step, rx_ms[last_60] - stamp_ms[i]) if i > last_60 else step

    waited = [i for i in range(last_60 + 1, count) if rx_ms[last_60] - stamp_ms[i] > 20.0]
    assert 3 <= len(waited) <= 12, waited   # ~40 ms of probes at 200/s wait behind the last 60 ms one
    # never early (a machine's stall only adds delay); each phase, and the wait behind the 60 ms probes, on time
    assert all(owd[i] >= expected(i) - 0.3 for i in range(count)), owd
    phases = {"20 ms": range(0, 200), "60 ms": range(200, last_60 + 1), "behind the last 60 ms one": waited,
              "20 ms again": range(waited[-1] + 1, count)}
    for name, probes in phases.items():
        errors = sorted(owd[i] - expected(i) for i in probes)
        print(f"{name}: {len(errors)} probes, median {errors[len(errors) // 2]:+.3f} ms beyond the series, largest "
              f"{errors[-1]:+.3f} ms")
        assert errors and abs(errors[len(errors) // 2]) <= 0.5, (name, errors)
    assert recorded["sha256"] and recorded["period_ms"] == 3000 and recorded["offset_ms"] == 0


@pytest.mark.skipif(not FECQ.exists(), reason="fecq is not built: make fecq")
def test_a_bulk_download_carries_the_traces_capacity_where_the_link_limits_it(tmp_path: Path) -> None:
    """Issue 71: a 10 MiB download over Verizon's LTE downlink (5.04 Mbit/s on average, 1,000-packet queue): in every
    second the trace link never idled (its sender kept it busy: no opportunity went by unused), what the client
    received is the trace's capacity within 5 % (bytes as mm-link counts them: UDP payload + 28 + its 4-byte
    header). Printed per second; the README keeps the figures."""
    from fecbench.analysis.traces import qlog, timeline
    from tests.helpers.campaign import fecbench, rows
    from tests.test_trace_campaign import lte_design

    db = tmp_path / "bulk.sqlite"
    out = fecbench("run", str(lte_design(tmp_path / "bulk.toml", 1, "10MiB", queue=1000)), "--db", str(db),
                   "--link-backend", "delayline")
    assert out.returncode == 0, out.stdout + out.stderr
    key = rows(db, "SELECT key, status FROM runs")[0]["key"]
    used = json.loads(rows(db, "SELECT delay_json FROM link_stats WHERE run_key = ? AND link = 'cell' AND "
                              "direction = 'reverse'", key)[0]["delay_json"])["trace"]
    traces = qlog.read_all(timeline.qlog_files(db, key))[0]
    client, server = (next(t.events for t in traces if t.vantage == side) for side in ("client", "server"))
    # fecq's client logs what it received without lengths: the server's log of the same packets has them
    sent = server[server["kind"] == "sent"].drop_duplicates(["packet_type", "packet_number"])
    got = client[client["kind"] == "received"].merge(sent[["packet_type", "packet_number", "bytes"]],
                                                      on=["packet_type", "packet_number"], suffixes=("_", ""))
    assert len(got) > 5000 and got["bytes"].notna().all(), len(got)
    at_s = got["t_abs_s"] - used["started_unix_s"]          # on the trace's clock
    trace = load_trace(used["path"])
    per_bin = 1000 // used["idle_bin_ms"]
    busy, lines = 0, []
    for second in range(int(at_s.max())):
        idle = used["idle"][second * per_bin:(second + 1) * per_bin]
        if len(idle) < per_bin or any(idle):
            continue   # the link idled in this second: the sender, not the link, set its pace
        window = (at_s > second) & (at_s <= second + 1)
        carried = float((got.loc[window, "bytes"] + 32).sum())
        capacity = sum(second * 1000 < ms <= (second + 1) * 1000 for ms in trace.offsets_ms) * 1504
        busy += 1
        lines.append(f"second {second}: {carried * 8 / 1e6:.3f} of {capacity * 8 / 1e6:.3f} Mbit "
                     f"({carried / capacity:.4f})")
        assert capacity and abs(carried / capacity - 1) <= 0.05, lines
    print("\n".join(lines))
    assert busy >= 5, (busy, used["idle"])   # the download kept the link busy most of the time
