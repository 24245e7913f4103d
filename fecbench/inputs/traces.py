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
import re
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


@dataclass(frozen=True)
class DelaySeries:
    """A checked delay series (delayline/src/series.h): `OFFSET_MS DELAY_MS` per line, each delay holding until the
    next line's offset, the first offset 0, the last line's offset ending the series (which then loops)."""
    path: str
    sha256: str
    offsets_ms: tuple[int, ...]
    delays_ms: tuple[float, ...]

    @property
    def period_ms(self) -> int:
        return self.offsets_ms[-1]

    @property
    def span_ms(self) -> tuple[float, float]:
        """The least and the most delay any step asks for (the last line's delay is not used)."""
        used = self.delays_ms[:-1]
        return min(used), max(used)

    def delay_at(self, at_ms: float) -> float:
        """The delay in force `at_ms` into the series (looping)."""
        within = at_ms % self.period_ms
        return self.delays_ms[max(i for i, offset in enumerate(self.offsets_ms[:-1]) if offset <= within)]


def load_delays(path: str | Path) -> DelaySeries:
    """The delay series at `path`, checked as the delay element checks it; a UserError naming the file and line."""
    return _cached("delay series", path, _parse_delays)


def _cached(what: str, path: str | Path, parse: Any) -> Any:
    """`parse(path, data)` of the file at `path`, read once while it is unchanged (its mtime and size)."""
    resolved = Path(path).resolve()
    try:
        stat = resolved.stat()
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    return _read_once(parse, str(resolved), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read_once(parse: Any, path: str, _mtime_ns: int, _size: int) -> Any:
    return parse(path, Path(path).read_bytes())


def _text_lines(data: bytes) -> list[str]:
    """A text file's lines (the file's final newline ends its last line: no empty line after it)."""
    lines = data.decode("ascii", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _parse_delays(path: str, data: bytes) -> DelaySeries:
    offsets: list[int] = []
    delays: list[float] = []
    for number, line in enumerate(_text_lines(data), 1):
        parts = line.rstrip("\r").replace(",", " ").split()
        try:
            offset, delay = int(parts[0]), float(parts[1])
            if len(parts) != 2 or not parts[0].isdigit() or not 0 <= delay <= 60_000 or delay != delay:
                raise ValueError
        except (ValueError, IndexError):
            raise UserError(f"delay series {path}, line {number}: expected 'OFFSET_MS DELAY_MS' (a whole offset, a "
                            f"delay of 0 to 60000 ms), got {line[:40]!r}") from None
        if (not offsets and offset != 0) or (offsets and offset < offsets[-1]):
            raise UserError(f"delay series {path}, line {number}: " + ("offsets never go back" if offsets
                                                                       else "the first step starts at offset 0"))
        offsets.append(offset)
        delays.append(delay)
    if len(offsets) < 2 or offsets[-1] == 0:
        raise UserError(f"delay series {path}: at least two lines, the last one's offset (> 0) ending the series")
    return DelaySeries(path, hashlib.sha256(data).hexdigest(), tuple(offsets), tuple(delays))


def series_used(path: str | None, counts: dict[str, Any] | None) -> dict[str, Any] | None:
    """Which delay series a direction followed, as a run records it (as `trace_used`); None without one."""
    if path is None:
        return None
    series, used = load_delays(path), (counts or {}).get("delays") or {}
    return {"path": series.path, "sha256": series.sha256, "period_ms": series.period_ms,
            **{k: used.get(k) for k in ("offset_ms", "started_ns", "loops")}}


def trace_used(path: str | None, counts: dict[str, Any] | None,
               idle: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Which trace a trace link replayed, as a run records it: the file and its sha256, and from the delay element's
    counts of that direction where in it the run started (offset_ms; started_ns, CLOCK_MONOTONIC, and started_unix_s,
    the same instant on the wall clock the qlog files use), how many loops it completed and, from `idle`
    (DelayControl.trace_idle), the opportunities that went by unused per bin (idle_bin_ms, idle). None without a
    trace."""
    if path is None:
        return None
    trace, used = load_trace(path), (counts or {}).get("trace") or {}
    started = used.get("started_ns")
    unix_s = time.time() - (time.monotonic_ns() - started) / 1e9 if isinstance(started, int) else None
    return {"path": trace.path, "sha256": trace.sha256, "period_ms": trace.period_ms, "started_unix_s": unix_s,
            **{k: used.get(k) for k in ("offset_ms", "started_ns", "loops")},
            **({"idle_bin_ms": idle.get("bin_ms"), "idle": idle.get("idle")} if idle else {})}


def load_trace(path: str | Path) -> DeliveryTrace:
    """The trace at `path`, checked as the delay element checks it; a UserError naming the file and line."""
    return _cached("trace", path, _parse_trace)


def _parse_trace(path: str, data: bytes) -> DeliveryTrace:
    offsets: list[int] = []
    for number, line in enumerate(_text_lines(data), 1):
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


#: Rate columns a CSV may name, and what one unit of each is in Mbit/s (a unit not listed is refused, never guessed).
RATE_UNITS = {"mbit_s": 1.0, "mbps": 1.0, "kbit_s": 1e-3, "kbps": 1e-3, "bit_s": 1e-6, "bps": 1e-6}
#: Time columns and their seconds; or a column of wall-clock times (ISO dates and times: CLOCK_COLUMNS).
TIME_UNITS = {"time_s": 1.0, "t_s": 1.0, "time_ms": 1e-3, "t_ms": 1e-3}
CLOCK_COLUMNS = ("time", "timestamp")


def rate_series_from_csv(text: str, name: str) -> tuple[list[float], list[float]]:
    """A published capacity series: a header naming a time column (TIME_UNITS) and a rate column (RATE_UNITS), then
    one row per step (the rate holds until the next row's time). (times in s, rates in Mbit/s)."""
    import csv
    import io

    rows = [row for row in csv.reader(io.StringIO(text)) if row and not row[0].lstrip().startswith("#")]
    if not rows:
        raise UserError(f"{name}: empty: expected a header (e.g. time_s,mbit_s) and one row per rate step")
    header = [cell.strip().lower() for cell in rows[0]]
    time_col = next((i for i, h in enumerate(header) if h in TIME_UNITS or h in CLOCK_COLUMNS), None)
    rate_col = next((i for i, h in enumerate(header) if _rate_unit(h) is not None), None)
    if time_col is None or rate_col is None:
        raise UserError(f"{name}: the header {rows[0]} names no {'time' if time_col is None else 'rate'} column "
                        f"(time: {', '.join(TIME_UNITS)}, or {' or '.join(CLOCK_COLUMNS)} holding ISO dates and "
                        f"times; rate: {', '.join(RATE_UNITS)}, or a name ending in _ and one of them)")
    times, rates = [], []
    rate_unit = _rate_unit(header[rate_col])
    read_time = _clock if header[time_col] in CLOCK_COLUMNS else lambda text: float(text) * TIME_UNITS[header[time_col]]
    for number, row in enumerate(rows[1:], 2):
        try:
            t, r = read_time(row[time_col]), float(row[rate_col]) * rate_unit
        except (ValueError, IndexError):
            what = "an ISO date and time" if header[time_col] in CLOCK_COLUMNS else "a number"
            raise UserError(f"{name}, row {number}: expected {what} in {header[time_col]} and a number in "
                            f"{header[rate_col]}, got {row} (a column of seconds is named time_s, of ms time_ms)") \
                from None
        if not (math.isfinite(t) and math.isfinite(r)) or r < 0 or (times and t <= times[-1]):
            raise UserError(f"{name}, row {number}: times must grow and rates be ≥ 0, got {row}")
        times.append(t)
        rates.append(r)
    if len(times) < 2:
        raise UserError(f"{name}: at least two rows (a step lasts until the next row's time; the last row ends it)")
    return [t - times[0] for t in times], rates


def _rate_unit(column: str) -> float | None:
    """Mbit/s per unit of a rate column named by its unit ("mbps") or ending in it ("throughput_mbps")."""
    return next((scale for unit, scale in RATE_UNITS.items() if column == unit or column.endswith("_" + unit)), None)


def _clock(text: str) -> float:
    """Seconds of a wall-clock time written as an ISO date and time ("2024-05-27T11:48:48.032245" or with a space):
    only differences between rows are used."""
    from datetime import datetime

    return datetime.fromisoformat(text.strip()).timestamp()


def opportunities_from_rates(times_s: list[float], mbit: list[float]) -> list[int]:
    """A piecewise-constant rate as delivery opportunities (ms offsets from times_s[0]): rates[i] holds from
    times_s[i] to times_s[i + 1], the last row's time ends the trace. Each millisecond adds its rate's bytes to a
    credit, and every whole 1,504 bytes of credit is an opportunity in that millisecond: the trace carries the
    series' bytes to within one opportunity, and a 0 rate is a gap."""
    out: list[int] = []
    credit, step = 0.0, 0
    total_ms = round((times_s[-1] - times_s[0]) * 1000)
    for ms in range(1, total_ms + 1):
        middle = times_s[0] + (ms - 0.5) / 1000
        while step + 1 < len(times_s) - 1 and middle >= times_s[step + 1]:
            step += 1
        credit += mbit[step] * 125.0   # Mbit/s over one millisecond, in bytes
        while credit >= OPPORTUNITY_BYTES:
            out.append(ms)
            credit -= OPPORTUNITY_BYTES
    if not out or out[-1] != total_ms:
        out.append(total_ms)   # the loop's length: the series' end (one more opportunity at its last millisecond)
    return out


#: A reply of `ping -D` ("[1700000000.123456] ...") or of a log stamping each line with a date and time
#: ("[2024-05-27 11:50:53.688215] ..."): its time, sequence number and RTT.
PING_LINE = re.compile(r"^\[(\d+(?:\.\d+)?|\d{4}-\d\d-\d\d[ T][\d:.]+)\].*icmp_seq=(\d+).*time=(\d+(?:\.\d+)?) ms")


def _ping_samples(text: str, name: str) -> list[tuple[float, int, float]]:
    """Each reply of a ping log: (wall-clock time in s, icmp_seq, RTT in ms), in order."""
    samples = [(_clock(m[1]) if "-" in m[1] else float(m[1]), int(m[2]), float(m[3]))
               for m in map(PING_LINE.match, text.splitlines()) if m]
    if len(samples) < 2:
        stamped = "time=" in text and not any(line.startswith("[") for line in text.splitlines())
        raise UserError(f"{name}: " + ("its replies carry no wall-clock time: record with `ping -D`" if stamped
                                       else "fewer than two replies of `ping -D` (lines '[time] ... icmp_seq=N ... "
                                            "time=RTT ms')"))
    if any(b[0] < a[0] or b[1] <= a[1] for a, b in zip(samples, samples[1:], strict=False)):
        raise UserError(f"{name}: the replies' times or sequence numbers go back: not one ping's log in order")
    return samples


def delays_from_ping(text: str, name: str) -> tuple[list[int], list[float], int]:
    """A delay series from a `ping -D` log (each reply's wall-clock time and RTT): one step per reply, at its
    offset from the first, of half its RTT (the one-way delay of a path taken as symmetric: a ping cannot tell the
    directions apart), the series ending one median interval after the last reply. (offsets_ms, delays_ms, the
    requests that got no reply: losses, which a delay series does not carry: `outages_from_ping`.)"""
    samples = _ping_samples(text, name)
    start = samples[0][0]
    offsets = [round((at - start) * 1000) for at, _, _ in samples]
    gaps = sorted(b - a for a, b in zip(offsets, offsets[1:], strict=False))
    delays = [rtt / 2 for _, _, rtt in samples]
    missing = samples[-1][1] - samples[0][1] + 1 - len(samples)
    return [*offsets, offsets[-1] + max(1, gaps[len(gaps) // 2])], [*delays, delays[-1]], missing


def outages_from_ping(text: str, name: str) -> list[tuple[float, float]]:
    """The requests of a ping log that got no reply, as outages on the delay series' clock (its 0 is the first
    reply): n unanswered requests in a row are an outage of n ping intervals from the first one's sending (a ping
    samples the path once an interval; it cannot tell which direction lost). [(at_s, length_ms)]."""
    samples = _ping_samples(text, name)
    sent = [(at - rtt / 1000, seq) for at, seq, rtt in samples]   # when each answered request left
    steps = sorted((b[0] - a[0]) / (b[1] - a[1]) for a, b in zip(sent, sent[1:], strict=False))
    interval = steps[len(steps) // 2]
    start = samples[0][0]
    return [(round(a[0] + interval - start, 6), round((b[1] - a[1] - 1) * interval * 1000, 3))
            for a, b in zip(sent, sent[1:], strict=False) if b[1] - a[1] > 1]
