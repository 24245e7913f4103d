"""Packet-delivery traces (Mahimahi's format) as inputs: checked as the delay element checks them, what they offer
(capacity per bin, longest wait), and a topology's trace links: a file or a factor, the queue they accept, the
rate beside them they refuse (issue 71 item 1; the replay itself: tests/test_trace_link.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fecbench.emulation import load_topology
from fecbench.inputs.errors import UserError
from fecbench.inputs.traces import load_trace
from tests.test_trace_link import synthetic_trace, trace_topology


@pytest.mark.parametrize("text, problem", [
    ("", "no delivery opportunities"), ("0\n0\n", "lasts 0 ms"), ("5\n3\n", "line 2: 3 ms is before"),
    ("5\n\n6\n", "line 2: expected"), ("5\n-6\n", "line 2: expected"), ("1 2\n", "line 1: expected"),
])
def test_a_trace_that_is_not_one_is_refused_naming_its_line(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "t.down").write_text(text)
    with pytest.raises(UserError, match=problem):
        load_trace(tmp_path / "t.down")


def test_what_a_trace_offers(tmp_path: Path) -> None:
    trace = load_trace(synthetic_trace(tmp_path / "steps.down"))
    assert trace.period_ms == 8000 and len(trace.offsets_ms) == 4500 and trace.longest_wait_ms == 2002
    assert len(trace.sha256) == 64
    per_second = trace.capacity_mbit(bin_ms=1000)
    assert per_second[:3] == [pytest.approx(12.032)] * 3 and per_second[3:5] == [0.0, 0.0]
    assert per_second[5:] == [pytest.approx(6.016)] * 3
    assert trace.mean_mbit == pytest.approx(4500 * 1504 * 8 / 8e6)
    # looping: 1 s from 7.5 s into the trace holds the last 0.5 s of slow phase and the first 0.5 s of the fast one
    assert trace.capacity_mbit(1000, start_ms=7500, length_ms=1000) == [pytest.approx((250 + 500) * 1504 * 8 / 1e6)]
    assert load_trace(tmp_path / "steps.down") is trace   # read once while unchanged


def test_a_topology_names_its_trace_by_file_or_factor(tmp_path: Path) -> None:
    synthetic_trace(tmp_path / "steps.down")
    slow = tmp_path / "slow.down"
    slow.write_text("10\n")
    topo = load_topology(trace_topology(tmp_path, "steps.down"))
    forward = topo.resolve({})["cell"]["forward"]
    assert forward.trace == str((tmp_path / "steps.down").resolve()) and (forward.queue, forward.queue_unit) == \
        (50, "packets") and forward.bw is None
    assert topo.resolve({})["cell"]["reverse"].trace is None
    spec = trace_topology(tmp_path, "link_trace", 'queue = "30kB"', factors='link_trace = "steps.down"')
    topo = load_topology(spec)
    assert topo.factors() == {"link_trace"}   # a literal queue ("30kB") is no factor
    assert topo.resolve({})["cell"]["forward"].trace.endswith("steps.down")
    assert topo.resolve({"link_trace": "slow.down"})["cell"]["forward"].trace.endswith("slow.down")
    assert topo.resolve({})["cell"]["forward"].queue_unit == "bytes"
    with pytest.raises(UserError, match="missing.down: cannot read it"):
        topo.resolve({"link_trace": "missing.down"})


def test_trace_links_refuse_what_they_cannot_be(tmp_path: Path) -> None:
    (tmp_path / "bad.down").write_text("5\n3\n")
    with pytest.raises(UserError, match="line 2.*never go back"):
        load_topology(trace_topology(tmp_path, "bad.down"))
    synthetic_trace(tmp_path / "steps.down")
    for queue in ('queue = "50ms"', 'queue = "bdp"'):
        with pytest.raises(UserError, match="needs a rate it does not have"):
            load_topology(trace_topology(tmp_path, "steps.down", queue)).resolve({})
    with pytest.raises(UserError, match="bw or trace, not both"):
        load_topology(trace_topology(tmp_path, "steps.down", "bw = 10"))
    topo = load_topology(trace_topology(tmp_path, "steps.down", ""))
    assert topo.resolve({})["cell"]["forward"].describe_queue().startswith("unlimited")


def test_the_corpus_is_what_its_readme_says() -> None:
    """traces/README.md: every trace file listed with its opportunities, loop, mean capacity and hash, and no other."""
    import re

    root = Path(__file__).resolve().parent.parent / "traces"
    row = r"^\| `([^`]+)` \| ([\d,]+) \| ([\d.]+) s \| ([\d.]+) Mbit/s \| ([\d,]+) ms \| `([0-9a-f]+)…` \|$"
    rows = re.findall(row, (root / "README.md").read_text(), re.M)
    listed = {name for name, *_ in rows}
    on_disk = {p.name for p in (root / "mahimahi").iterdir() if p.suffix in (".down", ".up")}
    assert listed == on_disk and rows
    for name, count, loop_s, mbit, gap, digest in rows:
        trace = load_trace(root / "mahimahi" / name)
        assert len(trace.offsets_ms) == int(count.replace(",", "")) and trace.period_ms == round(float(loop_s) * 1000)
        assert f"{trace.mean_mbit:.2f}" == mbit and trace.longest_wait_ms == int(gap.replace(",", ""))
        assert trace.sha256.startswith(digest)


def test_a_rate_series_converts_to_the_trace_it_describes(tmp_path: Path) -> None:
    """`fecbench trace convert`: 12.032 Mbit/s for 3 s, nothing for 2 s, 6.016 Mbit/s for 3 s is the synthetic trace
    of tests/test_trace_link.py, byte for byte; units are read from the header (kbit/s and ms here), never guessed."""
    import subprocess
    import sys

    (tmp_path / "steps.csv").write_text("# a published series\ntime_ms,kbps\n0,12032\n3000,0\n5000,6016\n8000,0\n")
    run = [sys.executable, "-m", "fecbench", "trace", "convert", str(tmp_path / "steps.csv")]
    out = subprocess.run([*run, "-o", str(tmp_path / "steps.down")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    expected = load_trace(synthetic_trace(tmp_path / "expected.down"))
    assert load_trace(tmp_path / "steps.down").sha256 == expected.sha256
    again = subprocess.run([*run, "-o", str(tmp_path / "steps.down")], capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "exists" in again.stderr
    for bad, problem in (("when,rate\n0,1\n1,1\n", "names no time column"), ("time_s,mbit_s\n0,1\n", "two rows"),
                         ("time_s,mbit_s\n0,1\n0,2\n", "times must grow"), ("time_s,mbit_s\n0,x\n1,1\n", "row 2")):
        (tmp_path / "bad.csv").write_text(bad)
        out = subprocess.run([sys.executable, "-m", "fecbench", "trace", "convert", str(tmp_path / "bad.csv"), "-o",
                              str(tmp_path / "bad.down")], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and problem in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("text, problem", [
    ("5 10\n9 20\n", "first step starts at offset 0"), ("0 10\n9 20\n5 1\n", "line 3: offsets never go back"),
    ("0 10\n", "at least two lines"), ("0 -1\n5 1\n", "line 1: expected"), ("0 nan\n5 1\n", "line 1"),
    ("0 70000\n5 1\n", "line 1"), ("0 10 3\n5 1\n", "line 1"),
])
def test_a_delay_series_that_is_not_one_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    from fecbench.inputs.traces import load_delays

    (tmp_path / "s.delays").write_text(text)
    with pytest.raises(UserError, match=problem):
        load_delays(tmp_path / "s.delays")


def test_a_delay_series_and_the_ping_log_it_comes_from(tmp_path: Path) -> None:
    """The step in force at each instant (looping), as the delay element's unit tests check it in C; a `ping -D` log
    as a series of half each RTT, its unanswered requests counted (not converted), a log without times refused."""
    import subprocess
    import sys

    from fecbench.inputs.traces import load_delays

    (tmp_path / "s.delays").write_text("0 27.5\n15000,40\n15000 45.25\r\n30000 0\n")
    series = load_delays(tmp_path / "s.delays")
    assert series.span_ms == (27.5, 45.25) and series.period_ms == 30000
    assert [series.delay_at(t) for t in (0, 14999, 15000, 29999, 30000, 45001)] == [27.5, 27.5, 45.25, 45.25, 27.5,
                                                                                    45.25]
    (tmp_path / "ping.log").write_text(
        "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n"
        + "".join(f"[1700000000.{k * 20:03d}000] 64 bytes from 10.0.0.2: icmp_seq={k + 1} ttl=64 time={rtt} ms\n"
                  for k, rtt in ((0, 40.0), (1, 41.2), (3, 90.5), (4, 44))))
    out = subprocess.run([sys.executable, "-m", "fecbench", "trace", "convert", str(tmp_path / "ping.log"), "-o",
                          str(tmp_path / "ping.delays")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "1 request(s) got no reply" in " ".join(out.stdout.split()), out.stderr
    assert (tmp_path / "ping.delays").read_text() == "0 20\n20 20.6\n60 45.25\n80 22\n100 22\n"
    (tmp_path / "bare.log").write_text("64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=40.0 ms\n" * 3)
    out = subprocess.run([sys.executable, "-m", "fecbench", "trace", "convert", str(tmp_path / "bare.log"), "-o",
                          str(tmp_path / "bare.delays")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "ping -D" in out.stderr


def test_a_topology_takes_a_delay_series_instead_of_a_delay(tmp_path: Path) -> None:
    from tests.test_trace_link import cell_topology

    (tmp_path / "s.delays").write_text("0 30\n1000 70\n2000 0\n")
    topo = load_topology(cell_topology(tmp_path, '[link.forward]\ndelays = "s.delays"\n[link.reverse]\nowd = 5'))
    forward = topo.resolve({})["cell"]["forward"]
    assert forward.delays.endswith("s.delays") and forward.owd == 30 and topo.configured_rtt(0, topo.resolve({})) == 35
    with pytest.raises(UserError, match="owd or delays, not both"):
        load_topology(cell_topology(tmp_path, 'owd = 5\n[link.forward]\ndelays = "s.delays"'))
    with pytest.raises(UserError, match="cannot read it"):
        load_topology(cell_topology(tmp_path, '[link.forward]\ndelays = "missing.delays"'))


def test_logs_stamped_with_dates_and_rate_columns_named_by_unit(tmp_path: Path) -> None:
    """Measurement logs as some studies publish them (e.g. NUWiNS' Starlink trips, which we may not redistribute):
    ping lines stamped "[YYYY-MM-DD HH:MM:SS.ffffff]", iperf-like CSVs with an ISO `time` column and a rate column
    named by its unit's suffix ("throughput_mbps")."""
    from fecbench.inputs.traces import delays_from_ping, opportunities_from_rates, rate_series_from_csv

    times, rates = rate_series_from_csv("time,throughput_mbps,retrans\n2024-05-27T11:48:48.000000,6.0,1\n"
                                        "2024-05-27T11:48:48.500000,12.0,0\n2024-05-27 11:48:49.500000,0,0\n", "t.csv")
    assert times == [0.0, 0.5, 1.5] and rates == [6.0, 12.0, 0.0]
    offsets = opportunities_from_rates(times, rates)
    assert offsets[-1] == 1500 and abs(len(offsets) - 15e6 / 8 / 1504) <= 2   # 15 Mbit in 1.5 s, to within one
    log = "".join(f"[2024-05-27 11:50:5{k}.000000] 46 bytes from 10.0.0.2: icmp_seq={k + 1} ttl=58 time={40 + k} ms\n"
                  for k in range(3))
    assert delays_from_ping(log, "p.out") == ([0, 1000, 2000, 3000], [20.0, 20.5, 21.0, 21.0], 0)


def test_a_ping_logs_unanswered_requests_become_a_schedule_of_outages(tmp_path: Path) -> None:
    """Issue 71 item 2's loss events: requests 3 and 4 of a 200 ms ping went unanswered: one outage of two intervals
    from request 3's sending (0.36 s on the delay series' clock), as a link schedule that loads."""
    import subprocess
    import sys

    from fecbench.emulation.schedule import load_schedule
    from fecbench.inputs.traces import outages_from_ping

    log = "".join(f"[1700000000.{ms:03d}000] 64 bytes from 10.0.0.2: icmp_seq={seq} ttl=64 time=40.0 ms\n"
                  for seq, ms in ((1, 0), (2, 200), (5, 800), (6, 999)))
    assert outages_from_ping(log, "l.log") == [(0.36, 400.0)]
    (tmp_path / "l.log").write_text(log)
    run = [sys.executable, "-m", "fecbench", "trace", "convert", str(tmp_path / "l.log"), "-o",
           str(tmp_path / "l.delays")]
    out = subprocess.run([*run, "--losses-to", str(tmp_path / "l.toml"), "--link", "cell"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    changes = load_schedule(tmp_path / "l.toml").changes
    assert [(c.link, c.directions, c.times, c.outage_ms) for c in changes] == \
        [("cell", ("forward", "reverse"), [0.36], (400.0, 400.0))], changes
    lone = subprocess.run([*run, "--force", "--losses-to", str(tmp_path / "m.toml")], capture_output=True, text=True,
                          timeout=60)
    assert lone.returncode == 2 and "--losses-to and --link go together" in lone.stderr


def test_the_duration_model_takes_a_trace_links_capacity_for_its_rate() -> None:
    """A design over topologies/lte-trace.toml gives no bw: its runs' expected duration uses the slowest trace's mean
    capacity (Verizon's downlink, 5.04 Mbit/s), not the model's 10 Mbit/s default."""
    from fecbench.runners.experiment.prepare import prepare
    from fecbench.runners.experiment.runs import estimate_seconds, trace_rate

    root = Path(__file__).resolve().parent.parent
    down = load_trace(root / "traces" / "mahimahi" / "Verizon-LTE-short.down")
    assert trace_rate(str(root / "topologies" / "lte-trace.toml")) == down.mean_mbit
    assert trace_rate(str(root / "topologies" / "single.toml")) is None
    prepared = prepare(root / "designs" / "rquic2021-lte-trace.toml", require_built=False)
    lossless = next(r for r in prepared.runs if float(r.values["p"]) == 0)
    assert estimate_seconds(lossless, prepared.design) > 5 * 2**20 * 8 / (down.mean_mbit * 1e6)
