"""Loss classes over data packets (fecbench.analysis.traces.data_loss, issue 69 item 1): a run classed by the
dropper records whose datagram carried application data, on synthetic qlog (JSON-SEQ written here) and verdict
logs; ``loss_position`` classes the same runs over every packet, which is where the two part."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fecbench.analysis.studies import loss_position
from fecbench.analysis.traces import data_loss, qlog, wire
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts import samples
from fecbench.verdicts.samples import Data
from tests.helpers.qlog_db import RECORD_DTYPE, make_db

#: A download's server → client datagrams: handshake, an ACK at 3, 20 datagrams of the response, then ACKs,
#: the stats exchange and the close (35 datagrams, one packet each).
HANDSHAKE = [("initial", ["ack", "crypto"]), ("handshake", ["crypto"]), ("1RTT", ["handshake_done"]),
             ("1RTT", ["ack"])]
RESPONSE = [("1RTT", ["stream"])] * 20
AFTER = [("1RTT", ["ack"])] * 9 + [("1RTT", ["ack", "max_data"]), ("1RTT", ["connection_close"])]
DOWNLOAD = HANDSHAKE + RESPONSE + AFTER
UDP_IPV4 = 28


def _size(n: int, frames: list[str]) -> int:
    return 1200 if "stream" in frames or "crypto" in frames else 40 + n % 7    # ACKs: small, of varied lengths


def _events(packets: list[tuple[str, list[str]]], with_frames: bool = True, repairs_after: tuple[int, ...] = (),
            datagrams: int | None = None, over_at: int | None = None) -> list[dict[str, Any]]:
    """The sender's events; ``datagrams``: fecq's ``datagram_sent`` after each packet too, its length with that
    many bytes of FEC framing; ``over_at``: fecq's ``transfer_over`` mark just before that packet."""
    events = []
    for n, (ptype, frames) in enumerate(packets):
        if n == over_at:
            events.append({"time": n - 0.5, "name": "fecq:transfer_over", "data": {}})
        data: dict[str, Any] = {"header": {"packet_type": ptype, "packet_number": n, "length": _size(n, frames)}}
        if with_frames:
            data["frames"] = [{"frame_type": f, **({"stream_id": 0, "offset": 1000 * n, "length": 1000}
                                                   if f == "stream" else {})} for f in frames]
        events.append({"time": float(n), "name": "transport:packet_sent", "data": data})
        if datagrams is not None:
            events.append({"time": float(n), "name": "fecq:datagram_sent", "data": {
                "length": _size(n, frames) + datagrams, "app_data": "stream" in frames}})
        if n in repairs_after:   # fecq's repair below QUIC: a datagram of its own, its whole length logged
            events.append({"time": n + 0.5, "name": "fecq:repair_sent", "data": {"block": 0, "symbol": 0,
                                                                                  "length": 1212}})
    return events


def write_sqlog(path: Path, events: list[dict[str, Any]], vantage: str = "server") -> Path:
    """A JSON-SEQ qlog (RFC 7464 records) of one endpoint, as fecq writes it."""
    header = {"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "trace": {
        "vantage_point": {"type": vantage}, "common_fields": {"ODCID": "abcd", "reference_time": 1.7e12}}}
    path.write_text("".join("\x1e" + json.dumps(record) + "\n" for record in [header, *events]))
    return path


def verdicts(lengths: list[int], dropped: tuple[int, ...]) -> np.ndarray:
    records = np.zeros(len(lengths), dtype=RECORD_DTYPE)
    records["index"], records["len"] = np.arange(len(lengths)), lengths
    records["verdict"][list(dropped)] = 1
    return records


def _wire_lengths(packets: list[tuple[str, list[str]]], repairs_after: tuple[int, ...] = (), framing: int = 0
                  ) -> list[int]:
    out = []
    for n, (_, frames) in enumerate(packets):
        out.append(_size(n, frames) + framing + UDP_IPV4)
        if n in repairs_after:
            out.append(1212 + UDP_IPV4)
    return out


def _trace(tmp_path: Path, name: str = "server.sqlog", **kwargs: Any) -> pd.DataFrame:
    [trace] = qlog.read(write_sqlog(tmp_path / name, _events(DOWNLOAD, **kwargs)))
    return trace.events


def test_qlog_frames_become_the_app_data_column(tmp_path):
    events = _trace(tmp_path)
    assert list(events.columns) == qlog.COLUMNS
    sent = events[events["kind"] == "sent"]
    assert sent["app_data"].tolist() == [0.0] * 4 + [1.0] * 20 + [0.0] * 11
    assert _trace(tmp_path, "bare.sqlog", with_frames=False)["app_data"].isna().all()


@pytest.mark.parametrize(("data", "expected"), [
    ({"frames": [{"frame_type": "ack"}, {"frame_type": "stream", "length": 3}]}, 1.0),   # qlog 0.3 / draft-02
    ({"frames": [{"frame_type": "stream", "stream_id": 0, "raw": {"length": 9}}]}, 1.0),  # noq (n0-qlog)
    ({"frames": [{"frame_type": "datagram"}]}, 1.0),           # fecq's messages in datagram mode
    ({"frames": [{"frame_type": "crypto"}, {"frame_type": "padding"}]}, 0.0),
    ({"frames_summary": "STREAM ACK "}, 1.0),                  # fecbench's XQUIC converter
    ({"frames_summary": "ACK FEC_REPAIR "}, 0.0),
    ({"length": 1205, "app_data": True}, 1.0), ({"length": 45, "app_data": False}, 0.0),   # fecq:datagram_sent
    ({"frames_summary": ""}, math.nan), ({"frames": []}, math.nan), ({}, math.nan)])
def test_what_counts_as_application_data(data, expected):
    got = qlog._app_data(data)
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_an_ack_only_drop_is_no_loss_of_data(tmp_path):
    events = _trace(tmp_path)
    records = verdicts(_wire_lengths(DOWNLOAD), dropped=(3,))
    assert loss_position.summarise(records)["class"] == loss_position.LOSS          # today: every packet
    got = data_loss.classify_link(events, records)
    assert got == {"class": loss_position.NO_LOSS, "packets": 20, "drops": 0, "tail_drops": 0,
                   "how": data_loss.DATA_QLOG}


def test_a_drop_among_the_last_ten_data_datagrams_is_tail_loss(tmp_path):
    """Data datagram 11 of 20 (record 14 of 35): not among the last 10 packets, among the last 10 data ones."""
    events = _trace(tmp_path)
    records = verdicts(_wire_lengths(DOWNLOAD), dropped=(14,))
    assert loss_position.summarise(records)["class"] == loss_position.LOSS
    got = data_loss.classify_link(events, records)
    assert (got["class"], got["packets"], got["drops"], got["tail_drops"]) == (loss_position.TAIL, 20, 1, 1)
    early = data_loss.classify_link(events, verdicts(_wire_lengths(DOWNLOAD), dropped=(5,)))
    assert early["class"] == loss_position.LOSS      # data datagram 2 of 20


def test_repairs_below_quic_are_not_data(tmp_path):
    """fecq's repairs (and its 5-byte source header): a dropped repair is no lost data, and the records after
    it still land on their own datagrams."""
    [trace] = qlog.read(write_sqlog(tmp_path / "fec.sqlog", _events(DOWNLOAD, repairs_after=(13, 23))))
    lengths = _wire_lengths(DOWNLOAD, repairs_after=(13, 23), framing=5)
    walked = wire.walk(trace.events, np.array(lengths, dtype=float))
    assert all(w.matched for w in walked) and [i for i, w in enumerate(walked) if w.repair] == [14, 25]
    assert data_loss.classify_link(trace.events, verdicts(lengths, dropped=(25,)))["class"] == loss_position.NO_LOSS
    assert data_loss.classify_link(trace.events, verdicts(lengths, dropped=(24,)))["class"] == loss_position.TAIL


def test_fecq_datagram_events_class_a_stack_whose_packets_list_no_frames(tmp_path):
    """fecq single path (quinn-proto 0.11 logs packets without frames): its own ``fecq:datagram_sent`` (length
    on the wire, ``app_data``) and ``repair_sent`` events, record n matched to its n-th datagram."""
    fecq = write_sqlog(tmp_path / "fecq.sqlog", _events(DOWNLOAD, with_frames=False, repairs_after=(13, 23),
                                                        datagrams=5))
    [trace] = qlog.read(fecq)
    events = trace.events
    datagrams = events[events["kind"] == "datagram"]
    assert len(datagrams) == 35 and events.loc[events["kind"] == "sent", "app_data"].isna().all()
    assert datagrams["app_data"].tolist() == [0.0] * 4 + [1.0] * 20 + [0.0] * 11
    lengths = _wire_lengths(DOWNLOAD, repairs_after=(13, 23), framing=5)
    walked = wire.walk_logged(events, np.array(lengths, dtype=float))
    assert all(w.matched for w in walked) and [i for i, w in enumerate(walked) if w.repair] == [14, 25]

    def classed(dropped: tuple[int, ...], records: list[int] = lengths) -> dict[str, Any]:
        return data_loss.classify_link(events, verdicts(records, dropped))
    assert classed((3,)) == {"class": loss_position.NO_LOSS, "packets": 20, "drops": 0, "tail_drops": 0,
                             "how": data_loss.DATA_QLOG}                       # an ACK
    assert classed((25,))["class"] == loss_position.NO_LOSS                     # a repair
    assert (classed((24,))["class"], classed((5,))["class"]) == (loss_position.TAIL, loss_position.LOSS)
    # a datagram the sender did not log (or a length that is not its datagram's): not classed
    assert classed((3,), [*lengths[:10], 1300, *lengths[10:]])["how"].startswith("not classed: the match failed")
    assert classed((3,), lengths[:-1] + [lengths[-1] + 1])["class"] is None
    db = tmp_path / "fecq.sqlite"
    keys = make_db(db, [{"label": "fecq", "qlogs": [fecq], "verdicts": verdicts(lengths, (24,))}])
    by_data = data_loss.classify_runs(db).set_index("key")
    assert (by_data.loc[keys["fecq"], "class_reverse"], by_data.loc[keys["fecq"], "how_reverse"]) == \
        (loss_position.TAIL, data_loss.DATA_QLOG)


#: A download whose stats exchange follows it: the client's request arrives after 2 ACKs, then the server's
#: reply (2 datagrams of stream data) and its close.
WITH_STATS = HANDSHAKE + RESPONSE + [("1RTT", ["ack"])] * 2 + [("1RTT", ["ack", "stream"])] * 2 + \
    [("1RTT", ["connection_close"])]
STATS_AT = len(HANDSHAKE) + len(RESPONSE) + 2


@pytest.mark.parametrize("logged", [False, True], ids=["frames", "datagram-events"])
def test_the_stats_exchange_after_the_transfer_is_not_its_data(tmp_path, logged):
    """fecq marks where its transfer ended (``fecq:transfer_over``): the stats reply's stream data after it is no
    data of the download, and a record past the sender's last datagram (an ICMP error after the close) is the
    exchange's end, not a failed match. Without the mark both count as they did."""
    lengths = _wire_lengths(WITH_STATS, framing=5 if logged else 0)
    icmp = [*lengths, 56 + UDP_IPV4]

    def classed(dropped: tuple[int, ...], records: list[int], over_at: int | None) -> dict[str, Any]:
        events = _events(WITH_STATS, with_frames=not logged, datagrams=5 if logged else None, over_at=over_at)
        [trace] = qlog.read(write_sqlog(tmp_path / f"s{over_at}-{len(records)}.sqlog", events))
        return data_loss.classify_link(trace.events, verdicts(records, dropped))
    reply = STATS_AT + 1
    assert classed((reply,), lengths, STATS_AT) == {"class": loss_position.NO_LOSS, "packets": 20, "drops": 0,
                                                    "tail_drops": 0, "how": data_loss.DATA_QLOG}
    assert classed((reply,), lengths, None)["class"] == loss_position.TAIL      # the reply counted as data
    assert classed((STATS_AT - 3,), lengths, STATS_AT)["class"] == loss_position.TAIL   # the response's last
    assert classed((len(lengths),), icmp, STATS_AT)["class"] == loss_position.NO_LOSS
    assert classed((5,), icmp, STATS_AT)["class"] == loss_position.LOSS
    assert classed((5,), icmp, None)["how"].startswith("not classed: the match failed (1 of 30")


def test_what_cannot_be_classed_is_not_classed(tmp_path):
    records = verdicts(_wire_lengths(DOWNLOAD), dropped=(3,))
    bare = data_loss.classify_link(_trace(tmp_path, "bare.sqlog", with_frames=False), records)
    assert bare["class"] is None and bare["how"] == "not classed: the stack's qlog lists no frames"
    # a datagram the qlog does not log (rQUIC's coded packets): the records no longer match
    shifted = verdicts([*_wire_lengths(DOWNLOAD)[:10], 1300, *_wire_lengths(DOWNLOAD)[10:]], dropped=(3,))
    failed = data_loss.classify_link(_trace(tmp_path), shifted)
    assert failed["class"] is None and failed["how"].startswith("not classed: the match failed (")
    assert data_loss.classify_direction(None, [("l1", 1, records)])["how"] == \
        "not classed: no qlog of the data sender"
    assert data_loss.classify_direction(_trace(tmp_path), [])["how"] == \
        "not classed: no verdict log in this direction"


def _runs(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    framed = write_sqlog(tmp_path / "framed.sqlog", _events(DOWNLOAD))
    bare = write_sqlog(tmp_path / "bare.sqlog", _events(DOWNLOAD, with_frames=False))
    lengths = _wire_lengths(DOWNLOAD)
    db = tmp_path / "campaign.sqlite"
    keys = make_db(db, [
        {"label": "ack-drop", "qlogs": [framed], "verdicts": verdicts(lengths, (3,)), "metrics": {"dct_ms": 10.0}},
        {"label": "data-tail", "qlogs": [framed], "verdicts": verdicts(lengths, (14,)), "metrics": {"dct_ms": 20.0}},
        {"label": "no-frames", "qlogs": [bare], "verdicts": verdicts(lengths, (14,)), "metrics": {"dct_ms": 30.0}},
        {"label": "no-qlog", "verdicts": verdicts(lengths, (14,)), "metrics": {"dct_ms": 40.0}}])
    return db, keys


def test_runs_classed_by_their_data_datagrams(tmp_path):
    db, keys = _runs(tmp_path)
    by_data = data_loss.classify_runs(db).set_index("label")
    by_packet = loss_position.classify_runs(db).set_index("label")
    assert by_data.attrs["by"] == "data" and by_data.attrs["k"] == loss_position.DEFAULT_K
    assert by_packet.loc[["ack-drop", "data-tail"], "class_reverse"].tolist() == [loss_position.LOSS] * 2
    assert by_data.loc["ack-drop", "class_reverse"] == loss_position.NO_LOSS
    assert by_data.loc["data-tail", "class_reverse"] == loss_position.TAIL
    assert by_data.loc["data-tail", "class_any"] == loss_position.TAIL    # a download's data: reverse only
    assert (by_data.loc["data-tail", "packets_reverse"], by_data.loc["data-tail", "how_reverse"]) == \
        (20, data_loss.DATA_QLOG)
    for label, why in (("no-frames", "the stack's qlog lists no frames"), ("no-qlog", "no qlog kept")):
        assert pd.isna(by_data.loc[label, "class_reverse"]) and pd.isna(by_data.loc[label, "class_any"])
        assert by_data.loc[label, "how_reverse"] == f"not classed: {why}"
    assert by_data["class_forward"].isna().all()     # no dropper log of the requests' direction: ``any`` is reverse's
    assert by_data.loc["ack-drop", "how_forward"] == f"not classed: {data_loss.NO_LOG}"
    long = data_loss.classify_data(db)
    assert set(long["direction"]) == {"forward", "reverse"} and len(long) == 8


def test_the_verdicts_class_by_data_and_widen_what_is_not_classed(tmp_path):
    """A claim's class filter reads the classes by data; a finished run nobody could class stays in the claim's
    population with an unknown value (it widens the interval, counted as 'not classed'), never guessed."""
    db, keys = _runs(tmp_path)
    data = Data(db)
    classes = data.classified().set_index("key")["class_reverse"]
    assert classes[keys["ack-drop"]] == loss_position.NO_LOSS and pd.isna(classes[keys["no-qlog"]])
    assert data.classified() is data.classified()       # read once
    claim = SimpleNamespace(where={"loss_class": ["no loss"]}, params={"loss_direction": "reverse"})
    test = samples._classes(claim, data)

    def row(label: str, status: str = "ok") -> dict[str, Any]:
        return {"key": keys[label], "status": status, "dct_ms": 40.0}
    assert test.keeps(row("ack-drop"), row("ack-drop")) == (True, True)
    assert test.keeps(row("data-tail"), row("ack-drop")) == (False, True)
    assert test.keeps(row("no-qlog"), row("no-frames")) == (True, True)
    assert test.unclassed(row("no-qlog")) and not test.unclassed(row("ack-drop"))
    assert not test.unclassed(row("no-qlog", "failed"))         # imputed already
    why: dict[str, int] = {}
    assert samples._unclassed(test, row("no-qlog"), row("ack-drop"), why) == (True, False)
    assert why == {"label not classed": 1}
    assert samples._bounds(row("no-qlog"), "dct_ms", unclassed=True)[:2] == (0.0, math.inf)
    assert samples._bounds(row("no-qlog"), "dct_ms") == (40.0, 40.0, 40.0)
    found = samples.Sample(pd.DataFrame(), draws=5, why={"label not classed": 1, "baseline not classed": 2})
    assert ev._excluded_text(claim, found) == \
        "3 run(s) not classed by their data (baseline 2, label 1): unknown values, they widen the interval"


def test_a_reqresp_run_is_classed_in_both_directions(tmp_path):
    """reqresp carries data both ways: each direction classed by its own sender's qlog; a direction without a
    verdict log lost nothing to a dropper, so ``any`` is the other's class."""
    server = write_sqlog(tmp_path / "server.sqlog", _events(DOWNLOAD))
    client = write_sqlog(tmp_path / "client.sqlog.gz", [], vantage="client")
    client.write_bytes(gzip.compress(client.read_bytes()))
    db = tmp_path / "rr.sqlite"
    keys = make_db(db, [{"label": "rr", "workload": "reqresp", "qlogs": [server, client],
                         "verdicts": verdicts(_wire_lengths(DOWNLOAD), (14,))}])
    rows = {r["direction"]: r for r in data_loss.classify_run(db, {"key": keys["rr"], "workload": "reqresp"})}
    assert rows["reverse"]["class"] == loss_position.TAIL
    assert rows["forward"]["how"] == "not classed: no verdict log in this direction"
    wide = data_loss.wide(pd.DataFrame(rows.values()))
    assert wide.loc[0, "class_any"] == loss_position.TAIL
    unclassed = {**rows["forward"], **data_loss.not_classed("no qlog of the data sender")}
    wide = data_loss.wide(pd.DataFrame([rows["reverse"], unclassed]))
    assert wide.loc[0, "class_any"] is None and wide.loc[0, "how_any"] == unclassed["how"]
