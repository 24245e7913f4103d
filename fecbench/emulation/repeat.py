"""A topology's repetitions: `[topology] paths = N` repeats every node, link, path and factor whose text
contains `{i}` for i = 1..N (how a multipath spec says "N disjoint paths"), on the raw TOML data, which is
then validated as if written out."""

from __future__ import annotations

import copy
from typing import Any


def expand_repetitions(raw: dict[str, Any], n: int) -> dict[str, str]:
    """Expand the {i} repetitions of `raw` in place; returns the per-path factors and the name each was
    repeated from ("owd_2" -> "owd" for "owd_{i}")."""
    for key in ("node", "link", "path"):
        if key in raw and isinstance(raw[key], list):
            raw[key] = _expand(raw[key], n)
    shared: dict[str, str] = {}
    if "factors" in raw and isinstance(raw["factors"], dict):
        expanded: dict[str, Any] = {}
        for k, v in raw["factors"].items():
            if "{i}" in k:
                expanded.update({k.replace("{i}", str(i)): v for i in range(1, n + 1)})
                shared.update({k.replace("{i}", str(i)): k.replace("{i}", "").strip("_") for i in range(1, n + 1)})
            else:
                expanded[k] = v
        raw["factors"] = expanded
    return shared


def _expand(items: list[Any], n: int) -> list[Any]:
    """Repeat every item whose text mentions {i} for i = 1..n (keeping the order)."""
    out = []
    for item in items:
        if "{i}" in repr(item):
            out.extend(_substitute(copy.deepcopy(item), i) for i in range(1, n + 1))
        else:
            out.append(item)
    return out


def _substitute(value: Any, i: int) -> Any:
    if isinstance(value, str):
        return value.replace("{i}", str(i))
    if isinstance(value, list):
        return [_substitute(v, i) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, i): _substitute(v, i) for k, v in value.items()}
    return value
