"""The data dictionary of the runs frame (``results.load``): each column, its unit and where it comes from.

``COLUMNS`` describes every column ``load`` can return but the design factors (one column per factor of the
design, named as in it, in the unit the design converted it to: `factor_<name>` when the name is taken);
``dictionary(frame)`` lists the columns of a frame with their entries (a factor as such), and ``markdown``
writes it as the table notebooks/README.md carries (tests/test_dictionary.py checks that every column a
database yields is here, and that the README's table is this one).
"""

from __future__ import annotations

import pandas as pd

#: column -> (unit, source, meaning)
COLUMNS: dict[str, tuple[str, str, str]] = {
    "key": ("", "runs.key", "the run's key: a digest of its experiment, point, label, size and repetition"),
    "campaign": ("", "campaigns.name", "the design's name"),
    "design_hash": ("", "campaigns.design_hash", "digest of the design file's text (a changed design: another)"),
    "campaign_id": ("", "campaigns.id", "the campaign within the database"),
    "point": ("", "runs.point", "the design point's index within its design"),
    "impl": ("", "runs.impl", "the implementation (quic-impls/<impl>/impl.toml)"),
    "label": ("", "runs.label", "the design's label for an implementation with its arguments"),
    "impl_args": ("JSON", "runs.impl_args", "the label's arguments"),
    "workload": ("", "runs.workload", "download, upload, reqresp, messages or page"),
    "size": ("bytes", "runs.size", "the transfer's size (empty for messages; page: the page's bytes)"),
    "repetition": ("", "runs.repetition", "the repetition at the point (0-based)"),
    "loss_seed": ("", "runs.loss_seed", "the seed of the run's loss pattern: the same for every label of a "
                                        "point and repetition"),
    "status": ("", "runs.status", "ok, failed, timeout, unsupported, fidelity (flagged), interrupted, running "
                                  "(started, not finished), pending; with include_fidelity a flagged run's own "
                                  "outcome"),
    "error": ("", "runs.error", "why a run is not ok (a flag's reason for a flagged run)"),
    "started_at": ("UTC ISO 8601", "runs.started_at", "when the run started"),
    "finished_at": ("UTC ISO 8601", "runs.finished_at", "when it ended"),
    "duration_s": ("s", "runs.duration_s", "the run's wall time, set-up and checks included"),
    "attempts": ("", "runs.attempts", "times it was started (re-runs included)"),
    "link_backend": ("", "runs.link_backend", "delayline or netem"),
    "host": ("", "runs.host", "the host that ran it"),
    "decided_by": ("", "runs.decided_by", "the judge's rule that decided the status, or the checks that flagged it, "
                                          "as judged when it ran (NULL before schema 10)"),
    "timeout_s": ("s", "campaigns.settings_json", "the design's time limit: a timed-out duration is censored there"),
    "network": ("", "runs.applied_json", "digest of the conditions the run ran under (topology, links, loss model, "
                                         "workload, point values, schedule, flows): what pairs runs"),
    "dct_ms": ("ms", "metrics (client)", "completion time: request to last byte (reqresp: all exchanges; page: "
                                         "the page load time)"),
    "handshake_ms": ("ms", "metrics (client)", "the QUIC handshake's duration"),
    "bytes_app": ("bytes", "metrics (client)", "application bytes received"),
    "packets_sent": ("packets", "metrics (sender)", "UDP datagrams the data sender sent"),
    "bytes_sent": ("bytes", "metrics (sender)", "bytes the data sender sent"),
    "repair_sent": ("packets", "metrics (sender)", "FEC repair symbols sent"),
    "recovered": ("packets", "metrics (receiver)", "source packets FEC rebuilt"),
    "lost": ("packets", "metrics (sender)", "packets the data sender declared lost"),
    "retransmitted_bytes": ("bytes", "metrics (sender)", "bytes sent again"),
    "congestion_events": ("", "metrics (sender)", "congestion responses of the sender's controller"),
    "cwnd_final": ("bytes", "metrics (sender)", "the congestion window at the end"),
    "rtt_ms": ("ms", "metrics (client)", "smoothed RTT at the end"),
    "rebuffering_ms": ("ms", "metrics (client)", "messages workload: total re-buffering time"),
    "messages_late": ("messages", "metrics (client)", "messages workload: messages after their deadline"),
    "messages_corrupt": ("messages", "metrics (client)", "messages workload: messages with missing bytes"),
    "client_wall_ms": ("ms", "fecbench", "the client process's wall time (start to exit)"),
    "messages_sent": ("messages", "metrics JSON", "messages workload: messages the sender produced"),
    "messages_on_time": ("messages", "metrics JSON", "messages workload: whole and on time"),
    "messages_corrupted": ("messages", "metrics JSON", "messages workload: delivered with missing packets"),
    "messages_lost": ("messages", "metrics JSON", "messages workload: never delivered"),
    "rebuffering_events": ("", "metrics JSON", "messages workload: times the player stalled"),
    "msg_packets_sent": ("packets", "metrics JSON", "messages workload: message packets sent"),
    "msg_packets_on_time": ("packets", "metrics JSON", "messages workload: arrived before their deadline"),
    "msg_packets_late": ("packets", "metrics JSON", "messages workload: arrived after it"),
    "msg_packets_missing": ("packets", "metrics JSON", "messages workload: never arrived"),
    "bad_msg_packets_late": ("packets", "metrics JSON", "messages workload: late packets of corrupted messages"),
    "bad_msg_packets_missing": ("packets", "metrics JSON", "messages workload: missing packets of corrupted "
                                                           "messages"),
    "missing_not_sent": ("packets", "metrics JSON", "messages workload: missing, never sent"),
    "missing_sender_dropped": ("packets", "metrics JSON", "messages workload: missing, dropped by the sender"),
    "missing_in_network": ("packets", "metrics JSON", "messages workload: missing, lost in the network"),
    "stall_ms": ("ms", "metrics JSON", "messages workload: the longest stall"),
    "cc": ("", "metrics JSON", "the congestion controller the run used"),
    "repair_cc": ("", "metrics JSON", "how repairs count for congestion control"),
    "setup_ms": ("ms", "metrics JSON", "client start to first request: handshake and paths opened (multipath)"),
    "exchanges": ("", "metrics JSON", "request/response workload: the exchanges (files) the run planned"),
    "endpoint_wakeup_p50_ms": ("ms", "endpoint_timing", "the endpoints' median wait for a CPU after a wake-up"),
    "endpoint_wakeup_p99_ms": ("ms", "endpoint_timing", "its 99th percentile (recorded, not judged: "
                                                        "fecbench.timekeeping.endpoint_timing)"),
    "endpoint_wakeup_max_ms": ("ms", "endpoint_timing", "the longest wait"),
    "endpoint_runq_share": ("share", "endpoint_timing", "time the endpoints waited runnable over the run's wall "
                                                         "time"),
    "lateness_p99_ms": ("ms", "link_stats.delay_json", "the worst p99 lateness of the run's delay elements"),
    "coding_overhead": ("share", "derived", "repair datagrams ÷ all datagrams the data sender sent "
                                            "(fecbench.analysis.derived)"),
    "file_e2e_ms": ("ms", "derived", "a file's mean end-to-end time: (setup_ms + dct_ms) ÷ files fetched "
                                     "(fecbench.analysis.derived)"),
    "flagged": ("bool", "runs.status", "the run was flagged fidelity (its metrics may be wrong: kept, not used)"),
    "flag": ("", "runs.error", "why it was flagged"),
    "database": ("", "results.load", "the database a row came from (several loaded together)"),
}


def dictionary(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame's columns with their unit, source and meaning (a design factor as such; an undocumented
    column as ``?``, which the tests refuse)."""
    factors = set(frame.attrs.get("factors", []))
    rows = []
    for column in frame.columns:
        if column in factors:
            entry = ("the design's", "points", "a design factor: the point's value")
        else:
            entry = COLUMNS.get(column, ("?", "?", "?"))
        rows.append({"column": column, "unit": entry[0], "source": entry[1], "meaning": entry[2]})
    return pd.DataFrame(rows)


def markdown() -> str:
    """``COLUMNS`` as a markdown table (notebooks/README.md, "Data dictionary")."""
    lines = ["| column | unit | source | meaning |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {unit} | {source} | {meaning} |" for name, (unit, source, meaning) in COLUMNS.items()]
    return "\n".join(lines)
