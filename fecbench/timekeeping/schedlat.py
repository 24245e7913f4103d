"""Python side of `schedlat/`: the scheduler tracer that measures how long endpoint threads waited for a CPU.

One tracer per fecbench process, shared by all its networks. `Tracer.acquire()` attaches it on first use:
the loader (schedlat/build/schedlat) loads the BPF programs on the scheduler's tracepoints and pins them,
with their maps, under /sys/fs/bpf/fecbench/<prefix>-schedlat (recorded for `fecbench clean`: removing
that folder detaches them). `release()` detaches it when the last network lets go. Each network tracks
its endpoint group (`fecbench.host.cgroups`) in a slot of its own; the runner clears the slot when a run
starts and reads it when the run ends. The histograms are a memory-mapped BPF array, read and cleared
in place: no process starts per run. What is counted: schedlat/src/schedlat.h and schedlat/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fecbench.host import bpfsys, cleanup
from fecbench.host.paths import REPO_ROOT

KINDS = ("wake", "preempt")
PIN_ROOT = Path("/sys/fs/bpf/fecbench")
# schedlat.h's log-linear buckets: 8 per power of two from 2^10 ns, 25 octaves (tests compare with the loader).
SUB_BITS, MIN_SHIFT, OCTAVES = 3, 10, 25
BUCKETS = OCTAVES << SUB_BITS


def bucket(ns: int) -> int:
    """The bucket a wait of `ns` nanoseconds is counted in (schedlat.h's sl_bucket)."""
    if ns < 1 << MIN_SHIFT:
        return 0
    octave = ns.bit_length() - 1
    index = ((octave - MIN_SHIFT) << SUB_BITS) + ((ns >> (octave - SUB_BITS)) & ((1 << SUB_BITS) - 1))
    return min(index, BUCKETS - 1)


def upper_edges() -> tuple[int, ...]:
    """Each bucket's upper edge in ns, exclusive (schedlat.h's sl_upper_ns)."""
    out = []
    for b in range(BUCKETS):
        octave, sub = (b >> SUB_BITS) + MIN_SHIFT, b & ((1 << SUB_BITS) - 1)
        out.append((1 << octave) + (sub + 1) * (1 << (octave - SUB_BITS)))
    return tuple(out)


def histogram(waits_ns: list[int]) -> dict[str, Any]:
    """A reading of one kind as the tracer would count these waits (for tests and in-memory testbeds)."""
    buckets = [0] * BUCKETS
    for wait in waits_ns:
        buckets[bucket(wait)] += 1
    return {"count": len(waits_ns), "sum_ns": sum(waits_ns), "max_ns": max(waits_ns, default=0), "buckets": buckets}


class Unavailable(Exception):
    """The tracer cannot run here (not built, no BTF or BPF tracing, not root); the message says why."""


def binary() -> Path:
    return Path(os.environ.get("FECBENCH_SCHEDLAT", REPO_ROOT / "schedlat" / "build" / "schedlat"))


def _loader(*args: str) -> str:
    path = binary()
    if not path.exists():
        raise Unavailable(f"the scheduler tracer {path} is not built: run `make -C {REPO_ROOT / 'schedlat'}`")
    proc = subprocess.run([str(path), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise Unavailable(proc.stderr.strip().removeprefix("schedlat: error: ") or f"schedlat {args[0]} failed")
    return proc.stdout


@dataclass(frozen=True)
class SharedLayout:
    """The shared layout (schedlat.h) as the loader that built the BPF object prints it."""
    slots: int
    buckets: int
    slot_size: int
    hist_size: int
    buckets_offset: int
    upper_ns: tuple[int, ...]    # each bucket's upper edge (exclusive)
    spans: int                   # long waits kept per slot as [start, end] spans
    span_min_ns: int             # how long a wait is to be kept
    spans_seen_offset: int
    spans_offset: int

    @classmethod
    def read(cls) -> SharedLayout:
        data = json.loads(_loader("layout"))
        return cls(slots=data["slots"], buckets=data["buckets"], slot_size=data["slot_size"],
                   hist_size=data["hist_size"], buckets_offset=data["buckets_offset"],
                   upper_ns=tuple(data["upper_ns"]), spans=data["spans"], span_min_ns=data["span_min_ns"],
                   spans_seen_offset=data["spans_seen_offset"], spans_offset=data["spans_offset"])


class Tracer:
    """The attached tracer of this process: its pin folder, layout and memory-mapped histograms."""

    _lock = threading.Lock()
    _shared: Tracer | None = None
    _users = 0

    def __init__(self, pin: Path, layout: SharedLayout) -> None:
        self.pin, self.layout = pin, layout
        self.view = bpfsys.mmap_pinned(pin / "results", layout.slot_size, layout.slots)
        self.free = list(range(layout.slots))

    @classmethod
    def acquire(cls) -> Tracer:
        """The process's tracer, attached now if nobody uses it yet; Unavailable if it cannot be."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls._attach()
            cls._users += 1
            return cls._shared

    @classmethod
    def _attach(cls) -> Tracer:
        from fecbench.dropper.dropper import ensure_bpffs

        if os.geteuid() != 0:
            raise Unavailable("the scheduler tracer needs root")
        layout = SharedLayout.read()
        ensure_bpffs()
        pin = PIN_ROOT / f"{cleanup.prefix()}-schedlat"
        if pin.exists():  # left by this PID's earlier life (a recycled PID: that owner is dead)
            shutil.rmtree(pin, ignore_errors=True)
        cleanup.record("bpf_pin", str(pin))
        try:
            _loader("attach", str(pin))
            return cls(pin, layout)
        except (Unavailable, OSError, ValueError) as exc:
            shutil.rmtree(pin, ignore_errors=True)
            cleanup.forget("bpf_pin", str(pin))
            raise Unavailable(str(exc)) from None

    def release(self) -> None:
        """One user less; the last one detaches the programs (removing their pins)."""
        with Tracer._lock:
            Tracer._users -= 1
            if Tracer._users > 0 or Tracer._shared is not self:
                return
            Tracer._shared = None
        self.view.close()
        shutil.rmtree(self.pin, ignore_errors=True)
        cleanup.forget("bpf_pin", str(self.pin))

    def track(self, cgroup_id: int) -> Slot:
        """Count the threads of this cgroup (its v2 id) in a slot of their own, cleared."""
        with Tracer._lock:
            if not self.free:
                raise Unavailable(f"the scheduler tracer tracks at most {self.layout.slots} cgroups per process")
            index = self.free.pop(0)
        slot = Slot(self, index, cgroup_id)
        slot.clear()
        try:
            _loader("track", str(self.pin), str(cgroup_id), str(index))
        except Unavailable:
            with Tracer._lock:
                self.free.append(index)
            raise
        return slot


class Slot:
    """One tracked cgroup's histograms in the tracer's memory-mapped results."""

    def __init__(self, tracer: Tracer, index: int, cgroup_id: int) -> None:
        self.tracer, self.index, self.cgroup_id = tracer, index, cgroup_id
        self.offset = index * tracer.layout.slot_size

    def clear(self) -> None:
        size = self.tracer.layout.slot_size
        self.tracer.view[self.offset:self.offset + size] = bytes(size)

    def read(self) -> dict[str, Any]:
        """Per kind (wake, preempt): count, sum_ns, max_ns and the bucket counts since the last clear; and the
        long waits (at least ``span_min_ns``) as [start, end] spans: ``spans_seen`` of them, the first
        ``layout.spans`` kept."""
        layout, view = self.tracer.layout, self.tracer.view
        out: dict[str, Any] = {}
        for i, kind in enumerate(KINDS):
            base = self.offset + i * layout.hist_size
            count, sum_ns, max_ns = struct.unpack_from("<3Q", view, base)
            buckets = struct.unpack_from(f"<{layout.buckets}Q", view, base + layout.buckets_offset)
            out[kind] = {"count": count, "sum_ns": sum_ns, "max_ns": max_ns, "buckets": list(buckets)}
        (seen,) = struct.unpack_from("<Q", view, self.offset + layout.spans_seen_offset)
        kept = struct.unpack_from(f"<{2 * min(seen, layout.spans)}Q", view, self.offset + layout.spans_offset)
        out.update(spans_seen=seen, spans=[list(kept[i:i + 2]) for i in range(0, len(kept), 2)],
                   span_min_ns=layout.span_min_ns)
        return out

    def release(self) -> None:
        """Stop counting this cgroup and give the slot back."""
        try:
            _loader("untrack", str(self.tracer.pin), str(self.cgroup_id))
        except Unavailable:
            pass  # the tracer is going away: its maps go with it
        self.clear()
        with Tracer._lock:
            self.tracer.free.append(self.index)
