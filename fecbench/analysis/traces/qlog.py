"""qlog files as tidy time series: what a QUIC endpoint said it did, per connection and path.

Reads the qlog serialisations qvis opens, compressed with gzip or not (``*.gz``):

- JSON-SEQ (``.sqlog``; RFC 7464: records separated by the RS character, or one per line): a header
  record (``qlog_version``, ``trace`` with ``vantage_point`` and ``common_fields``), then one event per record;
- JSON (``.qlog``): ``{"qlog_version": …, "traces": [{"vantage_point", "common_fields", "events"}, …]}``,
  events as objects (``time``, ``name``, ``data``) or, in the old drafts, as arrays described by the
  trace's ``event_fields`` (``relative_time``, ``category``, ``event``, ``data``).

Event names of qlog 0.3 and 0.4 alike: ``transport:packet_sent`` / ``quic:packet_sent``,
``recovery:packet_lost`` / ``quic:packet_lost``, ``recovery:metrics_updated`` /
``quic:recovery_metrics_updated`` (congestion_window, bytes_in_flight, smoothed_rtt, min_rtt,
latest_rtt: each event carries only what changed), and fecq's events in their own namespace: its FEC
events (``fecq:repair_sent``, ``fecq:source_recovered``, ``fecq:block_abandoned``,
``fecq:recovery_signalled``), ``fecq:datagram_sent`` (kind ``datagram``: every QUIC datagram it sent, its
``length`` on the wire and ``app_data``) and ``fecq:transfer_over`` (kind ``transfer_over``: the workload's
transfer ended at this end, its ``stats`` exchange begins; quic-impls/fecq/README.md).

Frames: ``app_data`` says whether a packet carried application data, from its event's frames: 1 when one of
them is a STREAM frame (or a DATAGRAM frame: fecq's messages in datagram mode), 0 when the event lists frames and
none is, NaN when it lists none (the stack's log cannot say; quinn-proto 0.11 lists none); a
``fecq:datagram_sent`` says it of its datagram itself (its ``app_data``, true or false). Frames are read as
qlog 0.3/0.4 and draft-02 write them (``data.frames``, objects with ``frame_type``) and as fecbench's XQUIC
converter writes them (``data.frames_summary``: XQUIC's frame flags, e.g. ``"STREAM ACK "``).

Times: ``time`` in ms (qlog's default ``time_units``; ``us`` is converted), ``delta`` times summed,
absolute times (since the epoch) and relative ones (to ``reference_time``) alike turned into ``t_s``:
seconds since the trace's first event; ``t_abs_s`` (since the epoch) where the trace tells it. Paths are
numbered as fecbench numbers a topology's paths, from 1: the event's multipath path id (``path_id`` or
``path``, in its data or header; 0 is the first path) + 1, a loss naming none taking its packet's path; 0
where the stack names no path at all (single path, or a stack that does not say). Anything a stack left
out is NaN; an event that does not parse is counted in ``QlogTrace.skipped``, never fatal.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

#: Suffixes of the files read as qlog (with ``.gz`` too).
SUFFIXES = (".sqlog", ".qlog")
#: Namespaces of the standard events (their names are kept without them).
STANDARD = ("quic", "transport", "recovery", "connectivity", "security", "loss")
#: fecq's FEC events (namespace ``fecq``) → the kind they become.
FEC_EVENTS = {"repair_sent": "repair_sent", "source_recovered": "recovered", "block_abandoned": "abandoned",
              "recovery_signalled": "signalled"}
#: fecq's own events of the datagrams it sent, and the mark where its transfer ended and its ``stats``
#: exchange began (what it sends from then on is no data of the transfer) → the kind they become.
DATAGRAM_EVENTS = {"datagram_sent": "datagram", "transfer_over": "transfer_over"}
#: The kinds kept: metrics updates, packets sent, received and lost, and fecq's events.
KINDS = ("metrics", "sent", "received", "lost", *FEC_EVENTS.values(), *DATAGRAM_EVENTS.values())
COLUMNS = ["t_s", "t_abs_s", "kind", "path", "packet_number", "packet_type", "bytes", "cwnd", "bytes_in_flight",
           "srtt_ms", "min_rtt_ms", "latest_rtt_ms", "pacing_bps", "block", "symbol", "trigger", "app_data"]
#: Frame types that carry application data (lower case; XQUIC's flags are upper case).
APP_DATA_FRAMES = ("stream", "datagram")
_METRICS = {"congestion_window": "cwnd", "bytes_in_flight": "bytes_in_flight", "smoothed_rtt": "srtt_ms",
            "min_rtt": "min_rtt_ms", "latest_rtt": "latest_rtt_ms", "pacing_rate": "pacing_bps"}
_EPOCH_MS = 1e11   # a time above this many ms is since the epoch (1973), not since a connection began


@dataclass
class QlogTrace:
    """One connection as one endpoint saw it: where it came from, who wrote it, its events."""
    file: Path
    vantage: str                     # client, server or unknown
    connection: str                  # the trace's ODCID / group id / title, else the file's name
    events: pd.DataFrame             # COLUMNS, in time order
    skipped: int = 0                 # events that did not parse
    names: dict[str, int] = field(default_factory=dict)   # every event name and how often

    @property
    def paths(self) -> list[int]:
        return sorted(int(p) for p in self.events["path"].dropna().unique())


def is_qlog(path: Path) -> bool:
    name = path.name.removesuffix(".gz")
    return any(name.endswith(s) for s in SUFFIXES)


def read(path: str | Path) -> list[QlogTrace]:
    """Every trace of a qlog file (one for JSON-SEQ); ValueError when the file is no qlog at all."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8", errors="replace").lstrip()
    if not text:
        raise ValueError(f"{path}: empty file")
    if text[0] == "\x1e" or "qlog_format" in text[:400] and "JSON-SEQ" in text[:400]:
        return [_from_records(path, text)]
    try:
        document = json.loads(text)
    except ValueError:
        return [_from_records(path, text)]    # newline-delimited records without RS
    traces = document.get("traces") if isinstance(document, dict) else None
    if not isinstance(traces, list):
        raise ValueError(f"{path}: neither JSON-SEQ nor a JSON qlog with a 'traces' array")
    return [_trace(path, t, t.get("events") or [], i) for i, t in enumerate(traces) if isinstance(t, dict)]


def _from_records(path: Path, text: str) -> QlogTrace:
    separator = "\x1e" if "\x1e" in text else "\n"
    records, skipped = [], 0
    for chunk in text.split(separator):
        if chunk.strip():
            try:
                records.append(json.loads(chunk))
            except ValueError:
                skipped += 1          # a record cut short (an endpoint killed mid-write)
    if not records or not isinstance(records[0], dict):
        raise ValueError(f"{path}: no JSON-SEQ qlog records")
    header, events = (records[0], records[1:]) if "name" not in records[0] else ({}, records)
    trace = _trace(path, header.get("trace") or header, events, 0)
    trace.skipped += skipped
    return trace


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _reference_ms(common: dict[str, Any]) -> float:
    """The trace's reference time in ms since the epoch (0.3: a number; 0.4: {"clock_type", "epoch"})."""
    ref = common.get("reference_time")
    if isinstance(ref, dict):
        ref = ref.get("epoch")
    return _iso_ms(ref) if isinstance(ref, str) else _number(ref)


def _iso_ms(text: str) -> float:
    try:
        return pd.Timestamp(text).timestamp() * 1000
    except (ValueError, TypeError):
        return math.nan


def _event_tuple(event: Any, fields: list[str]) -> tuple[float, str, dict[str, Any]]:
    """(time, name, data) of an event object or of an old-draft event array."""
    if isinstance(event, list):
        item = dict(zip(fields, event, strict=False))
        name = item.get("name") or f"{item.get('category', '')}:{item.get('event', '')}"
        time = item.get("relative_time", item.get("time", item.get("delta_time")))
        return _number(time), str(name), item.get("data") if isinstance(item.get("data"), dict) else {}
    if not isinstance(event, dict):
        raise ValueError("not an event")
    name = event.get("name") or f"{event.get('category', '')}:{event.get('event', '')}"
    data = event.get("data")
    return _number(event.get("time")), str(name), data if isinstance(data, dict) else {}


def _kind(name: str) -> str | None:
    space, _, short = name.rpartition(":")
    if space == "fecq":
        return FEC_EVENTS.get(short) or DATAGRAM_EVENTS.get(short)
    if space and space not in STANDARD:
        return None
    short = short.removeprefix("recovery_")
    return {"metrics_updated": "metrics", "packet_sent": "sent", "packet_received": "received",
            "packet_lost": "lost"}.get(short)


def _path(data: dict[str, Any], header: dict[str, Any]) -> float:
    """The multipath path id an event names (its data's or its header's ``path_id``/``path``), NaN if none."""
    for source in (data, header):
        for key in ("path_id", "path"):
            value = _number(source.get(key)) if key in source else math.nan
            if not math.isnan(value):
                return value
    return math.nan


def _number_paths(frame: pd.DataFrame) -> pd.Series:
    """``path``: 1-based (the multipath path id + 1: id 0 is the first path) where the stack names paths; a
    loss that does not say takes the path of the packet of that type and number sent last before it and not
    yet declared lost (a path's packet numbers are its own: the same number may be in flight on two); 0
    everywhere when the stack names no path (single path, or a stack that does not say)."""
    ids = frame["path"]
    if ids.isna().all():
        return pd.Series(0.0, index=frame.index)
    ids = ids.copy()
    sent = frame[(frame["kind"] == "sent") & ids.notna()]
    in_flight: dict[tuple[str, float], list[float]] = {}
    for index, kind in frame["kind"].items():
        key = (str(frame.at[index, "packet_type"]), frame.at[index, "packet_number"])
        if kind == "sent" and index in sent.index:
            in_flight.setdefault(key, []).append(ids[index])
        elif kind == "lost" and math.isnan(ids[index]) and in_flight.get(key):
            ids[index] = in_flight[key].pop()
    return ids.fillna(0.0) + 1


def _app_data(data: dict[str, Any]) -> float:
    """1.0 when the event's frames include application data (``APP_DATA_FRAMES``), 0.0 when it lists frames and
    none does, NaN when it lists no frames (``frames``: qlog's objects; ``frames_summary``: XQUIC's flags);
    fecq's ``datagram_sent`` gives it as ``app_data``."""
    if isinstance(data.get("app_data"), bool):
        return float(data["app_data"])
    frames = data.get("frames")
    if isinstance(frames, list) and frames:
        types = [str(f.get("frame_type", "")).lower() for f in frames if isinstance(f, dict)]
    elif isinstance(data.get("frames_summary"), str) and data["frames_summary"].strip():
        types = data["frames_summary"].lower().split()
    else:
        return math.nan
    return 1.0 if any(t in APP_DATA_FRAMES for t in types) else 0.0


def _row(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    header = data.get("header") if isinstance(data.get("header"), dict) else {}
    raw = data.get("raw") if isinstance(data.get("raw"), dict) else {}
    row: dict[str, Any] = {"kind": kind, "path": _path(data, header),
                           "packet_number": _number(header.get("packet_number", data.get("packet_number"))),
                           "packet_type": header.get("packet_type", data.get("packet_type")),
                           # raw.length (qlog 0.4), else the data's or the header's (0.3: quinn-proto's;
                           # draft-02: quic-go's header.packet_size, rQUIC's)
                           "bytes": _number(raw.get("length", data.get("length", data.get("size", header.get(
                               "length", header.get("packet_size")))))),
                           "block": _number(data.get("block")), "symbol": _number(data.get("symbol")),
                           "trigger": data.get("trigger"), "app_data": _app_data(data)}
    if kind == "metrics":
        row.update({column: _number(data.get(key)) for key, column in _METRICS.items()})
    return row


def _trace(path: Path, trace: dict[str, Any], events: list[Any], index: int) -> QlogTrace:
    common = trace.get("common_fields") if isinstance(trace.get("common_fields"), dict) else {}
    configuration = trace.get("configuration") if isinstance(trace.get("configuration"), dict) else {}
    fields = [str(f) for f in trace.get("event_fields") or []]
    time_format = str(common.get("time_format", trace.get("time_format", "relative")))
    scale = 1000.0 if str(common.get("time_units", configuration.get("time_units", "ms"))) == "us" else 1.0
    offset_ms = _number(configuration.get("time_offset")) if "time_offset" in configuration else 0.0
    reference = _reference_ms(common)
    vantage = trace.get("vantage_point") if isinstance(trace.get("vantage_point"), dict) else {}
    connection = str(common.get("ODCID") or common.get("group_id") or trace.get("description") or
                     trace.get("title") or f"{path.name}#{index}")
    rows, names, skipped, clock = [], {}, 0, 0.0
    for event in events:
        try:
            time, name, data = _event_tuple(event, fields)
        except ValueError:
            skipped += 1
            continue
        names[name] = names.get(name, 0) + 1
        if math.isnan(time):
            skipped += 1
            continue
        time = time / scale + (0.0 if math.isnan(offset_ms) else offset_ms)
        clock = clock + time if time_format == "delta" else time
        kind = _kind(name)
        if kind is not None:
            rows.append({"t_ms": clock, **_row(kind, data)})
    frame = pd.DataFrame(rows, columns=["t_ms", *COLUMNS[2:]])
    absolute = (not frame.empty and frame["t_ms"].min() > _EPOCH_MS) or time_format == "absolute"
    start = frame["t_ms"].min() if len(frame) else 0.0
    frame.insert(0, "t_s", (frame["t_ms"] - start) / 1000)
    abs_ms = frame["t_ms"] if absolute else frame["t_ms"] + reference
    frame.insert(1, "t_abs_s", (abs_ms / 1000).where(abs_ms > _EPOCH_MS))
    frame = frame.drop(columns="t_ms").astype({c: float for c in COLUMNS if c not in ("kind", "packet_type",
                                                                                     "trigger")})
    frame = frame.sort_values("t_s", kind="stable").reset_index(drop=True)
    frame["path"] = _number_paths(frame)
    return QlogTrace(path, str(vantage.get("type") or vantage.get("name") or "unknown"), connection, frame, skipped,
                 names)


def read_all(files: list[Path]) -> tuple[list[QlogTrace], list[str]]:
    """The traces of every qlog file among ``files``, and a note per file that could not be read."""
    traces, notes = [], []
    for file in files:
        if not is_qlog(file):
            continue
        try:
            traces.extend(read(file))
        except (OSError, ValueError, EOFError) as exc:
            notes.append(f"{file.name}: not read ({exc})")
    return traces, notes
