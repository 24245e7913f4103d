"""What changed between two campaigns, said before what they measured (`fecbench compare A B`, issue 60):
each database's recorded provenance side by side, the rows that differ marked, so that "worse" comes with its
likely cause.

What each campaign recorded (``fecbench.records.db``: the campaigns table) gives the rows, in this order:
the design (name, design file hash, seed, repetitions), fecbench (version and git commit), each implementation
by name (its ``--version`` output, the sha256 of its binaries: the build, and of its descriptor), the kernel,
the link backend, the machine (hostname, architecture, CPU, CPUs), the hosts of a campaign run on many, and
Python and each tool the host fingerprint names (shown only where they differ). A database holding several
campaigns (a design edited between runs) shows each distinct value, joined by " | ". The recording time is
shown, never counted as a change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fecbench.analysis import results

NOT_RECORDED = "not recorded"
#: Rows shown even when both sides agree (the rest only when they differ).
ALWAYS = ("design", "fecbench", "kernel", "link backend", "machine")
#: Rows shown, never counted as a change.
NOT_A_CHANGE = ("recorded",)


@dataclass(frozen=True)
class Row:
    """One line of the side-by-side table."""

    name: str
    a: str
    b: str

    @property
    def differs(self) -> bool:
        return self.a != self.b and self.name not in NOT_A_CHANGE

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "a": self.a, "b": self.b, "differs": self.differs}


def campaign_json(text: object) -> dict[str, Any]:
    """A campaign's recorded JSON object (``host_json``, ``impls_json``): {} when absent, unreadable or not an object
    (a database of an older schema, or one a user edited), so that reading an old campaign never fails on it."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _joined(values: Iterable[object]) -> str:
    """The distinct values in order of appearance, ' | ' between them; NOT_RECORDED for none."""
    seen = list(dict.fromkeys(str(v) for v in values if v not in (None, "") and str(v) != "nan"))
    return " | ".join(seen) if seen else NOT_RECORDED


def _short(sha: object) -> str:
    return str(sha)[:12] if sha else "?"


def _impl_rows(impls: list[dict[str, Any]]) -> dict[str, str]:
    """Per implementation name: its version, the builds of its binaries and its descriptor, over its labels."""
    by_name: dict[str, list[str]] = {}
    for entry in impls:
        name = str(entry.get("name") or "?")
        version = entry.get("version") or "version not recorded"
        binaries = entry.get("binaries") or {}
        builds = ", ".join(f"{b} {_short((info or {}).get('sha256'))}" if len(binaries) > 1
                           else _short((info or {}).get("sha256")) for b, info in sorted(binaries.items()))
        descriptor = entry.get("descriptor")
        text = f"{version}; build {builds or NOT_RECORDED}"
        if isinstance(descriptor, str):
            text += f"; descriptor {hashlib.sha256(descriptor.encode()).hexdigest()[:12]}"
        by_name.setdefault(name, []).append(text)
    return {f"impl {name}": _joined(texts) for name, texts in sorted(by_name.items())}


def _machine(host: dict[str, Any]) -> str:
    if not host:
        return NOT_RECORDED
    parts = [str(host[k]) for k in ("machine", "cpu") if host.get(k)]
    if host.get("cpus"):
        parts.append(f"{host['cpus']} CPUs")
    return f"{host.get('hostname', '?')}: {', '.join(parts)}" if parts else str(host.get("hostname", "?"))


#: What makes two campaigns' machines one for a baseline: its kind (architecture, CPU model and count, memory in
#: GiB) and its kernel. Not the hostname: a container's is new on every run.
MACHINE_KEYS = ("machine", "cpu", "cpus", "mem_kib", "kernel", "kernel_version")


def machines(db: results.DbLike) -> set[tuple[str, ...]]:
    """The machines (``MACHINE_KEYS``) the database's campaigns ran on."""
    hosts = [campaign_json(camp.get("host_json")) for camp in results.campaigns(db).to_dict("records")]
    # Memory in whole GiB: MemTotal moves by a few KiB with what the kernel reserves at boot.
    return {tuple(str(round(host["mem_kib"] / 2**20) if k == "mem_kib" and host.get(k) else host.get(k))
                  for k in MACHINE_KEYS) for host in hosts}


def other_machine(a: results.DbLike, b: results.DbLike) -> str | None:
    """How B's machines differ from A's (``MACHINE_KEYS``), or None when every campaign of both ran on one."""
    ma, mb = machines(a), machines(b)
    if len(ma) == 1 and ma == mb:
        return None
    differs = [key for i, key in enumerate(MACHINE_KEYS) if {m[i] for m in ma} != {m[i] for m in mb}]
    return ", ".join(differs) or "more than one machine on a side"


def provenance(db: results.DbLike) -> dict[str, str]:
    """The database's provenance rows (name -> value), read from its campaigns table."""
    campaigns = results.campaigns(db)
    rows: dict[str, list[str]] = {}

    def add(name: str, value: object) -> None:
        rows.setdefault(name, []).append("" if value is None else str(value))

    for camp in campaigns.to_dict("records"):
        host = campaign_json(camp.get("host_json"))
        add("design", f"{camp.get('name')} (design {_short(camp.get('design_hash'))}, seed {camp.get('seed')}, "
                      f"{camp.get('repetitions')} repetitions)")
        add("fecbench", f"{camp.get('fecbench_version')} ({camp.get('git_sha')})")
        for name, text in _impl_rows(list(campaign_json(camp.get("impls_json")).values())).items():
            add(name, text)
        add("kernel", " ".join(str(host[k]) for k in ("kernel", "kernel_version") if host.get(k)))
        add("link backend", camp.get("link_backend"))
        add("machine", _machine(host))
        if host.get("hosts"):
            add("hosts", ", ".join(sorted(host["hosts"])))
        add("python", host.get("python"))
        for tool, version in sorted((host.get("tools") or {}).items()):
            add(f"tool {tool}", version)
        add("recorded", camp.get("created_at"))
    out = {name: _joined(values) for name, values in rows.items()}
    for name in ALWAYS:
        out.setdefault(name, NOT_RECORDED)
    return out


def side_by_side(a: dict[str, str], b: dict[str, str]) -> list[Row]:
    """The rows of both sides (an implementation or tool only one side recorded included), in the order above:
    the ALWAYS rows, the implementations, hosts, then the rest where they differ, and the recording time."""
    names = list(dict.fromkeys([*a, *b]))
    first = [n for n in ALWAYS[:2]] + sorted(n for n in names if n.startswith("impl ")) + list(ALWAYS[2:])
    rest = [n for n in names if n not in first and n not in NOT_A_CHANGE]
    out = [Row(n, a.get(n, NOT_RECORDED), b.get(n, NOT_RECORDED)) for n in [*first, *rest, *NOT_A_CHANGE]
           if n in first or n in NOT_A_CHANGE or a.get(n, NOT_RECORDED) != b.get(n, NOT_RECORDED)]
    return out


def changed(rows: list[Row]) -> list[str]:
    """The names of the rows that differ (the first line of the comparison)."""
    return [row.name for row in rows if row.differs]


def text(rows: list[Row], width: int = 44) -> list[str]:
    """The table as lines: '≠' marks a row that differs; a long value is cut at `width` characters."""
    names = changed(rows)
    lines = ["what changed: " + (", ".join(names) if names else "nothing recorded (same software, kernel, "
                                                               "link backend and machine)")]
    name_width = max((len(r.name) for r in rows), default=0)

    def cut(value: str) -> str:
        return value if len(value) <= width else value[:width - 1] + "…"

    lines.append(f"  {'':{name_width}}  {'A':{width}}  B")
    for row in rows:
        mark = "≠" if row.differs else " "
        lines.append(f"{mark} {row.name:{name_width}}  {cut(row.a):{width}}  {cut(row.b)}")
    return lines
