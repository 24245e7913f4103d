"""A three-namespace line A — D — B for testing and measuring the delay element.

A and B are end hosts (10.77.0.1 and 10.77.0.2, one subnet); D holds the delayline bridging its two
veth ends `da` (towards A) and `db` (towards B). IPv6 is off and the neighbours are static, so the
only frames on the line are the ones a test sends. Everything carries a per-process prefix, is
recorded with fecbench.host.cleanup, and is removed by `close()`.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator

from fecbench.host import cleanup

ADDR_A, ADDR_B = "10.77.0.1", "10.77.0.2"

# A UDP receiver: prints "listening", then one JSON list of [seq, sent_ns, received_ns, sent_real_ns,
# kernel_real_ns] once no packet came for `idle` seconds. The *_ns times are CLOCK_MONOTONIC (the same
# clock in every namespace) when the sender sent and the receiver read; the *_real_ns ones are
# CLOCK_REALTIME when the sender sent and when the frame entered the receiver's stack (SO_TIMESTAMPNS),
# which leaves out the receiving process's own wake-up latency.
UDP_SINK = r"""
import json, socket, struct, sys, time
addr, port, idle = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Python < 3.12 lacks the name (35 on Linux)
s.setsockopt(socket.SOL_SOCKET, TIMESTAMPNS, 1)
s.bind((addr, port))
print("listening", flush=True)
got = []
s.settimeout(idle)
try:
    while True:
        data, anc, _, _ = s.recvmsg(65536, 64)
        now = time.monotonic_ns()
        kernel = 0
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                kernel = sec * 10**9 + nsec
        got.append([int.from_bytes(data[0:8], "big"), int.from_bytes(data[8:16], "big"), now,
                    int.from_bytes(data[16:24], "big"), kernel])
except socket.timeout:
    pass
print(json.dumps(got))
"""

# A UDP sender: n datagrams of `size` bytes at `rate` per second (0: as fast as possible), each
# carrying its sequence number and send times (monotonic, realtime).
UDP_SOURCE = r"""
import socket, sys, time
addr, port, n, rate, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
pad = bytes(size - 24)
start = time.monotonic()
for i in range(n):
    if rate:
        while (wait := start + i / rate - time.monotonic()) > 0:
            time.sleep(wait)
    stamp = time.monotonic_ns().to_bytes(8, "big") + time.time_ns().to_bytes(8, "big")
    s.sendto(i.to_bytes(8, "big") + stamp + pad, (addr, port))
"""

# A TCP receiver: prints "listening", then "<bytes> <sha256>" of everything one connection delivered.
TCP_SINK = r"""
import hashlib, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("listening", flush=True)
conn, _ = s.accept()
h, total = hashlib.sha256(), 0
while chunk := conn.recv(1 << 20):
    h.update(chunk)
    total += len(chunk)
print(total, h.hexdigest(), flush=True)
"""

# A TCP sender: `size` bytes of a deterministic pseudo-random stream; prints "<bytes> <sha256>".
TCP_SOURCE = r"""
import hashlib, socket, sys
addr, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = hashlib.shake_256(b"delayline").digest(1 << 20)
s = socket.create_connection((addr, port))
h, sent = hashlib.sha256(), 0
while sent < size:
    chunk = block[: min(len(block), size - sent)]
    s.sendall(chunk)
    h.update(chunk)
    sent += len(chunk)
s.shutdown(socket.SHUT_WR)
s.recv(1)
print(sent, h.hexdigest(), flush=True)
"""


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


class Line:
    """Namespaces A, D, B joined by two veth pairs; D's ends are self.if_a and self.if_b."""

    def __init__(self, tag: str = "dl") -> None:
        p = f"{cleanup.prefix()}{tag}"
        self.ns = {"A": f"{p}A", "D": f"{p}D", "B": f"{p}B"}
        self.host_a, self.host_b = f"{p}a", f"{p}b"
        self.if_a, self.if_b = f"{p}da", f"{p}db"
        self._procs: list[subprocess.Popen] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        for ns in self.ns.values():
            run(["ip", "netns", "add", ns])
            cleanup.record("netns", ns)
            self.exec(ns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                           "net.ipv6.conf.default.disable_ipv6=1"])
        for host, dev, host_ns in ((self.host_a, self.if_a, "A"), (self.host_b, self.if_b, "B")):
            run(["ip", "link", "add", host, "netns", self.ns[host_ns], "type", "veth",
                 "peer", "name", dev, "netns", self.ns["D"]])
        run(["ip", "-n", self.ns["A"], "addr", "add", f"{ADDR_A}/24", "dev", self.host_a])
        run(["ip", "-n", self.ns["B"], "addr", "add", f"{ADDR_B}/24", "dev", self.host_b])
        for ns, dev in (("A", self.host_a), ("B", self.host_b), ("D", self.if_a), ("D", self.if_b)):
            run(["ip", "-n", self.ns[ns], "link", "set", dev, "up"])
        mac = {ns: json.loads(run(["ip", "-n", self.ns[ns], "-j", "link", "show", dev]).stdout)[0]["address"]
               for ns, dev in (("A", self.host_a), ("B", self.host_b))}
        run(["ip", "-n", self.ns["A"], "neigh", "replace", ADDR_B, "lladdr", mac["B"], "dev", self.host_a,
             "nud", "permanent"])
        run(["ip", "-n", self.ns["B"], "neigh", "replace", ADDR_A, "lladdr", mac["A"], "dev", self.host_b,
             "nud", "permanent"])

    @staticmethod
    def exec(ns: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return run(["ip", "netns", "exec", ns, *argv], **kw)

    def run_in(self, node: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns[node]]

    def offloads(self, on: bool) -> None:
        """Segmentation offloads on the end hosts (off: one wire packet per frame, as on emulated links)."""
        state = "on" if on else "off"
        for ns, dev in (("A", self.host_a), ("B", self.host_b)):
            self.exec(self.ns[ns], ["ethtool", "-K", dev, "tso", state, "gso", state])

    def popen(self, node: str, argv: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen([*self.run_in(node), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        self._procs.append(proc)
        return proc

    def python(self, node: str, script: str, *args: object) -> subprocess.Popen:
        return self.popen(node, [sys.executable, "-c", script, *map(str, args)])

    @staticmethod
    def wait_listening(proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "listening":
            raise RuntimeError(f"receiver did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")

    def udp(self, n: int, rate: float, size: int = 1000, idle: float = 1.5) -> list[list[int]]:
        """Send n UDP datagrams from A to B; return the UDP_SINK rows of those that arrived."""
        sink = self.python("B", UDP_SINK, ADDR_B, 5000, idle)
        self.wait_listening(sink)
        self.exec(self.ns["A"], [sys.executable, "-c", UDP_SOURCE, ADDR_B, "5000", str(n), str(rate), str(size)])
        out, err = sink.communicate(timeout=idle + 60)
        if sink.returncode:
            raise RuntimeError(f"UDP receiver failed: {err}")
        return json.loads(out)

    def ping(self, count: int = 5, interval: float = 0.05) -> dict[str, float]:
        out = self.exec(self.ns["A"], ["ping", "-q", "-c", str(count), "-i", str(interval), ADDR_B]).stdout
        # rtt min/avg/max/mdev = 20.1/20.2/20.3/0.05 ms
        values = out.strip().splitlines()[-1].split("=")[1].split()[0].split("/")
        return dict(zip(("min", "avg", "max", "mdev"), map(float, values), strict=True))

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(Exception):
                proc.communicate(timeout=5)
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)
            cleanup.forget("netns", ns)


@contextlib.contextmanager
def line(tag: str = "dl") -> Iterator[Line]:
    built = Line(tag)
    try:
        yield built
    finally:
        built.close()
