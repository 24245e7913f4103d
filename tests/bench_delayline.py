"""Measure the delay element (not a test): `.venv/bin/python tests/bench_delayline.py [--quick]` as root.

Prints one JSON object: one-way delay error (median, p99) at 1000 pps for several delays, TCP goodput
through tbf at 10 and 100 Mbit/s as a fraction of the tbf rate, and the delayline's CPU use at
100 Mbit/s. Runs on the namespace line A — D — B of tests/helpers/delayline_line.py, offloads off.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: fecbench and tests

from fecbench.timekeeping.delayline import DelayLine  # noqa: E402
from tests.helpers.delayline_line import ADDR_B, Line, line  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def delay_error(net: Line, dl: DelayLine, owd_ms: float, seconds: float) -> dict:
    dl.set_delay(ab_ms=owd_ms, ba_ms=owd_ms)
    n = int(1000 * seconds)
    got = net.udp(n, rate=1000, size=200, idle=1.0)
    # Error at the receiver's stack (kernel timestamp), and as seen by the receiving process.
    stack = [(kernel - sent) / 1e6 - owd_ms for _, _, _, sent, kernel in got]
    process = [(recv - sent) / 1e6 - owd_ms for _, sent, recv, _, _ in got]
    return {"owd_ms": owd_ms, "packets": n, "received": len(got),
            "error_median_ms": round(statistics.median(stack), 4),
            "error_p99_ms": round(quantile(stack, 0.99), 4),
            "error_max_ms": round(max(stack), 4),
            "process_error_median_ms": round(statistics.median(process), 4),
            "process_error_p99_ms": round(quantile(process, 0.99), 4)}


def burst(net: Line, dl: DelayLine, n: int, owd_ms: float) -> dict:
    """n small UDP datagrams as fast as one Python sender goes: does the delayline keep every one?"""
    dl.set_delay(ab_ms=owd_ms, ba_ms=owd_ms)
    before = dl.stats()["ab"]
    got = net.udp(n, rate=0, size=64, idle=1.0)
    after = dl.stats()["ab"]
    sent_s = (max(r[1] for r in got) - min(r[1] for r in got)) / 1e9 if got else 0.0
    return {"packets": n, "owd_ms": owd_ms, "sender_pps": round(len(got) / sent_s) if sent_s else None,
            **{k: after[k] - before[k] for k in ("rx", "tx", "drop_queue", "drop_egress", "errors")},
            "max_queue": after["max_queue"], "received_by_app": len(got)}


def rate(net: Line, dl: DelayLine, mbit: float, owd_ms: float, seconds: float) -> dict:
    """TCP goodput (iperf3) through tbf on D's egress towards B, queue = one BDP (at least 10 packets)."""
    dl.set_delay(ab_ms=owd_ms, ba_ms=owd_ms)
    bdp = int(mbit * 1e6 / 8 * 2 * owd_ms / 1e3)
    limit = max(bdp, 10 * 1514)
    net.exec(net.ns["D"], ["tc", "qdisc", "replace", "dev", net.if_b, "root", "tbf", "rate", f"{mbit}mbit",
                           "burst", "15kb", "limit", str(limit)])
    server = net.popen("B", ["iperf3", "-s", "-1", "-B", ADDR_B, "-p", "5201"])
    time.sleep(0.3)
    cpu0, t0 = cpu_seconds(dl.pid), time.monotonic()
    out = net.exec(net.ns["A"], ["iperf3", "-c", ADDR_B, "-p", "5201", "-t", str(seconds), "-O", "1", "-J"],
                   timeout=seconds + 30).stdout
    cpu1, t1 = cpu_seconds(dl.pid), time.monotonic()
    server.communicate(timeout=10)
    net.exec(net.ns["D"], ["tc", "qdisc", "del", "dev", net.if_b, "root"])
    received = json.loads(out)["end"]["sum_received"]["bits_per_second"]
    return {"mbit": mbit, "owd_ms": owd_ms, "achieved_mbit": round(received / 1e6, 3),
            "achieved_ratio": round(received / (mbit * 1e6), 4),
            "cpu_percent": round(100 * (cpu1 - cpu0) / (t1 - t0), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 5.0
    with line("dlb") as net:
        net.offloads(False)
        with DelayLine.start(net.if_a, net.if_b, 0.0, 0.0, run_in=net.run_in("D"), name="bench") as dl:
            baseline = delay_error(net, dl, 0.0, seconds)
            delays = [delay_error(net, dl, owd, seconds) for owd in (10.0, 50.0, 200.0, 400.0)]
            rates = [rate(net, dl, mbit, 10.0, seconds + 3) for mbit in (10.0, 100.0)]
            high_rate = burst(net, dl, 100_000, 50.0)
            stats = dl.stats()
    print(json.dumps({"backend": "delayline", "baseline_no_delay": baseline, "delay": delays, "rate": rates,
                      "cpu_percent_at_100mbit": rates[-1]["cpu_percent"], "burst": high_rate,
                      "stats": stats}, indent=1))


if __name__ == "__main__":
    main()
