"""Packet captures on a running network: dumpcap in the namespace of the node it listens on.

Where (`capture_points`, pure): at the client host, on every interface it has (one per path; one file,
`client.pcapng`, an interface per path), and at the bottleneck: each shaped link's delay node, on both its
interfaces (`bottleneck-<link>.pcapng`; interface 0 faces the client side). A packet crossing the bottleneck
is there twice: on arrival (after the dropper, which sits on the sending router's egress, so the loss model's
drops never arrive) and on departure (after the delay element and the rate limiter's queue): the time
between is its delay, a packet that arrived and never left was dropped by the queue.

How: `dumpcap -i IF … -s SNAPLEN -a filesize:KB -w FILE` run by `mnexec -da PID` as a process of its own
(not in the endpoints' cgroup, so its CPU time is never counted as theirs; like every process the harness
starts, off the CPU left to the delay elements), ready when its file holds the header (dumpcap opens every
interface before its file), stopped by SIGTERM (it writes out what it has read, then exits). A capture
stops by itself at its size bound (`-a filesize`), the run goes on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fecbench import cleanup, marks
from fecbench.topologies.layout import Layout

READY_S = 5.0


@dataclass(frozen=True)
class CapturePoint:
    where: str                     # the file's stem: "client", "bottleneck-<link>"
    node: str                      # the layout node whose namespace it listens in
    interfaces: tuple[str, ...]
    comment: str


def capture_points(layout: Layout, client: str) -> list[CapturePoint]:
    """The client's interfaces (every path) and each shaped link's delay node (both directions)."""
    points = [CapturePoint("client", client, tuple(i.name for i in layout.nodes[client].ifaces),
                           "at the client host, every interface (one per path)")]
    for link, dn in layout.delay_nodes.items():
        points.append(CapturePoint(f"bottleneck-{link}", dn.name, (dn.toward_a, dn.toward_b),
                                   f"at the bottleneck of link {link}: interface 0 ({dn.toward_a}) faces the client "
                                   f"side, 1 ({dn.toward_b}) the server side; each packet on arrival and departure"))
    return points


def dumpcap_argv(point: CapturePoint, path: Path, snaplen: int, limit_kb: int, comment: str = "") -> list[str]:
    """dumpcap's command line for one capture point: pcapng, `snaplen` bytes per packet, at most `limit_kb`."""
    argv = ["dumpcap", "-q", "-n", "-s", str(snaplen)]
    for iface in point.interfaces:
        argv += ["-i", iface]
    return [*argv, "-a", f"filesize:{max(1, limit_kb)}", "--capture-comment", f"{comment}{point.comment}",
            "-w", str(path)]


@dataclass
class Capture:
    point: CapturePoint
    path: Path
    popen: subprocess.Popen
    err: Path


class Captures:
    """The dumpcaps of one run; `problems` says which did not start."""

    def __init__(self) -> None:
        self.running: list[Capture] = []
        self.problems: list[str] = []

    @classmethod
    def start(cls, net: Any, folder: Path, snaplen: int, budget_kb: int, comment: str = "") -> Captures:
        """One dumpcap per capture point of `net` (a running Network), writing `folder/<where>.pcapng`; the run's
        captures together stay within `budget_kb` (an equal share each)."""
        out = cls()
        binary = shutil.which("dumpcap")
        if binary is None:
            out.problems.append("dumpcap not found (Debian package tshark: make apt)")
            return out
        folder.mkdir(parents=True, exist_ok=True)
        points = capture_points(net.layout, net.topo.client)
        env = {**os.environ, marks.VARIABLE: marks.mark_owner()}
        for point in points:
            path, err = folder / f"{point.where}.pcapng", folder / f"{point.where}.err"
            path.unlink(missing_ok=True)   # ready means dumpcap wrote this file's header
            argv = ["mnexec", "-da", str(net.nodes[point.node].pid),
                    *dumpcap_argv(point, path, snaplen, budget_kb // len(points), comment)]
            with open(err, "wb") as stderr:
                # mnexec -d makes it a session (and group) leader of its own; it would fork if it were one already.
                popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                         env=env)
            cleanup.record("pid", str(popen.pid), what=f"dumpcap {point.where}")
            out.running.append(Capture(point, path, popen, err))
        deadline = time.monotonic() + READY_S
        for capture in list(out.running):
            while not (capture.path.exists() and capture.path.stat().st_size > 0):
                if capture.popen.poll() is not None or time.monotonic() > deadline:
                    out.problems.append(f"capture {capture.point.where} did not start: {_why(capture)}")
                    out._end(capture)
                    out.running.remove(capture)
                    break
                time.sleep(0.005)
        return out

    def stop(self, grace_s: float = 3.0) -> list[str]:
        """Stop every capture (SIGTERM: it writes what it read); notes on the ones that stopped earlier."""
        notes = []
        for capture in self.running:
            code = capture.popen.poll()
            if code is not None:
                why = "at its size bound" if code == 0 else f"exit status {code}: {_why(capture)}"
                notes.append(f"capture {capture.point.where} stopped before the run's end ({why})")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(capture.popen.pid, signal.SIGTERM)
        for capture in self.running:
            self._end(capture, grace_s)
            capture.err.unlink(missing_ok=True)
        self.running.clear()
        return notes

    @staticmethod
    def _end(capture: Capture, grace_s: float = 0.0) -> None:
        try:
            capture.popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(capture.popen.pid, signal.SIGKILL)
            capture.popen.wait(timeout=5)
        cleanup.forget("pid", str(capture.popen.pid))


def _why(capture: Capture) -> str:
    """dumpcap's own words (its stderr, without the lines it always writes)."""
    try:
        lines = capture.err.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return " ".join(line.strip() for line in lines
                    if line.strip() and not line.startswith(("Capturing on", "File:", "Packets captured",
                                                                 "Packets received")))[:300]
