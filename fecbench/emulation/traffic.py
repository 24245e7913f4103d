"""Measurement traffic through a running network (fecbench.emulation.Network): numbered UDP probes
(one-way delays, order, losses) and an iperf3 UDP stream (rate). Both run on the client and server
hosts, so in the network's endpoint group like any run's processes."""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def iperf3_error(json_out: str) -> str | None:
    """The error of an `iperf3 -J` run, if any: Debian 12's iperf3 3.12 exits with status 0 when its
    client cannot connect ("Connection refused" before the server listens), saying so only in the JSON."""
    try:
        return json.loads(json_out).get("error")
    except (json.JSONDecodeError, AttributeError):
        return "no JSON output"


def send_probe(net: Any, src: str, count: int, pps: float = 1000.0, port: int = 9000,
               timeout: float | None = None) -> dict[str, Any]:
    """Send `count` numbered datagrams from the client's address `src` to the server; returns
    the receiver's view: {"received", "seq" (arrival order), "owd_ms"}. With losses, the
    receiver stops after 1 s + 2 RTT without a datagram."""
    rtt_s = max(net.topo.configured_rtt(i, net.shaping) for i in range(net.topo.paths)) / 1e3
    timeout = timeout if timeout is not None else count / pps + rtt_s + 30
    probe = [sys.executable, "-m", "fecbench.emulation.probe"]
    recv = net.server.popen([*probe, "recv", "--bind", net.server_address, "--port", str(port),
                             "--count", str(count), "--timeout", str(timeout),
                             "--idle", str(1 + 2 * rtt_s)], text=True)
    try:
        assert recv.stdout is not None
        if recv.stdout.readline().strip() != "ready":
            raise RuntimeError(f"probe receiver failed: {recv.communicate()[1]}")
        sender = net.client.popen([*probe, "send", "--dst", net.server_address, "--port", str(port),
                                   "--count", str(count), "--pps", str(pps), "--bind", src], text=True)
        _, err = sender.communicate(timeout=count / pps + 30)
        if sender.returncode != 0:
            raise RuntimeError(f"probe sender failed: {err}")
        out, _ = recv.communicate(timeout=timeout + 30)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    return json.loads(out.strip().splitlines()[-1])


def udp_rate(net: Any, src: str, mbit: float, seconds: float = 1.0, port: int = 5201) -> float | None:
    """UDP payload throughput (Mbit/s) the server receives from an iperf3 stream of 1400-byte
    datagrams sent at 1.1× `mbit` (on the wire each datagram is 42 bytes longer)."""
    return udp_rates(net, src, mbit, seconds, port)[0]


def udp_rates(net: Any, src: str, mbit: float, seconds: float = 1.0,
              port: int = 5201) -> tuple[float | None, float | None]:
    """(received, offered): the UDP payload throughput (Mbit/s) the server received, and what the client managed
    to send. A sender on a slow (e.g. emulated) CPU may offer less than the 1.1× `mbit` it was asked for: then the
    link was never full (`fecbench link bench` reports both)."""
    server = net.server.popen(["iperf3", "-s", "-1", "-B", net.server_address, "-p", str(port), "-J"],
                              text=True)
    try:
        client_out = ""
        for _ in range(40):
            client = net.client.popen(["iperf3", "-u", "-c", net.server_address, "-B", src, "-p", str(port),
                                       "-b", f"{mbit * 1.1:.3f}M", "-l", "1400", "-t", f"{seconds:g}", "-J"],
                                      text=True)
            client_out, _ = client.communicate(timeout=seconds + 30)
            if client.returncode == 0 and not iperf3_error(client_out):
                break
            time.sleep(0.05)
        out, _ = server.communicate(timeout=seconds + 30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return _mbit(out, "sum_received"), _mbit(client_out, "sum_sent")


def _mbit(iperf3_json: str, part: str) -> float | None:
    """bits_per_second of an iperf3 -J report's `part` of its end (its `sum` when it has no such part), in Mbit/s."""
    try:
        end = json.loads(iperf3_json)["end"]
        return end.get(part, end["sum"])["bits_per_second"] / 1e6
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
