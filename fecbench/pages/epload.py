"""Epload's dependency graphs (github.com/hoang-tranviet/Epload, the JSON its WProf recordings were converted to;
the format as its README describes it, no code of it here) as fecbench page graphs.

An Epload graph lists objects, each with a download activity and computation activities (``comps``, run one after
the other: the first once the object's first chunk arrived, ``when_comp_start`` 1, or once all of it did, -1), and
dependencies between activities: ``a2`` waits for ``a1`` to end (``time`` -1) or starts ``time`` ms after ``a1``
started. Epload's graphs name each object's URL, not its size (the objects were served from a folder of files):
an object's bytes come from its ``size`` (a key fecbench reads beside Epload's) or from that folder
(``objects``: ``<objects>/<host><path>``, as Epload's server held them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fecbench.pages.graph import REQUEST_BYTES, Activity, Dep, PageError, PageGraph, check


def is_epload(data: Any) -> bool:
    return isinstance(data, dict) and "objs" in data and "deps" in data


def convert(data: dict[str, Any], name: str, objects: Path | None = None, source: str = "") -> PageGraph:
    """The page graph of an Epload graph; PageError naming what is missing (an object without a size)."""
    activities: list[Activity] = []
    deps: list[Dep] = []
    for i, obj in enumerate(data.get("objs") or []):
        where = f"{name}: objs[{i}]"
        if not isinstance(obj, dict) or not isinstance(obj.get("download"), dict):
            raise PageError(f"{where}: an object needs a \"download\" activity")
        download = str(obj["download"].get("id") or f"{obj.get('id')}_d")
        activities.append(Activity(download, "download", request=REQUEST_BYTES, response=_size(obj, objects, where)))
        before, on = download, "first_byte" if obj.get("when_comp_start") == 1 else "end"
        for comp in obj.get("comps") or []:
            activities.append(Activity(str(comp["id"]), "compute", ms=float(comp.get("time", 0))))
            deps.append(Dep(before, str(comp["id"]), on))
            before, on = str(comp["id"]), "end"
    for dep in data.get("deps") or []:
        wait = float(dep.get("time", -1))
        deps.append(Dep(str(dep["a1"]), str(dep["a2"]), "end") if wait < 0
                    else Dep(str(dep["a1"]), str(dep["a2"]), "start", wait))
    load = data.get("load_activity")
    graph = check(PageGraph(name=name, activities=tuple(activities), deps=tuple(deps),
                            load=str(load) if load else None, source=source))
    start = data.get("start_activity")
    if start and any(d.then == start for d in graph.deps):
        raise PageError(f"{name}: its start activity {start!r} waits for another")
    return graph


def _size(obj: dict[str, Any], objects: Path | None, where: str) -> int:
    if isinstance(obj.get("size"), int) and obj["size"] > 0:
        return obj["size"]
    if objects is not None:
        path = objects / f"{obj.get('host', '')}{obj.get('path', '')}"
        if path.is_file():
            return max(1, path.stat().st_size)
        raise PageError(f"{where}: {path} is no file (the object's bytes are its file's size)")
    raise PageError(f"{where}: no size: give each object a \"size\" (bytes), or the folder Epload's server served "
                    "the objects from")
