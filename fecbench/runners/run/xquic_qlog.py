"""XQUIC's qlog as the JSON-SEQ qlog that qvis opens.

XQUIC (built with ``XQC_ENABLE_EVENT_LOG``) writes its qlog events as text lines into its test programs'
log file (``-o``), between its ordinary log lines::

    [2026/11/25 01:02:03 123456] [packet_sent] |scid:9f…|xqc_send_packet_with_pn|<==|conn:0x…|path_id:0|
        pkt_pns:2|pkt_type:SHORT_HEADER|pkt_num:12|size:1252|frame_flag:STREAM|sent:1252|inflight:13780|…|

(one line; the time is local wall-clock time to the microsecond). This module turns the events fecbench's
timelines use into qlog 0.3 events (``transport:packet_sent``, ``recovery:packet_lost``,
``recovery:metrics_updated`` with XQUIC's µs turned into ms, ``transport:packet_received``,
``recovery:congestion_state_updated``, ``connectivity:connection_started|closed``), one JSON-SEQ trace per
connection (XQUIC's source connection id), and keeps every other qlog event under ``xquic:<name>`` with its
fields as strings, so nothing XQUIC said is lost. Lines that are not qlog events (its error log) are left out.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

_LINE = re.compile(r"^\[(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d) (\d{6})\] \[([a-z0-9_]+)\] (\|.*)$")
_PACKET_TYPES = {"INIT": "initial", "0RTT": "0RTT", "HSK": "handshake", "RETRY": "retry",
                 "SHORT_HEADER": "1RTT", "VERSION_NEGOTIATION": "version_negotiation"}
_PACKET_TYPE_NUMBERS = dict(enumerate(_PACKET_TYPES.values()))   # xqc_pkt_type_t in packet_lost lines
_NAMES = {"packet_sent": "transport:packet_sent", "packet_received": "transport:packet_received",
          "packet_lost": "recovery:packet_lost", "rec_metrics_updated": "recovery:metrics_updated",
          "congestion_state_updated": "recovery:congestion_state_updated",
          "connection_started": "connectivity:connection_started",
          "connection_closed": "connectivity:connection_closed"}
#: XQUIC's metrics fields → qlog's, with the factor to qlog's unit (XQUIC's times are µs, qlog's ms).
_METRICS = {"cwnd": ("congestion_window", 1), "inflight": ("bytes_in_flight", 1), "srtt": ("smoothed_rtt", 1e-3),
            "latest_rtt": ("latest_rtt", 1e-3), "min_rtt": ("min_rtt", 1e-3), "pto_count": ("pto_count", 1),
            "pacing_rate": ("pacing_rate", 8)}   # BBR's pacing rate is in bytes/s, qlog's in bits/s
#: XQUIC's ordinary log lines (its log levels), which share the file and are not qlog events.
_LOG_LEVELS = {"report", "fatal", "error", "warn", "stats", "info", "debug"}
#: The suffix of the log files the descriptor asks XQUIC to write (quic-impls/xquic/impl.toml `[capture]`).
SUFFIX = ".xqlog"


def _fields(text: str) -> tuple[str, dict[str, str]]:
    """The connection id and the `key:value` fields of an event's `|…|` text (bare words are skipped)."""
    fields: dict[str, str] = {}
    for part in text.strip("|").split("|"):
        key, sep, value = part.partition(":")
        if sep and key and key not in fields:
            fields[key] = value
    return fields.pop("scid", ""), fields


def _int(fields: dict[str, str], key: str) -> int | None:
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        return None


def _data(kind: str, fields: dict[str, str]) -> dict[str, Any]:
    """qlog 0.3 data of one XQUIC event."""
    path = _int(fields, "path_id")
    base: dict[str, Any] = {} if path is None else {"path_id": path}
    if kind in ("packet_sent", "packet_received"):
        header: dict[str, Any] = {"packet_type": _PACKET_TYPES.get(fields.get("pkt_type", ""), "unknown")}
        if (number := _int(fields, "pkt_num")) is not None:
            header["packet_number"] = number
        size = _int(fields, "size") or _int(fields, "len")
        return {**base, "header": header, **({"raw": {"length": size}} if size is not None else {}),
                "frames_summary": fields.get("frame_flag", "")}
    if kind == "packet_lost":
        header = {"packet_type": _PACKET_TYPE_NUMBERS.get(_int(fields, "pkt_type") or 0, "unknown"),
                  "packet_number": _int(fields, "lost_pn") if "lost_pn" in fields else _int(fields, "pkt_num")}
        return {**base, "header": header, "frames_summary": fields.get("frame", "")}
    if kind == "rec_metrics_updated":
        out = dict(base)
        for key, (name, factor) in _METRICS.items():
            if (value := _int(fields, key)) is not None and not (key == "min_rtt" and value == 0):
                out[name] = value * factor if factor != 1 else value
        return out
    if kind == "congestion_state_updated":
        return {**base, "new": fields.get("new_state", "")}
    return {**base, **fields}


def convert(log: str | Path, out_dir: str | Path, vantage: str) -> list[Path]:
    """Write one ``<scid>.sqlog`` per connection found in an XQUIC log file into out_dir; the files written."""
    traces: dict[str, list[tuple[float, str, dict[str, Any]]]] = {}
    current: str | None = None
    with Path(log).open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            match = _LINE.match(line.rstrip("\n"))
            if not match:
                continue
            *stamp, micro, kind, text = match.groups()
            if kind in _LOG_LEVELS:
                continue
            year, month, day, hour, minute, second = map(int, stamp)
            # XQUIC prints local time (localtime_r): read back in the same zone, on the same machine.
            epoch_ms = datetime(year, month, day, hour, minute, second).timestamp() * 1000 + int(micro) / 1000
            scid, fields = _fields(text)
            name = _NAMES.get(kind, f"xquic:{kind}")
            data = _data(kind, fields) if kind in _NAMES else fields
            # An event of no connection (the server's listening) goes with the connection around it.
            scid = scid or current or "unknown"
            if current is None and scid != "unknown":
                traces[scid] = traces.pop("unknown", [])
            current = scid if scid != "unknown" else current
            traces.setdefault(scid, []).append((epoch_ms, name, data))
    written = []
    for scid, events in traces.items():
        reference = events[0][0]
        header = {"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "title": f"XQUIC {vantage} {scid}",
                  "trace": {"vantage_point": {"type": vantage, "name": "xquic"},
                            "common_fields": {"group_id": scid, "ODCID": scid, "reference_time": reference,
                                              "time_format": "relative"}}}
        target = Path(out_dir) / f"{scid}_{vantage}.sqlog"
        with target.open("w", encoding="utf-8") as out:
            out.write("\x1e" + json.dumps(header) + "\n")
            for epoch_ms, name, data in events:
                out.write("\x1e" + json.dumps({"time": round(epoch_ms - reference, 3), "name": name,
                                               "data": data}) + "\n")
        written.append(target)
    return written


def convert_tree(qlog_dir: Path) -> None:
    """Every side's folder of a run's qlog folder: the run's (qlog/<side>) and its competing flows'
    (qlog/flow-<id>/<side>)."""
    for folder in sorted(qlog_dir.rglob("*")):
        if folder.is_dir() and folder.name in ("server", "client"):
            convert_folder(folder, folder.name)


def convert_folder(folder: Path, vantage: str) -> None:
    """Replace every XQUIC log file in a run's qlog folder by its JSON-SEQ qlog (an empty one by nothing)."""
    for log in sorted(folder.glob(f"*{SUFFIX}")):
        convert(log, folder, vantage)
        log.unlink()
