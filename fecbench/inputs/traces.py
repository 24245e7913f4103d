"""Packet-delivery traces in Mahimahi's format: the measured links a trace link replays (delayline/README.md,
"Trace links").

One line per delivery opportunity: the millisecond offset at which 1504 bytes may leave (a full-size packet as
mm-link counts it); repeated lines are several opportunities in that millisecond; offsets never go back; the
trace loops with the period of its last line, which must be > 0. The delay element reads the file itself; this
module checks it first (a design names the file and line that is wrong before anything is built), and says what
the trace offers: its identity for the run record, its capacity per time bin for `explain`.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fecbench.inputs.errors import UserError

#: Bytes one delivery opportunity serves (mm-link's PACKET_SIZE: a 1500-byte IP packet and its 4-byte tun header).
OPPORTUNITY_BYTES = 1504


@dataclass(frozen=True)
class DeliveryTrace:
    """A checked trace: where it is, what it is (sha256 of its bytes), its opportunities (ms offsets)."""
    path: str
    sha256: str
    offsets_ms: tuple[int, ...]

    @property
    def period_ms(self) -> int:
        return self.offsets_ms[-1]

    @property
    def mean_mbit(self) -> float:
        """The trace's average capacity over one loop (Mbit/s of IP packets and their tun headers)."""
        return len(self.offsets_ms) * OPPORTUNITY_BYTES * 8 / (self.period_ms * 1e3)

    @property
    def longest_wait_ms(self) -> int:
        """The longest gap between two delivery opportunities, the loop's turn included: the most a frame arriving
        at an empty link waits."""
        gaps = [b - a for a, b in zip(self.offsets_ms, self.offsets_ms[1:], strict=False)]
        return max([self.offsets_ms[0], *gaps])

    def capacity_mbit(self, bin_ms: float = 1000, start_ms: float = 0, length_ms: float | None = None) -> list[float]:
        """Capacity per time bin (Mbit/s) from `start_ms` into the trace for `length_ms` (one loop by default),
        looping as the link does: what the link could carry, beside what a run sent. An opportunity at a bin's
        end counts in that bin; one at `start_ms` is missed (trace.h)."""
        length = self.period_ms if length_ms is None else length_ms
        bins = [0] * max(1, math.ceil(length / bin_ms - 1e-9))
        end = start_ms + length
        loop = int(start_ms // self.period_ms)
        while loop * self.period_ms < end:
            base = loop * self.period_ms
            for offset in self.offsets_ms:
                at = base + offset
                if start_ms < at <= end:
                    bins[min(len(bins) - 1, math.ceil((at - start_ms) / bin_ms - 1e-9) - 1)] += 1
            loop += 1
        return [n * OPPORTUNITY_BYTES * 8 / (bin_ms * 1e3) for n in bins]


def trace_used(path: str | None, counts: dict[str, Any] | None) -> dict[str, Any] | None:
    """Which trace a trace link replayed, as a run records it: the file and its sha256, and from the delay element's
    counts of that direction where in it the run started (offset_ms; started_ns, CLOCK_MONOTONIC, and started_unix_s,
    the same instant on the wall clock the qlog files use) and how many loops it completed. None without a trace."""
    if path is None:
        return None
    trace, used = load_trace(path), (counts or {}).get("trace") or {}
    started = used.get("started_ns")
    unix_s = time.time() - (time.monotonic_ns() - started) / 1e9 if isinstance(started, int) else None
    return {"path": trace.path, "sha256": trace.sha256, "period_ms": trace.period_ms, "started_unix_s": unix_s,
            **{k: used.get(k) for k in ("offset_ms", "started_ns", "loops")}}


def load_trace(path: str | Path) -> DeliveryTrace:
    """The trace at `path`, checked as the delay element checks it; a UserError naming the file and line."""
    resolved = Path(path).resolve()
    try:
        stat = resolved.stat()
    except OSError as exc:
        raise UserError(f"trace {path}: cannot read it ({exc.strerror})") from None
    return _load(str(resolved), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=32)
def _load(path: str, _mtime_ns: int, _size: int) -> DeliveryTrace:
    data = Path(path).read_bytes()
    offsets: list[int] = []
    lines = data.decode("ascii", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()   # the file's final newline ends its last line
    for number, line in enumerate(lines, 1):
        text = line.rstrip("\r")
        if not text.isdigit() or not text.isascii() or len(text) >= 16:
            raise UserError(f"trace {path}, line {number}: expected a millisecond offset (a whole number), "
                            f"got {text[:32]!r} (Mahimahi's format: one offset per line)")
        value = int(text)
        if value >= 2**32:
            raise UserError(f"trace {path}, line {number}: {value} ms is beyond 2^32 ms")
        if offsets and value < offsets[-1]:
            raise UserError(f"trace {path}, line {number}: {value} ms is before the line above ({offsets[-1]} ms): "
                            "offsets never go back")
        offsets.append(value)
    if not offsets or offsets[-1] == 0:
        raise UserError(f"trace {path}: " + ("the trace lasts 0 ms (its last line must be > 0)" if offsets
                                             else "no delivery opportunities (an empty file)"))
    return DeliveryTrace(path, hashlib.sha256(data).hexdigest(), tuple(offsets))
