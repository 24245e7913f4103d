"""Every message of a messages run accounted for, joined with what the link dropped.

fecq's messages receiver classifies every message the sender sent as on time, late, corrupted
(some of its packets missing) or lost (all missing), and splits the missing packets of those
messages by where they went, with the sender's counters: never put in a QUIC packet (dropped from
QUIC's datagram queue, or still queued when the receiver stopped), dropped by the sender's FEC
adapter before the wire, and the rest, gone in the network (quic-impls/fecq/README.md,
"Messages"). The link's part comes from the droppers: ``link_dropped`` counts the packets the
droppers dropped in the data direction (server → client, ``reverse``), ``link_dropped_data`` the
data-sized ones among them (at least ``DATA_LEN`` bytes: message packets and FEC repairs, not
acknowledgements) when the run kept its verdict log (``verdict_log = true``).

- ``accounting(db)``: one row per messages run (``results.load`` columns plus the link's drops and
  ``closes``: sent = on time + late + corrupted + lost);
- ``summary(frame)``: the sums per label, for the report.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from fecbench.analysis import results, tables

#: Smallest IP length counted as a data packet in a verdict log: a 1000-byte message packet in a
#: DATAGRAM frame is ~1040 bytes of IP, an acknowledgement under 100.
DATA_LEN = 1000
#: The data direction of a messages run (the server sends the messages; forward = client → server).
DATA_DIRECTION = "reverse"
MESSAGE_COUNTS = ("messages_sent", "messages_on_time", "messages_late", "messages_corrupted",
                  "messages_lost")
PACKET_COUNTS = ("msg_packets_sent", "msg_packets_on_time", "msg_packets_late", "msg_packets_missing",
                 "bad_msg_packets_late", "bad_msg_packets_missing", "missing_not_sent",
                 "missing_sender_dropped", "missing_in_network", "recovered")
LINK_COUNTS = ("link_dropped", "link_dropped_data")


def _link_drops(db: results.DbLike) -> pd.DataFrame:
    """Per run: dropped packets in the data direction, and the data-sized ones (verdict logs)."""
    stats = tables.link_stats(db)
    stats = stats[stats["direction"] == DATA_DIRECTION]
    out = stats.groupby("run_key")["dropped"].sum().rename("link_dropped").to_frame()
    rows = results.rows(db, "verdict_logs", ["run_key", "data"], where={"direction": DATA_DIRECTION})
    data: dict[str, int] = {}
    for run_key, blob in rows:
        records = np.load(io.BytesIO(blob), allow_pickle=False)
        big = records["len"] >= DATA_LEN
        data[run_key] = data.get(run_key, 0) + int(records["verdict"][big].astype(bool).sum())
    out["link_dropped_data"] = pd.Series(data, dtype="float64")
    return out.reset_index()


def accounting(db: results.DbLike) -> pd.DataFrame:
    """One row per messages run that wrote metrics: the accounting columns, the link's drops and
    ``closes`` (whether sent = on time + late + corrupted + lost; NA for metrics without the split)."""
    frame = results.load(db)
    frame = frame[(frame["workload"] == "messages") & frame["messages_sent"].notna()].copy()
    frame = frame.merge(_link_drops(db), left_on="key", right_on="run_key", how="left")
    frame = frame.drop(columns="run_key")
    for col in (*MESSAGE_COUNTS, *PACKET_COUNTS, *LINK_COUNTS):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Int64")
    parts = frame[list(MESSAGE_COUNTS[1:])].sum(axis=1, min_count=4)
    frame["closes"] = frame["messages_sent"] == parts
    return frame.reset_index(drop=True)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Sums per label over the ok runs of an ``accounting`` frame, with the runs counted."""
    ok = frame[frame["status"] == "ok"]
    columns = [c for c in (*MESSAGE_COUNTS, *PACKET_COUNTS, *LINK_COUNTS) if c in ok]
    table = ok.groupby("label")[columns].sum(min_count=1)
    table.insert(0, "runs", ok.groupby("label").size())
    table.insert(1, "closes", ok.groupby("label")["closes"].all())
    return table.reset_index()
