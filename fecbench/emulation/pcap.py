"""Packet captures on a running network: tcpdump in the namespace of the node it listens on.

Where (`capture_points`, pure): at the client host, every interface (one per path: `client.pcapng`), and at
the bottleneck: each shaped link's delay node, both its interfaces (`bottleneck-<link>.pcapng`). tcpdump
listens on `any` there, so each packet carries its interface index and direction (Linux cooked capture v2:
`sll.ifindex`, `sll.pkttype`; the file's comment names each index). A packet crossing the bottleneck is
there twice: on arrival (`sll.pkttype == 3`, after the dropper, which sits on the sending router's egress, so
the loss model's drops never arrive) and on departure (`sll.pkttype == 4`, after the delay element and the
rate limiter's queue): the time between is its delay, a packet that arrived and never left was a queue drop.

How: `tcpdump -i any --immediate-mode -U -s SNAPLEN -c PACKETS -w FILE.pcap` run by `mnexec -da PID` as a
process of its own (not in the endpoints' cgroup, so its CPU time is never counted as theirs; like every
process the harness starts, off the CPU left to the delay elements), ready when its file holds the header
(tcpdump opens the capture before its file), stopped by SIGTERM, then turned into pcapng with the comment
(editcap). Immediate mode: every packet is written as it arrives, so stopping loses none (dumpcap, which
reads the kernel's ring by blocks, lost the packets of its last block on SIGTERM: all of a 0.2 s run). Size:
at most PACKETS packets (`packet_bound`: the budget over the largest frame these links carry), then tcpdump
stops by itself and the run goes on.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench.emulation.layout import Layout
from fecbench.host import cleanup, marks

READY_S = 5.0
#: The largest frame a capture holds here: the veth links' MTU (1500; segmentation off on every interface,
#: so no larger GSO packets) plus the cooked header (20) and the record header (16).
FRAME_BYTES = 1500 + 20
RECORD_BYTES = 16
PCAP_HEADER_BYTES = 24


@dataclass(frozen=True)
class CapturePoint:
    where: str                     # the file's stem: "client", "bottleneck-<link>"
    node: str                      # the layout node whose namespace it listens in
    interfaces: tuple[str, ...]    # the interfaces there, in order (the comment names their indices)
    roles: tuple[str, ...]         # what each interface is


def capture_points(layout: Layout, client: str) -> list[CapturePoint]:
    """The client's interfaces (every path) and each shaped link's delay node (both directions)."""
    ifaces = layout.nodes[client].ifaces
    points = [CapturePoint("client", client, tuple(i.name for i in ifaces),
                           tuple(f"the client's interface on link {i.link}" for i in ifaces))]
    for link, dn in layout.delay_nodes.items():
        points.append(CapturePoint(f"bottleneck-{link}", dn.name, (dn.toward_a, dn.toward_b),
                                   (f"bottleneck of link {link}, facing the client side",
                                    f"bottleneck of link {link}, facing the server side")))
    return points


def packet_bound(budget_kb: int, snaplen: int) -> int:
    """How many packets fit in `budget_kb` at most (each the largest frame the links carry, or snaplen)."""
    return max(1, budget_kb * 1000 // (min(snaplen, FRAME_BYTES) + RECORD_BYTES))


def tcpdump_argv(path: Path, snaplen: int, packets: int) -> list[str]:
    """tcpdump's command line for one capture point: every interface of the namespace, each packet as it
    arrives, `snaplen` bytes of each, at most `packets` packets; root keeps writing (-Z root)."""
    return ["tcpdump", "-i", "any", "--immediate-mode", "-U", "-n", "-Z", "root", "-s", str(snaplen),
            "-c", str(max(1, packets)), "-w", str(path)]


def comment(point: CapturePoint, indices: dict[str, int], prefix: str = "") -> str:
    """The pcapng comment naming each interface index of the file."""
    named = "; ".join(f"sll.ifindex {indices.get(name, '?')} = {name}: {role}"
                      for name, role in zip(point.interfaces, point.roles, strict=True))
    arrival = " (sll.pkttype 3: arriving, 4: leaving)" if point.where.startswith("bottleneck-") else ""
    return f"{prefix}{point.where}{arrival}: {named}"


def _indices(pid: int) -> dict[str, int]:
    """Interface name -> index inside the namespace of node process `pid`."""
    out = subprocess.run(["mnexec", "-da", str(pid), "ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=False).stdout
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^(\d+): ([^:@\s]+)", out, re.MULTILINE)}


@dataclass
class Capture:
    point: CapturePoint
    path: Path
    popen: subprocess.Popen
    err: Path
    comment: str = ""


@dataclass
class Captures:
    """The tcpdumps of one run; `problems` says which did not start."""
    running: list[Capture] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, net: Any, folder: Path, snaplen: int, budget_kb: int, prefix: str = "") -> Captures:
        """One tcpdump per capture point of `net` (a running Network), writing `folder/<where>.pcap` (pcapng
        after `stop`); the run's captures together within `budget_kb` (an equal share each)."""
        out = cls()
        missing = [tool for tool in ("tcpdump", "editcap") if shutil.which(tool) is None]
        if missing:
            out.problems.append(f"{' and '.join(missing)} not found (Debian packages tcpdump, tshark: make apt)")
            return out
        folder.mkdir(parents=True, exist_ok=True)
        points = capture_points(net.layout, net.topo.client)
        env = {**os.environ, marks.VARIABLE: marks.mark_owner()}
        bound = packet_bound(budget_kb // len(points), snaplen)
        for point in points:
            path, err = folder / f"{point.where}.pcap", folder / f"{point.where}.err"
            path.unlink(missing_ok=True)   # ready means tcpdump wrote this file's header
            pid = net.nodes[point.node].pid
            with open(err, "wb") as stderr:
                # mnexec -d makes it a session (and group) leader of its own; it would fork if it were one already.
                popen = subprocess.Popen(["mnexec", "-da", str(pid), *tcpdump_argv(path, snaplen, bound)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
            cleanup.record("pid", str(popen.pid), what=f"tcpdump {point.where}")
            out.running.append(Capture(point, path, popen, err, comment(point, _indices(pid), prefix)))
        deadline = time.monotonic() + READY_S
        for capture in list(out.running):
            while not (capture.path.exists() and capture.path.stat().st_size > 0):
                if capture.popen.poll() is not None or time.monotonic() > deadline:
                    out.problems.append(f"capture {capture.point.where} did not start: {_why(capture)}")
                    _end(capture)
                    out.running.remove(capture)
                    capture.path.unlink(missing_ok=True)
                    break
                time.sleep(0.002)
        return out

    def stop(self, grace_s: float = 3.0) -> list[str]:
        """Stop every capture (SIGTERM), each file turned into `<where>.pcapng` with its comment (one without a
        packet removed); notes on the ones that stopped before (at their packet bound) or could not be turned."""
        notes = []
        for capture in self.running:
            code = capture.popen.poll()
            if code is not None:
                why = "at its packet bound" if code == 0 else f"exit status {code}: {_why(capture)}"
                notes.append(f"capture {capture.point.where} stopped before the run's end ({why})")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(capture.popen.pid, signal.SIGTERM)
        for capture in self.running:
            _end(capture, grace_s)
            capture.err.unlink(missing_ok=True)
            if capture.path.is_file() and capture.path.stat().st_size <= PCAP_HEADER_BYTES:
                capture.path.unlink()   # no packet passed there (a path the run did not use): no file
        converting = [(c, subprocess.Popen(["editcap", "-F", "pcapng", "--capture-comment", c.comment, str(c.path),
                                            str(c.path.with_suffix(".pcapng"))],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
                      for c in self.running if c.path.is_file()]
        for capture, editcap in converting:
            _, err = editcap.communicate()
            if editcap.returncode == 0:
                capture.path.unlink()
            else:
                capture.path.with_suffix(".pcapng").unlink(missing_ok=True)
                notes.append(f"capture {capture.point.where} kept as pcap: editcap -F pcapng: {err.strip()[:200]}")
        self.running.clear()
        return notes


def _end(capture: Capture, grace_s: float = 0.0) -> None:
    try:
        capture.popen.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(capture.popen.pid, signal.SIGKILL)
        capture.popen.wait(timeout=5)
    cleanup.forget("pid", str(capture.popen.pid))


def _why(capture: Capture) -> str:
    """tcpdump's own words (its stderr, without the lines it always writes)."""
    try:
        lines = capture.err.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    skip = ("tcpdump: data link type", "tcpdump: listening on", "packets captured", "packets received",
            "packets dropped")
    return " ".join(line.strip() for line in lines if line.strip() and not any(s in line for s in skip))[:300]
