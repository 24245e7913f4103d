"""fecbench.analysis.traces.qlog on recorded qlog (tquic's JSON-SEQ, tests/data/qlog) and on the other serialisations
and time conventions of the qlog drafts; the timeline's arithmetic on the sender's packets."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pandas as pd
import pytest

from fecbench.analysis.traces import qlog, timeline, wire
from tests.helpers.qlog_db import fec_qlog, tquic_files, tquic_verdicts


def _server():
    [file] = [f for f in tquic_files() if f.name.startswith("SERVER")]
    [trace] = qlog.read(file)
    return trace


def test_recorded_tquic_trace_parses_every_event():
    for file in tquic_files():
        [trace] = qlog.read(file)
        assert trace.skipped == 0
        assert trace.vantage == ("server" if file.name.startswith("SERVER") else "client")
        events = trace.events
        assert list(events.columns) == qlog.COLUMNS
        assert events["t_s"].iloc[0] == 0 and events["t_s"].is_monotonic_increasing
        assert events["t_abs_s"].isna().all()          # tquic's traces carry no reference time
        sent = events[events["kind"] == "sent"]
        assert len(sent) == trace.names["quic:packet_sent"] and sent["bytes"].gt(0).all()
        assert trace.paths == [0]


def test_recorded_sender_declared_what_the_dropper_dropped():
    """The recording's dropper dropped 10 of the server's datagrams and the server declared 10 packets lost,
    each after the drop that explains it (datagram_times places the drops by the recorded lengths)."""
    trace, verdicts = _server(), tquic_verdicts()
    events = trace.events
    lost = events[events["kind"] == "lost"]["t_s"].to_numpy()
    assert len(lost) == int(verdicts["verdict"].sum()) == trace.names["recovery:packet_lost"]
    when = wire.datagram_times(events, verdicts["len"].astype(float))
    assert not np.isnan(when).any()        # every datagram the dropper saw is one the server sent
    drops = np.sort(when[verdicts["verdict"].astype(bool)])
    assert (drops < lost).all()
    metrics = events[events["kind"] == "metrics"]
    assert metrics["cwnd"].dropna().gt(0).all() and metrics["srtt_ms"].notna().any()


def test_plain_gzip_and_newline_records_read_the_same(tmp_path):
    file = [f for f in tquic_files() if f.name.startswith("SERVER")][0]
    text = gzip.decompress(file.read_bytes()).decode()
    plain = tmp_path / "server.sqlog"
    plain.write_text(text)
    lines = tmp_path / "lines.sqlog"
    lines.write_text("\n".join(r for r in text.split("\x1e") if r.strip()))
    reference = qlog.read(file)[0].events
    for other in (plain, lines):
        pd.testing.assert_frame_equal(qlog.read(other)[0].events, reference)


def test_a_record_cut_short_is_counted_not_fatal(tmp_path):
    file = [f for f in tquic_files() if f.name.startswith("SERVER")][0]
    text = gzip.decompress(file.read_bytes()).decode()
    cut = tmp_path / "cut.sqlog"
    cut.write_text(text[: len(text) - 40])
    trace, whole = qlog.read(cut)[0], qlog.read(file)[0]
    assert trace.skipped == 1 and sum(trace.names.values()) == sum(whole.names.values()) - 1


def test_json_traces_with_paths_and_fecq_events(tmp_path):
    path = fec_qlog(tmp_path / "fec.qlog", paths=(0, 1), packets=20, lost=(3,), repairs=(4, 9), recovered=(6,))
    [trace] = qlog.read(path)
    assert trace.vantage == "server" and trace.connection == "abcd" and trace.paths == [1, 2]
    counts = trace.events.groupby(["path", "kind"]).size()
    for p in (1, 2):
        assert counts[(p, "sent")] == 20 and counts[(p, "lost")] == 1
        assert counts[(p, "repair_sent")] == 2 and counts[(p, "recovered")] == 1
    repairs = trace.events[trace.events["kind"] == "repair_sent"]
    assert sorted(repairs["symbol"].unique()) == [4, 9] and set(repairs["block"]) == {0}
    # relative times plus the reference time (ms since the epoch) give absolute ones
    assert trace.events["t_abs_s"].iloc[0] == pytest.approx(1.7e9)


def _document(events, common=None, **trace):
    return {"qlog_version": "0.3", "traces": [{"vantage_point": {"type": "client"}, "common_fields": common or {},
                                                "events": events, **trace}]}


def test_time_conventions(tmp_path):
    file = tmp_path / "t.qlog"
    sent = {"header": {"packet_number": 0}, "raw": {"length": 100}}
    # delta times add up
    file.write_text(json.dumps(_document([{"time": 5, "name": "transport:packet_sent", "data": sent},
                                          {"time": 10, "name": "transport:packet_sent", "data": sent}],
                                         {"time_format": "delta"})))
    assert qlog.read(file)[0].events["t_s"].tolist() == [0.0, 0.010]
    # absolute times (ms since the epoch): seconds from the first, and since the epoch
    file.write_text(json.dumps(_document([{"time": 1.7e12 + 2, "name": "quic:packet_sent", "data": sent},
                                          {"time": 1.7e12 + 7, "name": "quic:packet_lost", "data": sent}])))
    events = qlog.read(file)[0].events
    assert events["t_s"].tolist() == pytest.approx([0, 0.005])
    assert events["t_abs_s"].tolist() == pytest.approx([1.7e9 + 0.002, 1.7e9 + 0.007])
    assert events["kind"].tolist() == ["sent", "lost"]
    # microseconds, and qlog 0.4's reference time object
    file.write_text(json.dumps(_document([{"time": 0, "name": "quic:recovery_metrics_updated",
                                           "data": {"congestion_window": 5000}},
                                          {"time": 2500, "name": "quic:recovery_metrics_updated",
                                           "data": {"smoothed_rtt": 30}}],
                                         {"time_units": "us", "reference_time": {"clock_type": "system",
                                                                                 "epoch": "1970-01-01T00:00:00Z"}})))
    events = qlog.read(file)[0].events
    assert events["t_s"].tolist() == [0.0, 0.0025]
    assert events["cwnd"].iloc[0] == 5000 and math.isnan(events["cwnd"].iloc[1])     # only what changed
    assert events["srtt_ms"].iloc[1] == 30


def test_old_draft_event_arrays_and_unknown_events(tmp_path):
    file = tmp_path / "old.qlog"
    file.write_text(json.dumps(_document(
        [[0, "transport", "packet_sent", {"header": {"packet_number": 1}, "raw": {"length": 1200}}],
         [4, "recovery", "metrics_updated", {"bytes_in_flight": 1200}],
         [6, "recovery", "packet_lost", {"header": {"packet_number": 1}}],
         [7, "http", "frame_created", {}], "garbage"],
        event_fields=["relative_time", "category", "event", "data"])))
    [trace] = qlog.read(file)
    assert trace.events["kind"].tolist() == ["sent", "metrics", "lost"]
    assert trace.skipped == 1 and trace.names["http:frame_created"] == 1
    assert trace.events["bytes_in_flight"].iloc[1] == 1200 and math.isnan(trace.events["packet_number"].iloc[1])


def test_quic_gos_packet_size(tmp_path):
    """quic-go's draft-02 trace (rQUIC's) gives a packet's size in its header (packet_size): its bytes, so the
    explain figure's sending rate is drawn for rQUIC too (issue 51)."""
    file = tmp_path / "quic-go.qlog"
    file.write_text(json.dumps(_document(
        [[0.5, "transport", "packet_sent", {"packet_type": "initial", "header": {
            "packet_number": 0, "payload_length": 303, "packet_size": 326}}]],
        event_fields=["relative_time", "category", "event", "data"])))
    [trace] = qlog.read(file)
    assert trace.events["bytes"].tolist() == [326] and trace.events["packet_type"].tolist() == ["initial"]


def test_not_a_qlog(tmp_path):
    file = tmp_path / "x.qlog"
    file.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="traces"):
        qlog.read(file)
    traces, notes = qlog.read_all([file, tmp_path / "keys.log"])
    assert traces == [] and len(notes) == 1 and "x.qlog" in notes[0]


def test_coalesced_datagrams_and_sending_rate():
    events = pd.DataFrame({"t_s": [0.0, 0.0001, 0.001, 0.002, 0.0025], "kind": ["sent"] * 5, "path": [0.0] * 5,
                           "bytes": [143.0, 1057.0, 1472.0, 1472.0, 600.0]})
    # 143 + 1057 in one datagram (1242 with IPv4, UDP and Ethernet headers), then one datagram per packet
    when = wire.datagram_times(events, np.array([1242.0, 1514.0, 1500.0, 642.0, 100.0]))
    assert when[:4].tolist() == [0.0, 0.001, 0.002, 0.0025] and math.isnan(when[4])
    rate = timeline.sending_rate(events, 0.001)
    assert rate["mbit_s"].sum() * 0.001 * 1e6 / 8 == pytest.approx(events["bytes"].sum())
    assert rate["t_s"].tolist() == pytest.approx([0.0005, 0.0015, 0.0025])


def test_fec_repairs_are_datagrams_of_their_own_on_the_wire():
    """fecq's layer below QUIC frames each QUIC datagram (5 header bytes) and sends its repairs as datagrams of
    their own (``repair_sent``, length of the whole datagram): the dropper's n-th record is the n-th of both.
    Here a repair follows every 4th packet; records of a repair are placed at the repair, the next record at
    the packet after it (without the repairs in the walk, both would land one packet late)."""
    kinds, times, sizes = [], [], []
    for n in range(8):
        kinds.append("sent"), times.append(n * 0.001), sizes.append(1200.0)
        if n % 4 == 3:
            kinds.append("repair_sent"), times.append(n * 0.001 + 0.0002), sizes.append(1212.0)
    events = pd.DataFrame({"t_s": times, "kind": kinds, "path": 0.0, "bytes": sizes})
    source, repair = 1200 + 5 + 28, 1212 + 28
    lengths = np.array([source] * 4 + [repair] + [source] * 4 + [repair], dtype=float)
    walked = wire.walk(events, lengths)
    assert [w.repair for w in walked] == [False] * 4 + [True] + [False] * 4 + [True]
    assert [(w.start, w.end) for w in walked if not w.repair] == [(n, n + 1) for n in range(8)]
    assert wire.datagram_times(events, lengths)[[3, 4, 5]].tolist() == pytest.approx([0.003, 0.0032, 0.004])
    # Multipath framing (one envelope byte more) and two packets coalesced behind one header.
    coalesced = pd.DataFrame({"t_s": [0.0, 0.0, 0.001], "kind": "sent", "path": 0.0, "bytes": [143.0, 1000.0, 900.0]})
    walked = wire.walk(coalesced, np.array([143 + 1000 + 6 + 28, 900 + 6 + 28], dtype=float))
    assert [(w.start, w.end) for w in walked] == [(0, 2), (2, 3)]
