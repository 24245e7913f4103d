"""Start and control the native delay element `delayline` (see delayline/README.md).

The topology code starts one DelayLine per emulated link, inside the link's hidden delay node:

    with DelayLine.start("d-a", "d-b", 50.0, 50.0, run_in=["mnexec", "-da", str(node.pid)]) as dl:
        dl.set_delay(ab_ms=100.0)
        print(dl.stats()["ab"]["tx"])

The process's PID and control socket are recorded with `fecbench.host.cleanup`, so `fecbench clean` stops
a delayline left behind by a killed fecbench process. `DelayControl` is the one client of the control
socket's protocol: `DelayLine` uses it, and so do link changes made from another process
(fecbench.emulation.link_control).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

from fecbench.host import affinity, cleanup
from fecbench.host.paths import DELAYLINE_DIR
from fecbench.inputs.errors import UserError

#: The delay element's name for each direction of a link (its if-a is the client's side): forward = a→b.
SIDE_OF = {"forward": "ab", "reverse": "ba"}
MAX_DELAY_MS = 60_000.0  # the binary accepts at most 60 s per direction
# The CPUs every delay element runs on ("1", "2-3,6"; unset: the campaign's plan, fecbench.host.affinity). On a
# machine with few CPUs the delay elements otherwise compete with the endpoints they delay for the same
# CPU (measured in the 1-vCPU-pinned test-kernels guest: vm/README.md, "Same design, both backends").
CPUS_ENV = "FECBENCH_DELAYLINE_CPUS"
READY_TIMEOUT_S = 10.0
CONTROL_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0


def binary_path() -> Path:
    """The built delayline binary; a UserError saying how to build it when it is missing."""
    path = DELAYLINE_DIR / "build" / "delayline"
    if not os.access(path, os.X_OK):
        raise UserError(f"the delay element is not built ({path} missing): run `make -C {DELAYLINE_DIR}`")
    return path


def _delay_us(what: str, ms: float) -> int:
    if not isinstance(ms, (int, float)) or not math.isfinite(ms) or not 0 <= ms <= MAX_DELAY_MS:
        raise UserError(f"delayline {what} must be a number of milliseconds from 0 to {MAX_DELAY_MS:g}, got {ms!r}")
    return round(ms * 1000)


def cpus_from_env() -> set[int] | None:
    """$FECBENCH_DELAYLINE_CPUS as a set of CPU numbers (None when unset or empty); a UserError naming
    the variable when it is not a CPU list of this machine."""
    raw = os.environ.get(CPUS_ENV, "").strip()
    if not raw:
        return None
    count = os.cpu_count() or 1
    try:
        cpus = affinity.parse_list(raw)
        if max(cpus) >= count:
            raise ValueError
    except ValueError:
        raise UserError(f"{CPUS_ENV}: a list of CPUs of this machine (0-{count - 1}) like '1' or '0,2-3', "
                        f"not {raw!r}") from None
    return cpus


def _control_path(name: str) -> Path:
    """A control-socket path under the state directory (UNIX socket paths are limited to 107 bytes)."""
    tag = name if len(name) <= 40 and name.replace("-", "").replace("_", "").isalnum() else \
        hashlib.sha1(name.encode()).hexdigest()[:12]
    return cleanup.STATE_DIR / f"{cleanup.prefix()}-dl-{tag}.sock"


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is gone for our purpose
    return False


class DelayControl:
    """The client of a delay element's control socket (delayline/README.md): one command line in, one
    reply line back. `DelayLine` uses it for the process it started; link changes from another process
    (fecbench.emulation.link_control) open one on the socket's path."""

    def __init__(self, path: str | Path, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.name

    def command(self, line: str) -> str:
        """Send one command; its reply (stripped). RuntimeError when the socket cannot be used."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(CONTROL_TIMEOUT_S)
                sock.connect(str(self.path))
                sock.sendall(line.encode() + b"\n")
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
        except OSError as exc:
            raise RuntimeError(f"delayline {self.name}: control socket {self.path}: {exc}") from exc
        return reply.decode(errors="replace").strip()

    def set_delay(self, ab_ms: float | None = None, ba_ms: float | None = None) -> None:
        """Change the delay of either direction; applies to frames arriving from now on (FIFO order kept)."""
        parts = []
        if ab_ms is not None:
            parts.append(f"delay_ab_us={_delay_us('delay a→b', ab_ms)}")
        if ba_ms is not None:
            parts.append(f"delay_ba_us={_delay_us('delay b→a', ba_ms)}")
        if not parts:
            return
        reply = self.command("set " + " ".join(parts))
        if reply != "ok":
            raise RuntimeError(f"delayline {self.name}: set refused: {reply}")

    def set_trace(self, side: str, path: str | None, queue: int = 0, unit: str = "packets", offset_ms: int = 0) -> None:
        """Drive direction `side` ("ab", "ba") by the packet-delivery trace at `path` from `offset_ms` into it, with
        mm-link's drop-tail of `queue` packets or bytes (`unit`; 0: unlimited); None: back to its delay alone."""
        if path is None:
            line = f"trace {side} off"
        else:
            if any(c.isspace() for c in path):
                raise UserError(f"trace {path!r}: the delay element takes a path without spaces")
            limit = f" {unit}={queue}" if queue else ""
            line = f"trace {side} file={path}{limit} offset_ms={int(offset_ms)}"
        reply = self.command(line)
        if not reply.startswith("ok"):
            raise UserError(f"delayline {self.name}: {reply.removeprefix('error ')}")

    def set_delays(self, side: str, path: str | None, offset_ms: int = 0) -> None:
        """Make direction `side`'s delay follow the delay series at `path` from `offset_ms` into it (None: back to
        its constant delay)."""
        if path is not None and any(c.isspace() for c in path):
            raise UserError(f"delay series {path!r}: the delay element takes a path without spaces")
        reply = self.command(f"delays {side} off" if path is None else
                             f"delays {side} file={path} offset_ms={int(offset_ms)}")
        if not reply.startswith("ok"):
            raise UserError(f"delayline {self.name}: {reply.removeprefix('error ')}")

    def trace_idle(self, side: str) -> dict[str, Any]:
        """A trace link's opportunities that went by with nothing waiting, per bin since its start: {"bin_ms",
        "started_ns", "total", "idle": [count per bin, up to now]} (what tells the link's limit from the sender's)."""
        reply = self.command(f"traceidle {side}")
        if not reply.startswith("{"):
            raise RuntimeError(f"delayline {self.name}: traceidle refused: {reply}")
        return json.loads(reply)

    def restart_trace(self, side: str, offset_ms: int = 0, kind: str = "trace") -> None:
        """Start direction `side`'s trace (`kind` "trace") or delay series ("delays") again from `offset_ms` into
        it (a run's start; a trace link's queue empty)."""
        reply = self.command(f"{kind} {side} restart offset_ms={int(offset_ms)}")
        if reply != "ok":
            raise RuntimeError(f"delayline {self.name}: {kind} restart refused: {reply}")

    def clear_lateness(self) -> None:
        """Start a new lateness window: the histograms and maxima ``stats`` reports count from here."""
        reply = self.command("clear")
        if reply != "ok":
            raise RuntimeError(f"delayline {self.name}: clear failed: {reply}")

    def flush(self) -> int:
        """Discard the frames both directions hold now (counted per direction as ``flushed``, never
        sent); how many. For the moment between runs: what is still queued belongs to a run that ended."""
        reply = self.command("flush")
        if not reply.startswith("ok"):
            raise RuntimeError(f"delayline {self.name}: flush failed: {reply}")
        return int(reply.split()[1]) if len(reply.split()) > 1 else 0

    def stats(self) -> dict[str, Any]:
        """Counters per direction ("ab", "ba": rx, tx, drop_queue, drop_egress, errors, queue, max_queue,
        limit, gso, rx_errors, flushed; rx == tx + drop_queue + drop_egress + errors + queue + flushed) and the current
        delays (delay_ab_us, delay_ba_us). See delayline/README.md."""
        reply = self.command("stats")
        try:
            return json.loads(reply)
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"delayline {self.name}: bad stats reply {reply!r}") from exc

    def count_flows(self, side: str, bin_ms: float | None) -> None:
        """Count one direction's flows ("ab" or "ba") afresh from now, in time bins of `bin_ms` by their
        arrival: what each flow brought to the queue and what the queue refused (delayline/README.md,
        "Per-flow counters"); None stops counting and forgets the counts."""
        if side not in ("ab", "ba"):
            raise ValueError(f"side must be ab or ba, got {side!r}")
        if bin_ms is not None and not 0 < bin_ms <= 60_000:
            raise UserError(f"delayline {self.name}: a flow bin of {bin_ms!r} ms: from 0.001 to 60000")
        arg = "off" if bin_ms is None else f"bin_us={max(1, round(bin_ms * 1000))}"
        reply = self.command(f"flows {side} {arg}")
        if reply != "ok":
            raise RuntimeError(f"delayline {self.name}: flows refused: {reply}")

    def flow_stats(self) -> dict[str, Any]:
        """Per direction ("ab", "ba"): `counting`, `t0_ns` (CLOCK_MONOTONIC, bin 0's start), `bin_ns`, `lost`
        (frames the full table could not count) and `flows`: rows [proto, sport, dport, bin, packets, bytes,
        dropped, dropped_bytes] (packets that arrived in the bin and, of those, what the queue refused)."""
        reply = self.command("flowstats")
        try:
            return json.loads(reply)
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"delayline {self.name}: bad flowstats reply {reply[:200]!r}") from exc


class DelayLine:
    """A running delayline process bridging two interfaces with a constant delay per direction."""

    _counter = 0

    def __init__(self, proc: subprocess.Popen, pid: int, control: Path, name: str,
                 delay_ab_ms: float, delay_ba_ms: float) -> None:
        self._proc = proc
        self.pid = pid
        self.control_path = control
        self.control = DelayControl(control, name)
        self.name = name
        self.delay_ab_ms = delay_ab_ms
        self.delay_ba_ms = delay_ba_ms
        self._stopped = False
        self.warnings: list[str] = []  # what the delayline printed on stderr while starting

    @classmethod
    def start(cls, if_a: str, if_b: str, delay_ab_ms: float, delay_ba_ms: float,
              run_in: list[str] | None = None, name: str | None = None,
              max_queue: int | None = None, rt_priority: int | None = None,
              cpus: set[int] | None = None) -> DelayLine:
        """Start a delayline between if_a and if_b (run inside a namespace with run_in, e.g.
        ["mnexec", "-da", PID] or ["ip", "netns", "exec", NS]) and wait until it forwards frames.
        max_queue: frames per direction (binary default 100000); rt_priority: SCHED_FIFO priority
        (binary default 10; 0 for normal scheduling, at the cost of millisecond jitter under load);
        cpus: the CPUs it may run on (default: its starter's; fecbench.host.affinity)."""
        ab_us, ba_us = _delay_us("delay a→b", delay_ab_ms), _delay_us("delay b→a", delay_ba_ms)
        if max_queue is not None and not (isinstance(max_queue, int) and 1 <= max_queue <= 10_000_000):
            raise UserError(f"delayline max_queue must be an integer from 1 to 10000000, got {max_queue!r}")
        if rt_priority is not None and not (isinstance(rt_priority, int) and 0 <= rt_priority <= 99):
            raise UserError(f"delayline rt_priority must be an integer from 0 to 99, got {rt_priority!r}")
        pinned = cpus_from_env()  # an explicit choice wins over the campaign's plan (fecbench.host.affinity)
        cpus = pinned if pinned is not None else cpus
        if name is None:
            cls._counter += 1
            name = f"{if_a}-{if_b}-{cls._counter}"
        control = _control_path(name)
        control.parent.mkdir(parents=True, exist_ok=True)
        argv = [*(run_in or []), str(binary_path()), "--if-a", if_a, "--if-b", if_b,
                "--delay-ab-us", str(ab_us), "--delay-ba-us", str(ba_us), "--control", str(control)]
        if max_queue is not None:
            argv += ["--max-queue", str(max_queue)]
        if rt_priority is not None:
            argv += ["--rt-priority", str(rt_priority)]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        except OSError as exc:
            raise UserError(f"cannot run {argv[0]}: {exc}") from exc
        cleanup.record("pid", str(proc.pid), what="delayline", link=name)
        cleanup.record("path", str(control))
        line = cls._wait_ready(proc)
        if line != "ready":
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            cleanup.forget("pid", str(proc.pid))
            control.unlink(missing_ok=True)
            cleanup.forget("path", str(control))
            reason = err or (f"no 'ready' within {READY_TIMEOUT_S:g} s" if proc.returncode is None
                             else f"exit status {proc.returncode}")
            raise UserError(f"delayline for {name} ({if_a} <-> {if_b}) failed to start: {reason}")
        # A launcher such as `mnexec -d` may fork: the control socket's peer is the real process.
        pid = cls._peer_pid(control)
        if pid != proc.pid:
            cleanup.record("pid", str(pid), what="delayline", link=name)
            cleanup.forget("pid", str(proc.pid))
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)  # reap the launcher that forked it
        line = cls(proc, pid, control, name, delay_ab_ms, delay_ba_ms)
        line.warnings = cls._startup_warnings(proc)
        if cpus:
            try:
                os.sched_setaffinity(pid, cpus)
            except OSError as exc:
                if pinned is None:
                    line.warnings.append(f"CPU affinity {sorted(cpus)} not set: {exc}")
                else:
                    line.stop()
                    raise UserError(f"{CPUS_ENV}: cannot run the delay element for {name} on CPUs "
                                    f"{sorted(cpus)}: {exc}") from exc
        return line

    @staticmethod
    def _wait_ready(proc: subprocess.Popen) -> str:
        assert proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if sel.select(left):
                    return proc.stdout.readline().decode(errors="replace").strip()
        return ""

    @staticmethod
    def _startup_warnings(proc: subprocess.Popen) -> list[str]:
        """The stderr lines written before `ready` (e.g. no real-time priority), without blocking."""
        assert proc.stderr is not None
        os.set_blocking(proc.stderr.fileno(), False)
        try:
            text = os.read(proc.stderr.fileno(), 65536).decode(errors="replace")
        except BlockingIOError:
            text = ""
        return [line for line in text.splitlines() if line.strip()]

    @staticmethod
    def _peer_pid(control: Path) -> int:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONTROL_TIMEOUT_S)
            sock.connect(str(control))
            cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", cred)[0]

    def _command(self, line: str) -> str:
        return self.control.command(line)

    def set_delay(self, ab_ms: float | None = None, ba_ms: float | None = None) -> None:
        """Change the delay of either direction; applies to frames arriving from now on (FIFO order kept)."""
        self.control.set_delay(ab_ms, ba_ms)
        if ab_ms is not None:
            self.delay_ab_ms = ab_ms
        if ba_ms is not None:
            self.delay_ba_ms = ba_ms

    def clear_lateness(self) -> None:
        """Start a new lateness window (DelayControl.clear_lateness)."""
        self.control.clear_lateness()

    def flush(self) -> int:
        """Discard the frames both directions hold now; how many (DelayControl.flush)."""
        return self.control.flush()

    def stats(self) -> dict[str, Any]:
        """Counters per direction and the current delays (DelayControl.stats)."""
        return self.control.stats()

    def stop(self) -> None:
        """SIGTERM, wait for the exit (SIGKILL after a timeout), forget the PID and control socket."""
        self._signal_stop()
        self._finish_stop()

    def _signal_stop(self) -> None:
        if not self._stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)

    def _finish_stop(self) -> None:
        if not self._stopped:
            if not self._wait_exit(STOP_TIMEOUT_S):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self._wait_exit(STOP_TIMEOUT_S)
            self._stopped = True
            for pipe in (self._proc.stdout, self._proc.stderr):
                if pipe:
                    pipe.close()
        cleanup.forget("pid", str(self.pid))
        self.control_path.unlink(missing_ok=True)
        cleanup.forget("path", str(self.control_path))

    @property
    def returncode(self) -> int | None:
        """The exit status once stopped, when it is our child (None under a launcher that forked it)."""
        return self._proc.returncode if self._proc.pid == self.pid else None

    def _wait_exit(self, timeout: float) -> bool:
        """Wait until the process exited (a pidfd wakes us at once; polling the PID is the fallback)."""
        own_child = self._proc.pid == self.pid
        try:
            pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            pidfd = None  # already gone (or a zombie we reap below)
        except OSError:
            pidfd = -1  # no pidfd support: poll
        if pidfd is not None and pidfd >= 0:
            try:
                ready = select.select([pidfd], [], [], timeout)[0]
            finally:
                os.close(pidfd)
            if not ready:
                return False
        elif pidfd == -1:
            deadline = time.monotonic() + timeout
            while not _process_gone(self.pid):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.005)
        if own_child:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=timeout)
        return True

    def __enter__(self) -> DelayLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_all(lines: list[DelayLine]) -> None:
    """Stop several delaylines at once: SIGTERM to all first, so their exits (each waits for the kernel
    to release its packet sockets) overlap instead of adding up."""
    for line in lines:
        line._signal_stop()
    for line in lines:
        line._finish_stop()
