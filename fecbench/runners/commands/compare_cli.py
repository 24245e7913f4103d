"""`fecbench compare A.sqlite B.sqlite`: two campaigns of one design, run by key. Did they run the same runs
on the same losses? The same keys, the same loss seed per key, and where both kept the droppers' verdict
logs, the same verdicts per key and dropper at every packet both runs saw (a dropper decides packet n by
(seed, stream, n): fewer or more packets, not other verdicts). Statuses and hosts are shown, not judged:
a run flagged on one machine may pass on another. Exit status 0 when the two agree, 1 when they differ.

Its use: a campaign on many hosts against the same design on one (designs/README.md, "Many hosts"), two
link backends, a resumed campaign against a fresh one.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer


@dataclass
class Comparison:
    """What two databases say by key."""

    keys: tuple[int, int]
    common: int
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    seeds_differ: list[str] = field(default_factory=list)
    logged: int = 0                                   # common keys whose droppers' verdicts both kept
    verdicts_differ: list[str] = field(default_factory=list)
    droppers_differ: list[str] = field(default_factory=list)   # keys logged by other droppers on each side
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)
    status_pairs: dict[str, int] = field(default_factory=dict)  # "a → b" for the common keys whose status differs
    hosts: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))

    @property
    def same(self) -> bool:
        return not (self.only_a or self.only_b or self.seeds_differ or self.verdicts_differ or self.droppers_differ)

    def as_json(self) -> dict[str, Any]:
        return {"same": self.same, "keys": list(self.keys), "common": self.common, "only_a": self.only_a,
                "only_b": self.only_b, "seeds_differ": self.seeds_differ, "verdicts_compared": self.logged,
                "verdicts_differ": self.verdicts_differ, "droppers_differ": self.droppers_differ,
                "statuses": self.statuses, "status_pairs": self.status_pairs,
                "hosts": {"a": self.hosts[0], "b": self.hosts[1]}}


def _load(db: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[tuple[str, str], Any]]]:
    import numpy as np

    from fecbench.analysis import results

    columns = ["key", "loss_seed", "status", "host"]
    runs = {row[0]: dict(zip(columns, row, strict=True)) for row in results.rows(db, "runs", columns)}
    logs: dict[str, dict[tuple[str, str], Any]] = {}
    if "verdict_logs" in results.table_names(db):
        for key, link, direction, data in results.rows(db, "verdict_logs", ["run_key", "link", "direction", "data"]):
            logs.setdefault(key, {})[(link, direction)] = np.load(io.BytesIO(data), allow_pickle=False)
    return runs, logs


def _agree(a: Any, b: Any) -> bool:
    """The droppers' verdicts equal at every index both runs saw."""
    import numpy as np

    va, vb = np.asarray(a["verdict"]).astype(bool), np.asarray(b["verdict"]).astype(bool)
    n = min(len(va), len(vb))
    return bool(np.array_equal(va[:n], vb[:n]))


def compare(a: Path, b: Path) -> Comparison:
    runs_a, logs_a = _load(a)
    runs_b, logs_b = _load(b)
    common = sorted(runs_a.keys() & runs_b.keys())
    out = Comparison(keys=(len(runs_a), len(runs_b)), common=len(common),
                     only_a=sorted(runs_a.keys() - runs_b.keys()), only_b=sorted(runs_b.keys() - runs_a.keys()))
    pairs: Counter[str] = Counter()
    for key in common:
        ra, rb = runs_a[key], runs_b[key]
        if ra["loss_seed"] != rb["loss_seed"]:
            out.seeds_differ.append(key)
        if ra["status"] != rb["status"]:
            pairs[f"{ra['status']} → {rb['status']}"] += 1
        la, lb = logs_a.get(key), logs_b.get(key)
        if la and lb:
            if la.keys() != lb.keys():
                out.droppers_differ.append(key)
                continue
            out.logged += 1
            if not all(_agree(la[d], lb[d]) for d in la):
                out.verdicts_differ.append(key)
    out.status_pairs = dict(pairs)
    out.statuses = {"a": dict(Counter(r["status"] for r in runs_a.values())),
                    "b": dict(Counter(r["status"] for r in runs_b.values()))}
    out.hosts = (dict(Counter(r["host"] or "?" for r in runs_a.values())),
                 dict(Counter(r["host"] or "?" for r in runs_b.values())))
    return out


def _few(keys: list[str]) -> str:
    return ", ".join(k[:12] for k in keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def text(c: Comparison, a: Path, b: Path) -> list[str]:
    lines = [f"A {a}: {c.keys[0]} run(s) on " + ", ".join(f"{h} ({n})" for h, n in sorted(c.hosts[0].items())),
             f"B {b}: {c.keys[1]} run(s) on " + ", ".join(f"{h} ({n})" for h, n in sorted(c.hosts[1].items())),
             f"keys: {c.common} in both" + (f"; only in A: {len(c.only_a)} ({_few(c.only_a)})" if c.only_a else "")
             + (f"; only in B: {len(c.only_b)} ({_few(c.only_b)})" if c.only_b else ""),
             f"loss seeds: {c.common - len(c.seeds_differ)} of {c.common} the same"
             + (f"; differ: {_few(c.seeds_differ)}" if c.seeds_differ else "")]
    if c.logged or c.droppers_differ:
        lines.append(f"dropper verdicts: {c.logged - len(c.verdicts_differ)} of {c.logged} key(s) logged on both "
                     "sides agree at every packet both runs saw"
                     + (f"; differ: {_few(c.verdicts_differ)}" if c.verdicts_differ else "")
                     + (f"; other droppers logged: {_few(c.droppers_differ)}" if c.droppers_differ else ""))
    else:
        lines.append("dropper verdicts: not compared (neither side kept verdict logs of the same runs: design "
                     "`verdict_log = true`)")
    lines.append("statuses: A " + ", ".join(f"{s} {n}" for s, n in sorted(c.statuses["a"].items()))
                 + "; B " + ", ".join(f"{s} {n}" for s, n in sorted(c.statuses["b"].items()))
                 + ("; common keys whose status differs: " + ", ".join(f"{p} ({n})" for p, n in
                                                                      sorted(c.status_pairs.items()))
                    if c.status_pairs else ""))
    lines.append("the same runs on the same losses" if c.same else "they differ")
    return lines


def compare_command(
    a: Path = typer.Argument(..., help="A results database.", show_default=False, metavar="A.sqlite"),
    b: Path = typer.Argument(..., help="Another results database of the same design.", show_default=False,
                             metavar="B.sqlite"),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Two campaigns by run key: the same keys, loss seeds and dropper verdicts? Exit 1 if not."""
    from fecbench.inputs.errors import UserError

    for db in (a, b):
        if not db.is_file():
            raise UserError(f"{db}: no such results database")
    result = compare(a, b)
    if json_out:
        print(json.dumps(result.as_json(), indent=1))
    else:
        for line in text(result, a, b):
            print(line)
    raise typer.Exit(0 if result.same else 1)
