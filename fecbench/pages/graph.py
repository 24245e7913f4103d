"""A web page as a dependency graph of activities, the model of Epload (Wang et al., "How speedy is SPDY?", NSDI
2014): downloads (one object each: a request up, a response down, on a stream of its own) and computations (the
browser parsing, evaluating, laying out: emulated by waiting), each starting when what it depends on has happened.
A page load replays the graph over one connection; its time is the load activity's end (the browser's critical
path, not the sum of its objects).

The file the implementations read (format ``fecbench-page-1``, quic-impls/fecq/README.md):

    {"format": "fecbench-page-1", "name": "...", "source": "where it came from",
     "activities": [{"id": "r1_d", "kind": "download", "request": 300, "response": 102400},
                    {"id": "r1_c1", "kind": "compute", "ms": 500.0}],
     "deps": [{"after": "r1_d", "then": "r1_c1", "on": "first_byte", "ms": 0.0}],
     "load": "r1_c1"}

A dependency triggers ``ms`` after its ``after`` activity's event ``on``: ``start``, ``first_byte`` (a download's
first response byte) or ``end``; an activity starts once every dependency into it triggered (at once when it has
none). ``load`` absent: the page is loaded when its last activity ends. fecbench.pages.epload and
fecbench.pages.har make graphs of the formats people have; fecbench.pages.corpus names the repository's pages.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

FORMAT = "fecbench-page-1"
KINDS = ("download", "compute")
EVENTS = ("start", "first_byte", "end")
#: Bytes of a request when the source does not say (an HTTP/3 GET's headers, compressed, are about this size).
REQUEST_BYTES = 300
#: The longest computation or dependency delay (ms): a day, as the clients' timers take (fecq's page.rs).
MAX_MS = 86_400_000.0


class PageError(ValueError):
    """A page graph that cannot be loaded as written; the message says what is wrong."""


@dataclass(frozen=True)
class Activity:
    id: str
    kind: str                 # download | compute
    request: int = 0          # download: bytes up
    response: int = 0         # download: bytes down
    ms: float = 0.0           # compute: how long it takes


@dataclass(frozen=True)
class Dep:
    after: str
    then: str
    on: str = "end"           # the event of `after` it waits for
    ms: float = 0.0           # and this long after it


@dataclass(frozen=True)
class Times:
    """When an activity started, had its first byte (downloads) and ended, in ms from the page's start."""
    start: float
    first_byte: float | None
    end: float


@dataclass(frozen=True)
class PageGraph:
    name: str
    activities: tuple[Activity, ...]
    deps: tuple[Dep, ...]
    load: str | None = None
    source: str = ""

    @cached_property
    def order(self) -> tuple[str, ...]:
        """Every activity after those it waits for; PageError when a cycle leaves some never started."""
        return _topological(self)

    @property
    def downloads(self) -> list[Activity]:
        return [a for a in self.activities if a.kind == "download"]

    def app_bytes(self) -> int:
        """What a complete load moves: every download's request and response."""
        return sum(a.request + a.response for a in self.downloads)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "name": self.name, "source": self.source, "activities": [
            {"id": a.id, "kind": a.kind, "request": a.request, "response": a.response} if a.kind == "download"
            else {"id": a.id, "kind": a.kind, "ms": a.ms} for a in self.activities],
            "deps": [{"after": d.after, "then": d.then, "on": d.on, "ms": d.ms} for d in self.deps]}
        if self.load is not None:
            out["load"] = self.load
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def digest(self) -> str:
        """The sha256 of what a load does (name and source left out): a run's key holds it."""
        what = {k: v for k, v in self.to_dict().items() if k not in ("name", "source")}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()

    def schedule(self, fetch: Callable[[Activity], tuple[float, float]]) -> dict[str, Times]:
        """Every activity's times when each download takes `fetch(activity)` = (ms to its first byte, ms to its
        end) from its start, whatever else is in flight: the critical path's arithmetic (a network shares its
        rate between concurrent downloads; the caller's `fetch` decides how much of that to model)."""
        into: dict[str, list[Dep]] = {a.id: [] for a in self.activities}
        for dep in self.deps:
            into[dep.then].append(dep)
        kinds = {a.id: a for a in self.activities}
        times: dict[str, Times] = {}
        for name in self.order:
            start = max((_event(times[d.after], d.on) + d.ms for d in into[name]), default=0.0)
            activity = kinds[name]
            if activity.kind == "download":
                first, end = fetch(activity)
                times[name] = Times(start, start + first, start + end)
            else:
                times[name] = Times(start, None, start + activity.ms)
        return times

    def modelled_load_ms(self, rtt_ms: float, bytes_per_ms: float | None, rtts: float = 1.0) -> float:
        """The load time if each download took `rtts` round trips plus its bytes at the rate (None: no limit),
        and never less than every byte at that rate: with rtts = 1 and the link's rate, the least a network lets
        the page take (its critical path); the duration model takes more round trips and a loss-limited rate."""
        def fetch(activity: Activity) -> tuple[float, float]:
            transfer = (activity.request + activity.response) / bytes_per_ms if bytes_per_ms else 0.0
            return rtts * rtt_ms, rtts * rtt_ms + transfer

        every_byte = self.app_bytes() / bytes_per_ms if bytes_per_ms else 0.0
        return max(self.load_ms(self.schedule(fetch)), every_byte)

    def load_ms(self, times: dict[str, Times]) -> float:
        """The page load time of a schedule: the load activity's end, else the last end."""
        if self.load is not None:
            return times[self.load].end
        return max(t.end for t in times.values())


def _event(times: Times, on: str) -> float:
    if on == "start":
        return times.start
    if on == "first_byte":
        return times.first_byte if times.first_byte is not None else times.end
    return times.end


def parse(data: Any, where: str = "page") -> PageGraph:
    """A fecbench-page-1 graph from its JSON value, checked (`check`)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PageError(f"{where}: not a {FORMAT} graph (its \"format\" must be {FORMAT!r})")
    unknown = set(data) - {"format", "name", "source", "activities", "deps", "load"}
    if unknown:
        raise PageError(f"{where}: unknown key(s) {sorted(unknown)}")
    activities = tuple(_activity(a, f"{where}: activities[{i}]")
                       for i, a in enumerate(_list(data, "activities", where)))
    deps = tuple(_dep(d, f"{where}: deps[{i}]") for i, d in enumerate(_list(data, "deps", where, required=False)))
    load = data.get("load")
    if load is not None and not isinstance(load, str):
        raise PageError(f"{where}: \"load\" must be an activity id")
    return check(PageGraph(name=str(data.get("name") or where), activities=activities, deps=deps, load=load,
                           source=str(data.get("source") or "")))


def _list(data: dict[str, Any], key: str, where: str, required: bool = True) -> list[Any]:
    value = data.get(key, None if required else [])
    if not isinstance(value, list) or (required and not value):
        raise PageError(f"{where}: \"{key}\" must be a{' non-empty' if required else ''} list")
    return value


def _number(entry: dict[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PageError(f"{where}: \"{key}\" must be a number >= 0, not {value!r}")
    if key == "ms" and value > MAX_MS:
        raise PageError(f"{where}: \"ms\" {value:g} is more than a day ({MAX_MS:g} ms)")
    return value


def _activity(entry: Any, where: str) -> Activity:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
        raise PageError(f"{where}: an activity is an object with a non-empty \"id\"")
    kind = entry.get("kind")
    if kind == "download":
        request, response = _number(entry, "request", where, REQUEST_BYTES), _number(entry, "response", where)
        if int(request) != request or int(response) != response or response < 1:
            raise PageError(f"{where}: a download's request and response are whole bytes (response >= 1)")
        return Activity(entry["id"], kind, request=int(request), response=int(response))
    if kind == "compute":
        return Activity(entry["id"], kind, ms=float(_number(entry, "ms", where)))
    raise PageError(f"{where}: \"kind\" must be one of {KINDS}, not {kind!r}")


def _dep(entry: Any, where: str) -> Dep:
    if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("after", "then")):
        raise PageError(f"{where}: a dependency is an object with \"after\" and \"then\" activity ids")
    on = entry.get("on", "end")
    if on not in EVENTS:
        raise PageError(f"{where}: \"on\" must be one of {EVENTS}, not {on!r}")
    return Dep(entry["after"], entry["then"], on, float(_number(entry, "ms", where, 0.0)))


def check(graph: PageGraph) -> PageGraph:
    """The graph's consistency: unique ids, dependencies between known activities, first_byte only of a download,
    no cycle (an activity that could never start), a known load activity; returns it, its order computed."""
    kinds = {}
    for activity in graph.activities:
        if activity.id in kinds:
            raise PageError(f"{graph.name}: activity id {activity.id!r} twice")
        kinds[activity.id] = activity.kind
    for dep in graph.deps:
        for end in (dep.after, dep.then):
            if end not in kinds:
                raise PageError(f"{graph.name}: a dependency names {end!r}, which is no activity")
        if dep.on == "first_byte" and kinds[dep.after] != "download":
            raise PageError(f"{graph.name}: {dep.then!r} waits for the first byte of {dep.after!r}, a computation")
    if graph.load is not None and graph.load not in kinds:
        raise PageError(f"{graph.name}: the load activity {graph.load!r} is no activity")
    graph.order   # noqa: B018 (computed here: a cycle is refused where the graph is read)
    return graph


def _topological(graph: PageGraph) -> tuple[str, ...]:
    waiting = {a.id: 0 for a in graph.activities}
    then: dict[str, list[str]] = {a.id: [] for a in graph.activities}
    for dep in graph.deps:
        waiting[dep.then] += 1
        then[dep.after].append(dep.then)
    ready = [a.id for a in graph.activities if not waiting[a.id]]
    if not ready:
        raise PageError(f"{graph.name}: every activity waits for another: nothing can start")
    order: list[str] = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for next_name in then[name]:
            waiting[next_name] -= 1
            if not waiting[next_name]:
                ready.append(next_name)
    if len(order) != len(graph.activities):
        stuck = sorted(name for name, count in waiting.items() if count)
        raise PageError(f"{graph.name}: a cycle of dependencies: {', '.join(stuck[:5])} can never start")
    return tuple(order)
