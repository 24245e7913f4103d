"""XQUIC's text qlog turned into JSON-SEQ (fecbench.runners.run.xquic_qlog): the lines as XQUIC's format strings
print them (src/common/xqc_log_event_callback.c of the pinned commit with fecbench.patch), read back by fecbench's
qlog reader.
The real programs' output is checked by tests/test_xquic_campaign.py (--capture qlog=all)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from fecbench.analysis.traces import qlog
from fecbench.runners.run.xquic_qlog import convert, convert_tree

LOG = """\
[2026/11/25 01:02:03 000100] [server_listening] |xqc_engine_create|ip_v4:10.0.1.2|port_v4:4433|
[2026/11/25 01:02:03 000200] [error] |scid:ab12|xqc_conn_something|not an event line|
[2026/11/25 01:02:03 001000] [packet_sent] |scid:ab12|xqc_send_packet_with_pn|<==|conn:0x5|path_id:0|pkt_pns:2|\
pkt_type:SHORT_HEADER|pkt_num:7|size:1252|frame_flag:STREAM|sent:1252|inflight:2504|now:99|stream_id:0|\
stream_offset:0|
[2026/11/25 01:02:03 002500] [packet_sent] |scid:ab12|xqc_send_packet_with_pn|<==|conn:0x5|path_id:1|pkt_pns:2|\
pkt_type:SHORT_HEADER|pkt_num:3|size:1252|frame_flag:STREAM|sent:1252|inflight:3756|now:99|stream_id:0|\
stream_offset:1200|
[2026/11/25 01:02:03 004000] [rec_metrics_updated] |scid:ab12|xqc_send_ctl_on_ack|path_id:1|cwnd:14720|\
inflight:1252|applimit:0|srtt:21345|latest_rtt:20000|pto_count:0|send:9|lost:1|tlp:0|recv:4|
[2026/11/25 01:02:03 005000] [packet_lost] |scid:ab12|xqc_send_ctl_detect_lost|pkt_pns:2|pkt_type:4|pkt_num:7|\
lost_pn:7|po_sent_time:1|lost_send_time:1|loss_delay:3|frame:STREAM|repair:1|path_id:0|
[2026/11/25 01:02:03 006000] [stream_state_updated] |scid:ab12|xqc_stream_close|stream_id:0|new:closed|
"""


def test_events_converted_and_read_back(tmp_path: Path) -> None:
    log = tmp_path / "server.xqlog"
    log.write_text(LOG)
    [out] = convert(log, tmp_path, "server")
    records = [json.loads(r) for r in out.read_text().split("\x1e") if r.strip()]
    assert records[0]["qlog_format"] == "JSON-SEQ" and records[0]["trace"]["common_fields"]["group_id"] == "ab12"
    names = [r["name"] for r in records[1:]]
    # the error line is left out; the listening event (no connection) goes with the connection
    assert names == ["xquic:server_listening", "transport:packet_sent", "transport:packet_sent",
                     "recovery:metrics_updated", "recovery:packet_lost", "xquic:stream_state_updated"]
    [trace] = qlog.read(out)
    assert trace.vantage == "server" and trace.skipped == 0
    events = trace.events
    sent = events[events["kind"] == "sent"]
    assert list(sent["path"]) == [1, 2] and list(sent["bytes"]) == [1252, 1252]
    assert list(sent["packet_type"]) == ["1RTT", "1RTT"]
    metrics = events[events["kind"] == "metrics"].iloc[0]
    # the path whose controller updated (fecbench.patch prints it: XQUIC's own line did not, and explain drew every
    # path's RTT as path 1's)
    assert metrics["cwnd"] == 14720 and math.isclose(metrics["srtt_ms"], 21.345) and metrics["path"] == 2
    lost = events[events["kind"] == "lost"].iloc[0]
    assert lost["packet_number"] == 7 and lost["path"] == 1 and lost["packet_type"] == "1RTT"
    assert math.isclose(lost["t_s"] - sent.iloc[0]["t_s"], 0.004)


def test_every_side_folder_converted(tmp_path: Path) -> None:
    for side in ("server", "client"):
        (tmp_path / side).mkdir()
        (tmp_path / side / f"{side}.xqlog").write_text(LOG)
    convert_tree(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "client", "client/ab12_client.sqlog", "server", "server/ab12_server.sqlog"]
