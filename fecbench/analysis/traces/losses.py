"""Losses by cause: what dropped each run's packets, per link (so per path) and direction, beside what the
stack itself declared lost.

- ``link_losses(db)``: per run, link and direction: the loss model's drops (the dropper, without a link
  schedule's outages), the outages' drops, the bottleneck's queue drops (the shaper's qdiscs and the delay
  element's queue), and the packets the dropper saw;
- ``run_losses(db)``: per run: those summed over links, per direction (``forward``: client to server), the
  packets the data sender declared lost, its spurious losses (declared lost, then acknowledged) where its
  stack reports them, and what FEC recovered; then, for downloads and uploads, the drops in the data's
  direction reconciled with what the sender declared, each part named:

      data_drops = (declared_lost − spurious) + rebuilt + undeclared − unexplained

  ``rebuilt``: drops FEC rebuilt before the sender declared them (at most its recoveries); ``undeclared``:
  the other drops it never declared (a lost repair, an ACK-only packet, one carrying nothing to send again);
  ``unexplained`` (≥ 0): declared losses no drop explains (a question for the run's qlog: ``fecbench explain``).
  None of them where a count is missing (a stack that reports no losses).
"""

from __future__ import annotations

import json

import pandas as pd

from fecbench.analysis import results, tables
from fecbench.analysis.results import DbLike

LINK_COLUMNS = ["run_key", "link", "direction", "dropper", "outage", "queue", "seen"]
RUN_COLUMNS = ["run_key", "dropper_forward", "dropper_reverse", "outage_forward", "outage_reverse",
               "queue_forward", "queue_reverse", "declared_lost", "spurious", "recovered", "data_drops", "rebuilt",
               "undeclared", "unexplained"]


def link_losses(db: DbLike) -> pd.DataFrame:
    """Per run, link and direction: drops by the loss model, by outages, by the queue; packets seen."""
    # outage_dropped: schema version 3 on
    outage = ["outage_dropped"] if "outage_dropped" in results.table_columns(db, "link_stats") else []
    rows = results.rows(db, "link_stats", ["run_key", "link", "direction", "dropped", *outage, "seen", "delay_json"],
                        order_by=["run_key", "link", "direction"])
    records = []
    for row in rows:
        key, link, direction, dropped, *rest = row
        outages, seen, delay_json = (rest if outage else [None, *rest])
        outages = int(outages or 0)
        records.append({"run_key": key, "link": link, "direction": direction,
                        "dropper": None if dropped is None else int(dropped) - outages, "outage": outages,
                        "queue": tables.queue_drops(delay_json, direction), "seen": seen})
    return pd.DataFrame(records, columns=LINK_COLUMNS)


def _sender(metrics: dict) -> dict:
    """The data sender's block of a metrics JSON (fecq: `sender`), else the top level."""
    return metrics.get("sender") or metrics


def reconcile(drops: int, declared: int, spurious: int, recovered: object) -> dict[str, int]:
    """The data direction's drops against the sender's declared losses (see above): each part ≥ 0."""
    really = max(0, declared - spurious)
    surplus = max(0, drops - really)          # drops the sender never declared
    rebuilt = min(surplus, int(recovered)) if isinstance(recovered, (int, float)) else 0
    return {"data_drops": drops, "rebuilt": rebuilt, "undeclared": surplus - rebuilt,
            "unexplained": max(0, really - drops)}


def run_losses(db: DbLike) -> pd.DataFrame:
    """Per run: drops by cause and direction, the sender's declared and spurious losses, FEC's recoveries."""
    links = link_losses(db)
    rows = results.run_metrics_json(db, exclude_status=("pending", "running", "interrupted"))
    sums = links.groupby(["run_key", "direction"])[["dropper", "outage", "queue"]].sum() if len(links) else None
    records = []
    for key, workload, text in rows:
        metrics = json.loads(text) if text else {}
        sender = _sender(metrics)
        record = {"run_key": key}
        for direction in ("forward", "reverse"):
            for cause in ("dropper", "outage", "queue"):
                value = None
                if sums is not None and (key, direction) in sums.index:
                    value = int(sums.loc[(key, direction), cause])
                record[f"{cause}_{direction}"] = value
        record["declared_lost"] = sender.get("lost", metrics.get("lost"))
        record["spurious"] = sender.get("spurious_lost", metrics.get("spurious_lost"))
        record["recovered"] = metrics.get("recovered")
        data_direction = {"download": "reverse", "upload": "forward"}.get(workload or "")
        drops = [record.get(f"{cause}_{data_direction}") for cause in ("dropper", "outage", "queue")]
        lost = record["declared_lost"]
        if data_direction and isinstance(lost, (int, float)) and all(d is not None for d in drops):
            record.update(reconcile(sum(drops), int(lost), int(record["spurious"] or 0), record["recovered"]))
        else:
            record.update(data_drops=None, rebuilt=None, undeclared=None, unexplained=None)
        records.append(record)
    return pd.DataFrame(records, columns=RUN_COLUMNS)
