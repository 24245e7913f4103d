"""A trace link's capacity over a run, beside the run's sending rate (`fecbench explain`; issue 71 item 5).

A run records which trace each trace link replayed and when the trace started (link_stats' delay_json:
`fecbench.inputs.traces.trace_used`); the run's sender's qlog says when its time 0 was on the same wall clock.
The capacity per bin is then the trace's opportunities in that bin (1,504 bytes each), from where the trace was
when the sender started.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from fecbench.analysis import results, tables
from fecbench.analysis.results import DbLike
from fecbench.inputs.errors import UserError
from fecbench.inputs.traces import load_trace

COLUMNS = ["t_s", "path", "mbit_s", "link"]


def link_capacity(db: DbLike, key: str, direction: str, origin_abs_s: float, bin_s: float,
                  length_s: float) -> tuple[pd.DataFrame, list[str]]:
    """Per trace link in `direction` of run `key`: its capacity (Mbit/s) per bin of `bin_s` from the sender's
    t_s = 0 (`origin_abs_s`, wall clock) for `length_s`; and notes: what could not be drawn, and how often the link
    idled during the run (`idle_note`)."""
    stats = results.frame(db, "link_stats", ["link", "direction", "model", "delay_json"], where={"run_key": key})
    frames, notes = [], []
    stats = stats[stats["direction"] == direction]
    for link, model, text in zip(stats["link"], stats["model"], stats["delay_json"], strict=True):
        used = (json.loads(text) if text else {}).get("trace")
        if not used:
            continue
        if not isinstance(used.get("started_unix_s"), (int, float)) or math.isnan(origin_abs_s):
            notes.append(f"link {link}: no wall-clock start recorded, its trace's capacity is not drawn")
            continue
        try:
            trace = load_trace(used["path"])
        except UserError as exc:
            notes.append(f"link {link}: {exc}")
            continue
        if trace.sha256 != used.get("sha256"):
            notes.append(f"link {link}: {Path(used['path']).name} changed since the run (sha256 differs): not drawn")
            continue
        bin_ms = bin_s * 1000
        start_ms = (origin_abs_s - used["started_unix_s"]) * 1000 + float(used.get("offset_ms") or 0)
        mbit = trace.capacity_mbit(bin_ms, max(0.0, start_ms), max(bin_ms, length_s * 1000))
        path = tables.link_path(model)
        frames.append(pd.DataFrame({"t_s": [(i + 0.5) * bin_ms / 1000 for i in range(len(mbit))],
                                    "path": 0.0 if math.isnan(path) else path, "mbit_s": mbit, "link": link}))
        notes += idle_note(link, used, start_ms - float(used.get("offset_ms") or 0), length_s * 1000)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)), notes


def idle_note(link: str, used: dict, from_ms: float, length_ms: float) -> list[str]:
    """How many of the delay element's idle bins (`idle_bin_ms`, from the trace's start) within the run's span
    saw opportunities go by unused: there the sender, not the link, set the pace. Nothing where not recorded."""
    idle, bin_ms = used.get("idle"), used.get("idle_bin_ms")
    if not idle or not bin_ms:
        return []
    first, last = max(0, int(from_ms // bin_ms)), min(len(idle), math.ceil((from_ms + length_ms) / bin_ms))
    span = idle[first:last]
    return [f"trace link {link}: idle (opportunities unused) in {sum(1 for n in span if n)} of {len(span)} "
            f"{bin_ms} ms intervals of the run: there the sender, not the link, set the pace"] if span else []
