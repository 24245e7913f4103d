"""``fecbench explain DB RUN_KEY [-o DIR] [--pair]``: one run's timeline (PNG) and its numbers (text).

``explain(db, key, output, pair)`` writes ``<run key[:12]>-timeline.png`` (``-pair.png`` with its twin without
FEC beside it: ``timeline.twin``) and ``<run key[:12]>-summary.txt`` into ``output`` (default
``<db stem>-explain/`` beside the database) and returns the paths and the text. A run without kept qlog is a
``timeline.NoQlog`` (exit 2) saying how to keep them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fecbench.analysis.figures import run_timeline, save
from fecbench.analysis.traces import timeline
from fecbench.inputs.errors import UserError


@dataclass
class Written:
    figure: Path
    summary: Path
    text: str


def _number(value: Any, unit: str = "", scale: float = 1.0, digits: int = 4) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "not recorded"
    return "not recorded" if math.isnan(number) else f"{number * scale:.{digits}g}{unit}"


def _by_cause(causes: dict[str, Any]) -> str:
    """Drops by cause and direction, as far as the database recorded them."""
    parts = []
    for cause, name in (("dropper", "loss model"), ("outage", "outages"), ("queue", "queue")):
        counts = [f"{_number(causes[f'{cause}_{d}'])} {arrow}" for d, arrow in (("reverse", "server → client"),
                                                                        ("forward", "client → server"))
                  if _number(causes.get(f"{cause}_{d}")) != "not recorded"]
        parts.append(f"{name}: {', '.join(counts) if counts else 'not recorded'}")
    return "; ".join(parts)


def describe(item: timeline.Timeline) -> str:
    """The run's numbers as text, one per line."""
    s = item.summary
    causes = s["causes"]
    lines = [f"run {s['key']}: {s['label']} ({s['impl']}), size {s['size']}, status {s['status']}",
             f"  DCT: {_number(s['dct_ms'], ' ms')}",
             f"  drops by cause: {_by_cause(causes)}",
             f"  dropper drops placed in time on the {item.sender}'s packets: {s['dropper_drops_placed']}"
             + (f" ({s['drops_declared']} then declared lost, {s['drops_not_declared']} never; "
                f"{s['declared_without_drop']} packets declared lost that no dropper drop took)"
                if "drops_declared" in s else "")
             + (f"; on its FEC repairs: {s['repair_drops_placed']}" if s.get("repair_drops_placed") else ""),
             f"  declared lost by the {item.sender}: {s['declared_lost']} in its qlog (metrics: "
             f"{_number(s['sender_lost_metrics'])}, spurious: {_number(s['spurious'])}, no drop explains: "
             f"{_number(causes.get('unexplained'))})",
             f"  repairs sent: {s['repairs_sent']} in qlog (metrics: {_number(s['repairs_metrics'])}); "
             + (f"at the receiver: sources rebuilt {s['recovered_receiver']} (metrics, both ends: "
                f"{_number(s['recovered_metrics'])}), recoveries signalled {s['signalled_receiver']}, blocks "
                f"abandoned {s['abandoned_receiver']}; rebuilt after the {item.sender} had declared them lost: "
                f"{s['rebuilt_after_declared']} of {s['rebuilt']} (median {_number(s['rebuilt_lead_ms'], ' ms')} "
                "earlier: a retransmission and a congestion response for a packet that arrived); declared lost only "
                f"after FEC had rebuilt them: {s.get('declared_after_rebuilt', 0)} (the receiver acknowledged past "
                "the gap before the repair came)"
                if "recovered_receiver" in s else
                f"sources recovered: {s['recovered']} (metrics: {_number(s['recovered_metrics'])}); "
                f"recoveries signalled: {s['signalled']}; blocks abandoned: {s['abandoned']}"),
             f"  packets sent ({item.sender}): {s['packets_sent']}; max cwnd: {_number(s['max_cwnd'], ' kB', 1e-3)}; "
             f"smoothed RTT min {_number(s['min_srtt_ms'], ' ms')}, median {_number(s['median_srtt_ms'], ' ms')}",
             f"  from {s['qlog']} ({s['vantage']})"]
    for link, cap in item.capacity.groupby("link"):   # a trace link: what it could carry beside what was sent
        sent = item.rate[item.rate["t_s"] <= float(cap["t_s"].max())]["mbit_s"]
        lines.insert(-1, f"  trace link {link}: capacity {cap['mbit_s'].mean():.3g} Mbit/s on average over the run "
                         f"(bins {cap['mbit_s'].min():.3g}–{cap['mbit_s'].max():.3g}), sent "
                         f"{_number(sent.mean() if len(sent) else math.nan, ' Mbit/s')}")
    return "\n".join(lines + [f"  note: {note}" for note in item.notes])


def explain(db: Path, key: str, output: Path | None = None, *, pair: bool = False) -> Written:
    db = Path(db)
    if not db.is_file():
        raise UserError(f"{db}: no such results database")
    run = timeline.find_run(db, key)
    items = [timeline.build(db, run)]
    if pair:
        other = timeline.build(db, timeline.twin(db, run))
        items = [items[0], other] if items[0].summary["label"] != other.summary["label"] else items
    output = output if output is not None else db.resolve().parent / f"{db.stem}-explain"
    stem = str(run["key"])[:12]
    figure = save(run_timeline(items), output / f"{stem}-{'pair' if pair else 'timeline'}.png")
    text = "\n\n".join(describe(item) for item in items)
    summary = output / f"{stem}-summary.txt"
    summary.write_text(text + "\n")
    return Written(figure, summary, text)


def representatives(db: Path) -> list[dict[str, Any]]:
    """Per label, among its runs that kept qlog and count (not flagged `fidelity`, interrupted or pending: those
    are no outcome of the label): the median run (by DCT, the lower median) and the worst (a run that failed or
    timed out first, else the longest DCT); one entry each (label, which, key, dct_ms, status), a run both
    median and worst once, as ``median and worst``. For ``fecbench report``'s links."""
    from fecbench.analysis import results

    runs = results.load(db)
    kept = [key for key in runs["key"] if timeline.has_qlog(db, str(key))]
    out: list[dict[str, Any]] = []
    for label, group in runs[runs["key"].isin(kept)].groupby("label", sort=True):
        done = group[(group["status"] == "ok") & group["dct_ms"].notna()].sort_values("dct_ms", kind="stable")
        failed = group[group["status"].isin(["failed", "timeout", "unsupported"])]
        chosen: dict[str, str] = {}
        if len(done):
            chosen[str(done.iloc[(len(done) - 1) // 2]["key"])] = "median"
        worst = failed.iloc[0] if len(failed) else done.iloc[-1] if len(done) else None
        if worst is not None:
            key = str(worst["key"])
            chosen[key] = "median and worst" if key in chosen else "worst"
        for key, which in chosen.items():
            row = group[group["key"] == key].iloc[0]
            out.append({"label": label, "which": which, "key": key, "dct_ms": row["dct_ms"], "status": row["status"]})
    return out
