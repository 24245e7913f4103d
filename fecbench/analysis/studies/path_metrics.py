"""Per-path metrics as the endpoints saw them: one row per run, path and side from the ``paths``
list of a multipath client's metrics JSON (schema: quic-impls/fecq/README.md, "Multipath keys").

``results.path_traffic`` counts packets at the droppers (the network's view); this module reads
what each QUIC endpoint counted on each path: packets and bytes sent and received, repairs sent,
losses QUIC declared, datagrams FEC recovered, congestion events, window and RTT. The two views
answer different questions (where did the scheduler put the data; what did each path cost and
recover) and are joinable on ``key`` and ``path``. Each row also carries what the path's links dropped of
what that side sent (``path_dropped``: the loss model's, ``path_queue_dropped``: the bottleneck queue's,
from ``tables.path_traffic``), beside the losses the side's QUIC declared there (``lost``): a loss-free
path's declared losses are its queue's drops (issue 49: 78-113 on path 2, no loss model there).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pandas as pd

from fecbench.analysis import results, tables

#: The counters each side reports per path (fecq's names; a missing one is NaN).
COUNTERS = ["packets_sent", "bytes_sent", "repair_sent", "packets_received", "bytes_received",
            "recovered", "fec_ignored", "quic_packets_sent", "lost", "lost_bytes",
            "congestion_events", "cwnd", "rtt_ms"]
SIDES = ("client", "server")
#: Columns describing the path itself, before the counters.
PATH_COLUMNS = ["path", "side", "client_address", "server_address", "local", "remote", "quic_path_id"]


def _rows(run_key: str, text: str | None) -> Iterator[dict]:
    """The rows of one run's metrics JSON: nothing when it has no ``paths`` list (single path)."""
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        return
    paths = doc.get("paths") if isinstance(doc, dict) else None
    for entry in paths if isinstance(paths, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), int):
            continue
        for side in SIDES:
            view = entry.get(side)
            if not isinstance(view, dict):
                continue  # this side never saw the path
            row = {"run_key": run_key, "path": entry["path"], "side": side,
                   "client_address": entry.get("client_address"), "server_address": entry.get("server_address"),
                   "local": view.get("local"), "remote": view.get("remote"),
                   "quic_path_id": view.get("quic_path_id")}
            row.update({c: view.get(c) for c in COUNTERS})
            yield row


def path_metrics(db: results.DbLike) -> pd.DataFrame:
    """One row per run, path and side (``client``/``server``) with the run's columns and factors (as
    in ``results.load``), the path's addresses, the counters in ``COUNTERS``, and ``share_sent``:
    the path's part of the datagrams that side sent in the run (how the scheduler spread them).
    Empty (with those columns) when no run recorded per-path metrics."""
    rows = [row for key, text in results.rows(db, "metrics", ["run_key", "json"]) for row in _rows(key, text)]
    columns = [*PATH_COLUMNS, *COUNTERS, "share_sent", "path_dropped", "path_queue_dropped"]
    # The run-wide totals of the same names (``results.load``) give way to the per-path counters.
    runs = results.load(db)
    runs = runs.drop(columns=[c for c in columns if c in runs.columns])
    if not rows:
        out = runs.iloc[0:0].assign(**{c: pd.Series(dtype=float) for c in columns})
        out.attrs.update(runs.attrs)
        return out
    per_path = pd.DataFrame(rows)
    for column in COUNTERS:
        per_path[column] = pd.to_numeric(per_path[column], errors="coerce").astype(float)
    per_path["quic_path_id"] = pd.to_numeric(per_path["quic_path_id"], errors="coerce").astype("Int64")
    sent = per_path.groupby(["run_key", "side"])["packets_sent"].transform("sum")
    per_path["share_sent"] = (per_path["packets_sent"] / sent.where(sent > 0)).astype(float)
    # What each path's links dropped in the direction this side sends (the server sends down).
    traffic = tables.path_traffic(db)
    drops = {(k, int(p)): r for k, p, r in zip(traffic.get("key", []), traffic.get("path", []),
                                               traffic.to_dict("records"), strict=True)}
    for name, column in (("path_dropped", "dropped"), ("path_queue_dropped", "queue_dropped")):
        per_path[name] = [float(drops[(k, p)][f"{column}_{'down' if side == 'server' else 'up'}"])
                          if (k, p) in drops else float("nan")
                          for k, p, side in zip(per_path["run_key"], per_path["path"], per_path["side"], strict=True)]
    out = runs.merge(per_path, left_on="key", right_on="run_key", how="inner").drop(columns="run_key")
    out = out.sort_values(["campaign_id", "point", "label", "size", "repetition", "path", "side"],
                          kind="stable").reset_index(drop=True)
    out.attrs.update(runs.attrs)
    return out


def as_traffic(frame: pd.DataFrame) -> pd.DataFrame:
    """A ``path_metrics`` frame in the shape of ``results.path_traffic`` (one row per run and path;
    ``packets_down``/``share_down`` from the server's sends, ``packets_up``/``share_up`` from the
    client's), so the same figures draw the endpoints' view where no dropper counted per path."""
    if frame.empty:
        return frame.assign(packets_down=pd.Series(dtype=float), packets_up=pd.Series(dtype=float),
                            share_down=pd.Series(dtype=float), share_up=pd.Series(dtype=float))
    run_columns = [c for c in frame.columns
                   if c not in (*PATH_COLUMNS, *COUNTERS, "share_sent", "path_dropped", "path_queue_dropped")]
    by_side = {side: frame[frame["side"] == side].set_index(["key", "path"])
               for side in SIDES}
    base = frame.drop_duplicates(["key", "path"])[[*run_columns, "path"]].set_index(["key", "path"], drop=False)
    for side, direction in (("server", "down"), ("client", "up")):
        base[f"packets_{direction}"] = by_side[side]["packets_sent"].reindex(base.index)
        base[f"share_{direction}"] = by_side[side]["share_sent"].reindex(base.index)
    out = base.reset_index(drop=True)
    out.attrs.update(frame.attrs)
    return out
