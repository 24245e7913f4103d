"""One-way delay probe, run inside two nodes of an emulated network (both share this machine's clock).

    python -m fecbench.emulation.probe recv --bind ADDR --port P --count N --timeout S
    python -m fecbench.emulation.probe send --dst ADDR --port P --count N --pps R [--size B] [--bind SRC]
                                             [--start-at T]

The sender stamps each datagram with CLOCK_REALTIME; the receiver takes the kernel's receive
timestamp (SO_TIMESTAMPNS), so Python's scheduling delays on the receiving side do not count.
The receiver prints one JSON line: {"received": n, "owd_ms": [...], "seq": [...], "rx_ns": [...]} in
arrival order (rx_ns: the receive timestamps, CLOCK_REALTIME ns). `--pps 0` sends as fast as it can (a
burst); `--size` is the UDP payload (bytes, ≥ 12).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

HEADER = struct.Struct("!IQ")          # sequence number, send time (ns, CLOCK_REALTIME)
TIMESPEC = struct.Struct("@ll")
PAYLOAD_BYTES = 200
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)   # Linux value; Python 3.11 lacks the name


def receive(bind: str, port: int, count: int, timeout: float, idle: float | None = None) -> dict:
    """Until `count` datagrams arrived, `timeout` passed, or (after the first) `idle` s of silence."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((bind, port))
    print("ready", flush=True)
    owds: list[float] = []
    seqs: list[int] = []
    arrivals: list[int] = []
    deadline = time.monotonic() + timeout
    while len(owds) < count and (left := deadline - time.monotonic()) > 0:
        sock.settimeout(min(left, idle) if idle and owds else left)
        try:
            data, anc, _, _ = sock.recvmsg(2048, 64)
        except TimeoutError:
            break
        seq, sent_ns = HEADER.unpack_from(data)
        seqs.append(seq)
        rx_ns = time.time_ns()
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = TIMESPEC.unpack(value[:TIMESPEC.size])
                rx_ns = sec * 1_000_000_000 + nsec
        owds.append((rx_ns - sent_ns) / 1e6)
        arrivals.append(rx_ns)
    return {"received": len(owds), "owd_ms": owds, "seq": seqs, "rx_ns": arrivals}


def send(dst: str, port: int, count: int, pps: float, bind: str | None = None,
         start_at: str | None = None, size: int = PAYLOAD_BYTES) -> None:
    """Datagram i leaves at start + i / pps (pps 0: all at once); start: now, or ``start_at`` (CLOCK_MONOTONIC
    seconds, which every network namespace shares: a test can line packets up with a link schedule's clock). With
    ``start_at = "stdin"`` the sender prints "ready" and reads that time from its standard input, so a
    slow start-up (an emulated machine) cannot make it late."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if bind:
        sock.bind((bind, 0))
    padding = bytes(size - HEADER.size)
    if start_at == "stdin":
        print("ready", flush=True)
        start_at = sys.stdin.readline()
    start = time.monotonic() if start_at is None else float(start_at)
    for seq in range(count):
        wait = start + seq / pps - time.monotonic() if pps else start - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        sock.sendto(HEADER.pack(seq, time.time_ns()) + padding, (dst, port))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fecbench.emulation.probe")
    sub = parser.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--timeout", type=float, required=True)
    r.add_argument("--idle", type=float, default=None, help="stop after this long without a datagram")
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--pps", type=float, default=1000.0, help="datagrams per second (0: as fast as possible)")
    s.add_argument("--size", type=int, default=PAYLOAD_BYTES, help="UDP payload bytes (≥ 12)")
    s.add_argument("--bind", default=None, help="source address (selects the path on a multipath client)")
    s.add_argument("--start-at", default=None, help="time.monotonic() of the first datagram, or 'stdin'")
    args = parser.parse_args(argv)
    if args.role == "recv":
        print(json.dumps(receive(args.bind, args.port, args.count, args.timeout, args.idle)), flush=True)
    else:
        if args.size < HEADER.size:
            parser.error(f"--size must be at least {HEADER.size} bytes (the probe's header)")
        send(args.dst, args.port, args.count, args.pps, args.bind, args.start_at, args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
