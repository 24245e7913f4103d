#!/usr/bin/python3
"""A fake implementation for the runner's tests: a server that waits, a client that misbehaves on request.

server --listen ADDR:PORT [--behave ok|die]      prints "listening ADDR:PORT", waits for SIGTERM
client --server ADDR:PORT --size N --out PATH
       --timeout S --level N
       --behave ok|slow|ticks|fill|fail|failreport|hang|giveup|unsupported|garbage|nometrics|badtype|fresh
       (ticks: on its first CPU, 300 sleeps of 2 ms, i.e. 300 timer wake-ups, before reporting)
check [--timeout S] [--behave …] [--level N]       exit 2 naming a level above 9, else 0
"""

import argparse
import json
import os
import signal
import sys
import time


def server(args: argparse.Namespace) -> int:
    print(f"listening {args.listen}", flush=True)
    if args.behave == "die":
        return 3
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(1)


def client(args: argparse.Namespace) -> int:
    start = time.monotonic()
    print(f"fake client: {args.behave} against {args.server}", flush=True)
    if args.behave == "fail":
        print("fake client: failing on purpose", file=sys.stderr)
        return 1
    if args.behave == "failreport":  # fails, but says why and what arrived, as fecq does
        with open(args.out, "w") as out:
            json.dump({"ok": False, "error": "transfer incomplete: connection lost", "bytes_app": args.size // 2}, out)
        return 1
    if args.behave == "unsupported":
        return 127
    if args.behave == "giveup":  # the contract's own time limit: gives up (early, for busy test machines), says
        time.sleep(min(args.timeout, 0.2))  # what arrived
        with open(args.out, "w") as out:
            json.dump({"ok": False, "error": f"timeout after {args.timeout:g} s", "timed_out": True,
                       "bytes_app": args.size // 3, "elapsed_ms": (time.monotonic() - start) * 1000}, out)
        return 124
    if args.behave == "hang":
        while True:
            time.sleep(1)
    if args.behave == "garbage":
        with open(args.out, "w") as out:
            out.write("{this is not json")
        return 0
    if args.behave == "nometrics":
        return 0
    if args.behave == "fresh":  # the contract's run folder: its working directory, with no earlier run's files
        if os.path.dirname(os.path.abspath(args.out)) != os.getcwd():
            print(f"fake client: working directory {os.getcwd()} is not the run folder", file=sys.stderr)
            return 1
        if os.path.exists("session.ticket"):
            print("fake client: found an earlier run's session ticket", file=sys.stderr)
            return 1
        with open("session.ticket", "w") as ticket:
            ticket.write("resume me")
    if args.behave == "slow":
        time.sleep(0.5)
    if args.behave == "ticks":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        for _ in range(300):
            time.sleep(0.002)
    if args.behave == "fill":  # fill the disk holding the metrics file, then carry on
        try:
            with open(args.out + ".fill", "wb") as fill:
                while True:
                    fill.write(b"\0" * (1 << 20))
                    fill.flush()
        except OSError as exc:
            print(f"fake client: disk full: {exc}", file=sys.stderr)
    metrics = {"dct_ms": (time.monotonic() - start) * 1000, "bytes_app": args.size, "handshake_ms": 0.0,
               "cpus": sorted(os.sched_getaffinity(0))}   # where it was started (fecbench.host.affinity)
    if args.behave == "badtype":
        metrics["dct_ms"] = "fast"
    with open(args.out, "w") as out:
        json.dump(metrics, out)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--listen", required=True)
    s.add_argument("--behave", default="ok")
    c = sub.add_parser("client")
    c.add_argument("--server", required=True)
    c.add_argument("--size", type=int, required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--behave", default="ok")
    c.add_argument("--timeout", type=float, default=60.0)
    c.add_argument("--level", type=int, default=0)
    k = sub.add_parser("check")
    k.add_argument("--timeout", type=float, default=60.0)
    k.add_argument("--behave", default="ok")
    k.add_argument("--level", type=int, default=0)
    args = parser.parse_args()
    if args.role == "check":
        if args.level > 9:
            print(f"fake: invalid value '{args.level}' for --level: at most 9", file=sys.stderr)
            return 2
        return 0
    return server(args) if args.role == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())
