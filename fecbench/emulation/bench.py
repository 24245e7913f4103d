"""`fecbench link bench`: accuracy and throughput of the link emulation on a three-node line
(client — delay node — server), plus build / reconfigure / teardown times of topologies/single.toml.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fecbench.emulation import traffic
from fecbench.emulation.network import Network
from fecbench.emulation.spec import DirectionSpec, LinkSpec, NodeSpec, Topology
from fecbench.emulation.topology_file import load_topology
from fecbench.host.paths import TOPOLOGIES_DIR

DELAYS_MS = (10, 50, 200, 400)
RATES_MBIT = (10, 100)
PROBE_PPS = 1000
PROBE_PORT = 9000
WIRE_FACTOR = (1400 + 42) / 1400     # Ethernet + IPv4 + UDP headers around iperf3's 1400-byte payload


def line_topology() -> Topology:
    """Two hosts joined by one shaped link (so three nodes with its delay node)."""
    shaped = DirectionSpec(bw="bw", owd="owd", queue="queue")
    return Topology(file="<link bench>", name="line", description="client — delay node — server",
                    client="client", server="server",
                    nodes=[NodeSpec("client", "host"), NodeSpec("server", "host")],
                    links=[LinkSpec("line", "client", "server", shaped, DirectionSpec(**vars(shaped)))],
                    path_nodes=[["client", "server"]],
                    defaults={"bw": 1000.0, "owd": 10.0, "queue": "bdp"})


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def one_way_errors(net: Network, owd_ms: float, count: int) -> dict[str, Any]:
    """Send `count` datagrams at 1000 pps; error = measured one-way delay − configured."""
    result = net.send_probe(net.client_addresses[0], count, PROBE_PPS, port=PROBE_PORT,
                            timeout=count / PROBE_PPS + owd_ms / 1000 + 5)
    errors = [d - owd_ms for d in result["owd_ms"]]
    return {"owd_ms": owd_ms, "packets": count, "received": result["received"],
            "error_median_ms": round(statistics.median(errors), 4) if errors else None,
            "error_p99_ms": round(percentile(errors, 0.99), 4) if errors else None}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SINGLE_SPEC = TOPOLOGIES_DIR / "single.toml"


def topology_times(backend: str | None, spec: Path = SINGLE_SPEC) -> dict[str, Any]:
    """Build, reconfigure and tear down a single-path network (with its delay nodes and droppers)."""
    topo = load_topology(spec)
    net = Network(topo, {"bw": 10, "owd": 20}, backend=backend)
    with net:
        t0 = time.perf_counter()
        net.configure({"bw": 20, "owd": 30, "queue": 50})
        configure_s = time.perf_counter() - t0
    return {"spec": str(spec), "build_s": round(net.timings["build_s"], 4),
            "configure_ms": round(configure_s * 1000, 2), "stop_s": round(net.timings["stop_s"], 4),
            "droppers": not net.dropper_error}


def run(backend: str | None = None, packets: int = 1000, rate_seconds: float = 2.0,
        progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": None, "delay": [], "rate": [], "cpu_percent_at_100mbit": None}
    with Network(line_topology(), {}, backend=backend) as net:
        out["backend"] = net.backend
        for owd in DELAYS_MS:
            progress(f"one-way delay {owd} ms")
            net.configure({"owd": owd, "bw": 1000.0})
            out["delay"].append(one_way_errors(net, float(owd), packets))
        dl = net.delaylines.get("line")
        for mbit in RATES_MBIT:
            progress(f"rate {mbit} Mbit/s")
            net.configure({"owd": 10, "bw": float(mbit)})
            cpu0, t0 = (cpu_seconds(dl.pid) if dl else 0.0), time.monotonic()
            measured, offered = traffic.udp_rates(net, net.client_addresses[0], float(mbit), seconds=rate_seconds)
            cpu1, t1 = (cpu_seconds(dl.pid) if dl else 0.0), time.monotonic()
            # achieved_ratio counts UDP payload; wire_ratio adds the 42 header bytes tbf also counts.
            # offered_wire_ratio: what the sender managed to send, on the same scale (asked: 1.1); below 1 the link
            # was never full (a slow CPU), and what it passed says nothing of the configured rate.
            out["rate"].append({"mbit": mbit, "measured_mbit": measured and round(measured, 3),
                                "achieved_ratio": measured and round(measured / mbit, 4),
                                "wire_ratio": measured and round(measured * WIRE_FACTOR / mbit, 4),
                                "offered_wire_ratio": offered and round(offered * WIRE_FACTOR / mbit, 4)})
            if mbit == 100 and dl:
                out["cpu_percent_at_100mbit"] = round(100 * (cpu1 - cpu0) / (t1 - t0), 2)
    progress("topology build / reconfigure / teardown")
    out["topology"] = topology_times(backend)
    out["line"] = {"build_s": round(net.timings["build_s"], 4), "stop_s": round(net.timings["stop_s"], 4)}
    return out
