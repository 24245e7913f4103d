"""Loss classes over data packets: a run classed by the datagrams that carried its application data.

``studies.loss_position`` classes a run over every packet its dropper matched: handshake, ACK-only packets, the
stats exchange after a download, the close, FEC repairs. The seed papers class a transfer by its lost *data*
packets (a 1 kB download sends 8–12 server → client datagrams, one of which carries the response: a run whose
only drop was an ACK-only packet lost no data). This module decides the same classes (``no loss``, ``loss``,
``tail loss``: a drop among the last ``k``) over the data datagrams alone, from the run's own records.

What decides a class, per run and direction (each classed by its own sender's data: a download's forward
direction carries its request, an upload's reverse its reply; ``any`` is the worse of the directions whose dropper
kept a log):

1. the dropper's verdict log of each lossy link in that direction (table ``verdict_logs``, in index order);
2. each record paired with the data sender's datagram it was (the sender: the server for reverse, the client for
   forward; ``wire.walk`` over the sender's qlog, as ``timeline.dropper_marks`` places drops: packets coalesced
   by the recorded length, fecq's repairs below QUIC as datagrams of their own; on a multipath run, the
   link's path's packets, ``wire.link_events``). A sender whose packets list no frames but which logs its
   datagrams (fecq single path, quinn-proto 0.11: its ``fecq:datagram_sent``, each with ``app_data``, and
   its ``fecq:repair_sent``) is matched on those instead, record n to its n-th datagram (``wire.walk_logged``);
3. the records whose datagram carried the transfer's data kept (qlog column ``app_data``: a STREAM frame, or a
   DATAGRAM frame; fecq's datagram events: its last packet does, or holds a frame fecq does not know); an FEC
   repair below QUIC, a datagram of handshake (CRYPTO), ACK, PING, PADDING, flow control, connection-id
   or close frames only, or one sent after the sender marked its transfer over (fecq's ``transfer_over``: the
   ``stats`` request and reply are stream data too), is no data;
4. ``loss_position.classify`` over the records kept, in the dropper's order (``k`` counts data datagrams).
   Several lossy links in one direction: the worst class, each link judged on its own datagrams.

A run is **not classed** (class None, ``how`` says why) rather than guessed when: it kept no verdict log in
that direction; it kept no qlog (``timeline.qlog_files``), or none of the data sender; the sender's qlog lists
no frames and no datagrams (quinn-proto 0.11 logs packets without frames: fecq before its ``datagram_sent``),
or lists none for a packet of a datagram that carried no known data; the match failed (a record whose length
is not that of the datagram the walk paired it with, or past the sender's last: a datagram the qlog does not
log, such as rQUIC's coded packets, one fecq dropped before the wire, or a qlog cut short; records past the
sender's last datagram are no failure when that datagram came after its transfer-over mark: an ICMP error after
the close, say); a multipath link's path is not named in the qlog. ``how`` is ``DATA_QLOG`` for a classed one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fecbench.analysis import results
from fecbench.analysis.results import DbLike
from fecbench.analysis.studies import loss_position
from fecbench.analysis.traces import qlog, timeline, wire
from fecbench.inputs.directions import CLASS_DIRECTIONS, SENDER_DIRECTION

#: How a classed direction was decided.
DATA_QLOG = "data packets (qlog)"
NOT_CLASSED = "not classed"
#: Why a direction is not classed when its dropper kept no log (nothing lossy there, or no verdict_log).
NO_LOG = "no verdict log in this direction"
#: The side whose packets a dropper direction carries.
SENDER_OF = {direction: side for side, direction in SENDER_DIRECTION.items()}
FIELDS = ("class", "packets", "drops", "tail_drops", "how")


def not_classed(why: str) -> dict[str, Any]:
    """A direction that cannot be classed by its data datagrams, and why."""
    return {"class": None, "packets": math.nan, "drops": math.nan, "tail_drops": math.nan,
            "how": f"{NOT_CLASSED}: {why}"}


def transfer_end(events: pd.DataFrame) -> float:
    """When the sender marked its transfer over (fecq's ``transfer_over``: its ``stats`` exchange begins), NaN
    when it did not."""
    marks = events.loc[events["kind"] == "transfer_over", "t_s"]
    return float(marks.min()) if len(marks) else math.nan


def data_mask(events: pd.DataFrame, records: np.ndarray) -> tuple[np.ndarray | None, str]:
    """Per dropper record (in the order given), whether the datagram it was carried the transfer's data; None and
    why when the qlog cannot say (it lists no frames nor datagrams, or the records do not match its
    datagrams). Packets that list no frames: the sender's own datagram events, where it logs them. A datagram
    sent after the sender marked its transfer over (``transfer_end``) carries none: the ``stats`` exchange is
    stream data, not the transfer's; records past the sender's last datagram are then the exchange's end too
    (an ICMP error after the close, say), whether dropped or not."""
    lengths = np.asarray(records["len"], dtype=float)
    app_data = events.loc[events["kind"] == "sent", "app_data"].to_numpy(dtype=float)
    if (not len(app_data) or np.isnan(app_data).all()) and (events["kind"] == "datagram").any():
        app_data = events.loc[events["kind"].isin(wire.LOGGED), "app_data"].to_numpy(dtype=float)
        walked = wire.walk_logged(events, lengths)
    elif len(app_data) and np.isnan(app_data).all():
        return None, "the stack's qlog lists no frames"
    else:
        walked = wire.walk(events, lengths)
    over = transfer_end(events)
    trailing = _trailing_after(walked, over)
    unmatched = sum(not datagram.matched for datagram in walked[:len(walked) - trailing])
    if unmatched:
        return None, (f"the match failed ({unmatched} of {len(walked)} dropper records are not the length of the "
                      "sender's datagram they were paired with)")
    mask = []
    for datagram in walked[:len(walked) - trailing]:
        flags = app_data[datagram.start:datagram.end]
        if datagram.repair or datagram.t_s >= over:
            mask.append(False)             # an FEC layer's repair below QUIC, or the stats exchange: no transfer data
        elif (flags == 1).any():
            mask.append(True)
        elif np.isnan(flags).any():
            return None, "the stack's qlog lists no frames for some of its packets"
        else:
            mask.append(False)
    return np.array(mask + [False] * trailing, dtype=bool), ""


def _trailing_after(walked: list[wire.WireDatagram], over: float) -> int:
    """How many records at the end lie past the sender's last datagram, when that datagram was sent after the
    transfer's end (0 otherwise: then they are datagrams its qlog did not log, and the match failed)."""
    n = len(walked)
    while n and walked[n - 1].start < 0:
        n -= 1
    return len(walked) - n if n and walked[n - 1].t_s >= over else 0


def classify_link(events: pd.DataFrame, records: np.ndarray, k: int = loss_position.DEFAULT_K) -> dict[str, Any]:
    """One link's verdict log classed by its data datagrams (``events``: the sender's qlog events it saw)."""
    records = records[np.argsort(records["index"], kind="stable")]
    mask, why = data_mask(events, records)
    if mask is None:
        return not_classed(why)
    return {**loss_position.summarise(records[mask], k), "how": DATA_QLOG}


def classify_direction(events: pd.DataFrame | None, records: list[tuple[str, int, np.ndarray]],
                       k: int = loss_position.DEFAULT_K) -> dict[str, Any]:
    """One direction of a run classed by its data datagrams: ``events`` the sender's qlog events (None: no qlog
    of the sender), ``records`` (link, its path, its verdict log) per lossy link in that direction."""
    if not records:
        return not_classed(NO_LOG)
    if events is None:
        return not_classed("no qlog of the data sender")
    judged = []
    for link, path, log in records:
        mine = wire.link_events(events, path, len(records))
        if mine is None:
            return not_classed(f"link {link}: the qlog names no path {path}")
        item = classify_link(mine, log, k)
        if item["class"] is None:
            return {**item, "how": item["how"] + (f" (link {link})" if len(records) > 1 else "")}
        judged.append(item)
    return {"class": loss_position.worst(item["class"] for item in judged),
            **{f: sum(int(item[f]) for item in judged) for f in ("packets", "drops", "tail_drops")}, "how": DATA_QLOG}


def classify_run(db: DbLike, run: dict[str, Any], logs: pd.DataFrame | None = None,
                 k: int = loss_position.DEFAULT_K) -> list[dict[str, Any]]:
    """The run (a row of ``results.load``) classed by its data datagrams: one row per data direction (run_key,
    direction and ``FIELDS``). ``logs``: ``loss_position.verdict_logs(db)``, read here when not given."""
    key = str(run["key"])
    logs = loss_position.verdict_logs(db) if logs is None else logs
    mine = logs[logs["run_key"] == key]
    directions = ("forward", "reverse")
    try:
        traces, _ = qlog.read_all(timeline.qlog_files(db, key))
    except timeline.NoQlog:
        return [{"run_key": key, "direction": d, **not_classed("no qlog kept")} for d in directions]
    paths = timeline.link_paths(db, key) if len(mine) else {}
    out = []
    for direction in directions:
        trace = timeline.sender_trace(traces, SENDER_OF[direction])
        here = mine[mine["direction"] == direction]
        records = [(str(link), paths.get(link, 0), log)
                   for link, log in zip(here["link"], here["records"], strict=True)]
        item = classify_direction(None if trace is None else trace.events, records, k)
        if trace is None and records:
            item["how"] += f" ({SENDER_OF[direction]})"
        out.append({"run_key": key, "direction": direction, **item})
    return out


def classify_data(db: DbLike, k: int = loss_position.DEFAULT_K) -> pd.DataFrame:
    """Every run with a verdict log classed by its data datagrams, one row per run and data direction."""
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k!r}")
    logs = loss_position.verdict_logs(db)
    runs = results.load(db)
    runs = runs[runs["key"].isin(set(logs["run_key"]))] if len(runs) else runs
    rows = [row for run in runs.to_dict("records") for row in classify_run(db, run, logs, k)]
    return pd.DataFrame(rows, columns=["run_key", "direction", *FIELDS])


def wide(long: pd.DataFrame) -> pd.DataFrame:
    """``classify_data``'s rows as ``loss_position.classify_logs`` lays them out, one row per run (``class_<d>``,
    ``packets_<d>``, ``drops_<d>``, ``tail_drops_<d>``, and ``how_<d>``, d in forward, reverse, any): ``any`` is
    the worst of the directions whose dropper kept a log (a direction without one lost nothing to a dropper),
    not classed when one of those is not."""
    rows = []
    for run_key, group in long.groupby("run_key", sort=True):
        row: dict[str, Any] = {"run_key": run_key}
        mine = {r["direction"]: {**r, "class": r["class"] if isinstance(r["class"], str) else None}
                for r in group.to_dict("records")}
        for direction in ("forward", "reverse"):
            item = mine.get(direction) or not_classed(NO_LOG)
            row.update({f"{f}_{direction}": item[f] for f in FIELDS})
        judged = [r for r in mine.values() if r["how"] != not_classed(NO_LOG)["how"]]
        unclassed = [r for r in judged if r["class"] is None] or ([] if judged else [not_classed(NO_LOG)])
        row.update({f"{f}_any": unclassed[0][f] for f in FIELDS} if unclassed else {
            "class_any": loss_position.worst(r["class"] for r in judged), "how_any": DATA_QLOG,
            **{f"{f}_any": sum(int(r[f]) for r in judged) for f in ("packets", "drops", "tail_drops")}})
        rows.append(row)
    return pd.DataFrame(rows, columns=["run_key", *[f"{f}_{d}" for d in CLASS_DIRECTIONS for f in FIELDS]])


def classify_runs(db: DbLike, k: int = loss_position.DEFAULT_K) -> pd.DataFrame:
    """``loss_position.classify_runs`` by data datagrams: the runs with a verdict log, with their classes by data
    (``wide``: None where not classed, ``how_<d>`` says why); ``attrs`` k, min_len (0) and by ("data")."""
    out = loss_position.with_classes(results.load(db), wide(classify_data(db, k)))
    out.attrs.update(k=k, min_len=0, by="data")
    return out
