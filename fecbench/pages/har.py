"""HAR 1.2 recordings (what every browser's developer tools export) as fecbench page graphs.

A HAR lists what the browser fetched and when, not why: the graph is inferred. Each entry of the first page becomes
a download (its bytes on the wire: Chrome's ``_transferSize``, else the body and headers sizes, else the content's
size). Its parent is the entry that started it where the recording names one (Chrome's ``_initiator`` object,
or a URL string as browsertime writes it), else the entry that ended last before it started (WProf-style: what
the browser had just received); the first entry is the root. An entry that started after its parent ended waits
for the parent's end and, when the gap is 1 ms or more, a computation as long as the gap (the browser's parsing
and script time, which a HAR does not itemise); one that started while its parent was arriving waits for the
parent's first byte (or its start) and the time since. The page is loaded when its last activity ends.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from fecbench.pages.graph import REQUEST_BYTES, Activity, Dep, PageError, PageGraph, check

#: A gap shorter than this between a parent's end and its child's start is the browser dispatching, not work.
GAP_MS = 1.0


def is_har(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("log"), dict) and "entries" in data["log"]


def convert(data: dict[str, Any], name: str, source: str = "") -> PageGraph:
    """The page graph of a HAR's first page; PageError when it has no usable entry."""
    entries = _entries(data["log"])
    if not entries:
        raise PageError(f"{name}: the HAR has no complete HTTP(S) entry of its first page")
    activities: list[Activity] = []
    deps: list[Dep] = []
    for i, entry in enumerate(entries):
        activities.append(Activity(entry["id"], "download", request=entry["request"], response=entry["response"]))
        if i:
            _link(entries[_parent(entries, i)], entry, activities, deps)
    return check(PageGraph(name=name, activities=tuple(activities), deps=tuple(deps), source=source))


def _entries(log: dict[str, Any]) -> list[dict[str, Any]]:
    pages = log.get("pages") or []
    page = pages[0].get("id") if pages and isinstance(pages[0], dict) else None
    out = []
    for entry in log.get("entries") or []:
        if page is not None and entry.get("pageref", page) != page:
            continue
        url = str(entry.get("request", {}).get("url", ""))
        response = entry.get("response") or {}
        if not url.startswith(("http://", "https://")) or not response.get("status") or entry.get("time", -1) < 0:
            continue
        start = datetime.fromisoformat(str(entry["startedDateTime"]).replace("Z", "+00:00")).timestamp() * 1000
        waited = sum(max(0.0, float(entry.get("timings", {}).get(k, 0) or 0))
                     for k in ("blocked", "dns", "connect", "send", "wait"))
        out.append({"url": url, "start": start, "first_byte": start + min(waited, entry["time"]),
                    "end": start + float(entry["time"]), "initiator": _initiator(entry),
                    "request": _request_bytes(entry.get("request") or {}), "response": _response_bytes(response)})
    out.sort(key=lambda e: e["start"])
    zero = out[0]["start"] if out else 0.0
    for i, entry in enumerate(out):
        for key in ("start", "first_byte", "end"):
            entry[key] -= zero
        parts = urlsplit(entry["url"])
        entry["id"] = f"d{i} {parts.netloc}{parts.path}"[:100]
    return out


def _initiator(entry: dict[str, Any]) -> str | None:
    value = entry.get("_initiator")
    if isinstance(value, dict):
        value = value.get("url")
    return value if isinstance(value, str) and value else None


def _request_bytes(request: dict[str, Any]) -> int:
    sizes = [int(request.get(k, -1) or -1) for k in ("headersSize", "bodySize")]
    known = sum(s for s in sizes if s > 0)
    return known or REQUEST_BYTES


def _response_bytes(response: dict[str, Any]) -> int:
    transfer = response.get("_transferSize")
    if isinstance(transfer, (int, float)) and transfer > 0:
        return int(transfer)
    body = int(response.get("bodySize", -1) or -1)
    if body > 0:
        return body + max(0, int(response.get("headersSize", -1) or -1))
    return max(1, int((response.get("content") or {}).get("size", 1) or 1))


def _parent(entries: list[dict[str, Any]], i: int) -> int:
    entry = entries[i]
    if entry["initiator"]:
        named = [j for j in range(i) if entries[j]["url"] == entry["initiator"]]
        if named:
            return named[-1]
    ended = [j for j in range(i) if entries[j]["end"] <= entry["start"]]
    return max(ended, key=lambda j: entries[j]["end"]) if ended else 0


def _link(parent: dict[str, Any], entry: dict[str, Any], activities: list[Activity], deps: list[Dep]) -> None:
    """The dependencies that start `entry` when it started, relative to `parent`."""
    start = entry["start"]
    if parent["end"] <= start:
        gap = start - parent["end"]
        if gap >= GAP_MS:
            work = f"c {entry['id']}"
            activities.append(Activity(work, "compute", ms=round(gap, 3)))
            deps += [Dep(parent["id"], work, "end"), Dep(work, entry["id"], "end")]
        else:
            deps.append(Dep(parent["id"], entry["id"], "end"))
    elif parent["first_byte"] <= start:
        deps.append(Dep(parent["id"], entry["id"], "first_byte", round(start - parent["first_byte"], 3)))
    else:
        deps.append(Dep(parent["id"], entry["id"], "start", round(max(0.0, start - parent["start"]), 3)))
