"""What each run got, as recorded with it (runs.applied_json, written at planning time by
``fecbench.runners.experiment.applied``): per point, every shaped link's rate, one-way delay and queue per direction,
the loss model on each lossy link with its long-run loss and mean burst, the workload; per label, the
implementation's arguments and argv. Campaigns recorded before schema version 7 have none (empty frames)."""

from __future__ import annotations

import json

import pandas as pd

from fecbench.analysis import results
from fecbench.analysis.results import DbLike

LINK_COLUMNS = ["point", "link", "direction", "rate_mbit", "burst_bytes", "owd_ms", "queue", "queue_unit"]
LOSS_COLUMNS = ["point", "link", "model", "params", "long_run_loss", "mean_burst", "directions"]
IMPL_COLUMNS = ["label", "impl", "args", "server argv", "client argv"]


def _applied(db: DbLike) -> list[tuple[str, dict]]:
    if "applied_json" not in results.table_columns(db, "runs"):   # schema version 7 on
        return []
    rows = results.rows(db, "runs", ["label", "applied_json"], not_null=["applied_json"],
                        order_by=["point", "label", "size", "repetition"])
    return [(label, json.loads(text)) for label, text in rows]


def _per_point(db: DbLike) -> list[dict]:
    """One run's applied settings per point (what the network applies is the same for all its runs)."""
    first: dict[int, dict] = {}
    for _, applied in _applied(db):
        first.setdefault(applied["point"], applied)
    return list(first.values())


def links(db: DbLike) -> pd.DataFrame:
    """Per point, link and direction: rate (Mbit/s; empty: unlimited), the rate limiter's burst (bytes), one-way
    delay (ms), queue (its limit, in queue_unit: packets or bytes). Campaigns recorded before the queue was
    counted as written had every queue in packets and the rate limiter's burst unrecorded."""
    records = []
    for applied in _per_point(db):
        for link, pair in applied["links"].items():
            for direction, s in pair.items():
                if "queue_packets" in s:
                    s = {**{k: v for k, v in s.items() if k != "queue_packets"},
                         "queue": s["queue_packets"], "queue_unit": "packets"}
                records.append({"point": applied["point"], "link": link, "direction": direction, **s})
    return pd.DataFrame(records, columns=LINK_COLUMNS)


def losses(db: DbLike) -> pd.DataFrame:
    """Per point and lossy link: the loss model, its parameters, long-run loss and mean burst (packets)."""
    records = []
    for applied in _per_point(db):
        loss = applied["loss"]
        for link, model in loss["links"].items():
            records.append({"point": applied["point"], "link": link, "model": loss["model"],
                            "params": ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                                                for k, v in model["params"].items()),
                            "long_run_loss": model["long_run_loss"], "mean_burst": model["mean_burst"],
                            "directions": ", ".join(loss["directions"])})
    return pd.DataFrame(records, columns=LOSS_COLUMNS)


def implementations(db: DbLike) -> pd.DataFrame:
    """Per label: the implementation, its arguments and its first run's argv (the run folder shown as such)."""
    records = {}
    for label, applied in _applied(db):
        if label in records:
            continue
        impl = applied["impl"]
        argv = impl.get("argv") or {}
        records[label] = {"label": label, "impl": impl["name"],
                          "args": " ".join(f"{k}={v}" for k, v in sorted(impl["args"].items())),
                          "server argv": " ".join(argv.get("server", [])),
                          "client argv": " ".join(argv.get("client", []))}
    return pd.DataFrame(list(records.values()), columns=IMPL_COLUMNS)
