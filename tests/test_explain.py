"""`fecbench explain`: one run's timeline and numbers from its kept qlog (fecbench.analysis.traces.timeline, explain),
on results databases whose runs kept the recorded tquic qlog (tests/data/qlog) or qlog the test writes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from fecbench.analysis.traces import explain, timeline, wire
from fecbench.inputs.errors import UserError
from tests.helpers.qlog_db import (
    RECORD_DTYPE,
    fec_qlog,
    fecq_rs_files,
    fecq_rs_verdicts,
    make_db,
    tquic_files,
    tquic_verdicts,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _fecbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fecbench", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def tquic_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("explain") / "campaign.sqlite"
    keys = make_db(db, [
        {"label": "tquic", "impl": "tquic", "args": {"cc": "cubic"}, "qlogs": tquic_files(),
         "verdicts": tquic_verdicts(), "metrics": {"dct_ms": 19.241, "bytes_app": 120_000}},
        {"label": "tquic-bbr", "impl": "tquic", "args": {"cc": "bbr"}, "metrics": {"dct_ms": 20.0}}])
    return db, keys


def test_explain_command_on_a_recorded_run(tquic_db, tmp_path):
    db, keys = tquic_db
    out = _fecbench("explain", str(db), keys["tquic"][:10], "-o", str(tmp_path))
    assert out.returncode == 0, out.stderr
    figure = tmp_path / f"{keys['tquic'][:12]}-timeline.png"
    assert figure.read_bytes()[:8] == PNG_MAGIC
    summary = (tmp_path / f"{keys['tquic'][:12]}-summary.txt").read_text()
    drops = int(tquic_verdicts()["verdict"].sum())
    assert f"loss model: {drops} server → client" in summary
    assert f"dropper drops placed in time on the server's packets: {drops} ({drops} then declared lost" in summary
    assert f"declared lost by the server: {drops} in its qlog" in summary
    assert "DCT: 19.24 ms" in summary and summary.strip() in out.stdout


def test_a_run_without_qlog_says_how_to_keep_them(tquic_db):
    db, keys = tquic_db
    out = _fecbench("explain", str(db), keys["tquic-bbr"])
    assert out.returncode == 2
    assert "--capture qlog=all" in out.stderr and "Traceback" not in out.stderr
    assert f"--only {keys['tquic-bbr'][:16]}" in " ".join(out.stderr.split())   # that run again, qlog kept
    out = _fecbench("explain", str(db), "ffffffff")
    assert out.returncode == 2 and "no run with key" in out.stderr


def test_an_implementation_asked_for_no_qlog(tquic_db, monkeypatch, tmp_path):
    db, keys = tquic_db
    assert timeline.writes_qlog(db, "tquic") is True      # quic-impls/tquic/impl.toml: [capture] qlog, as recorded
    assert timeline.writes_qlog(db, "no-such-impl") is None
    # An old database whose fingerprint has no qlog_capable: the descriptor text it kept says (not today's file).
    old = tmp_path / "old.sqlite"
    make_db(old, [{"label": "x", "impl": "tquic", "qlog_capable": None}])
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE campaigns SET impls_json = ?",
                     (json.dumps({"x": {"name": "tquic", "descriptor": "[impl]\nname = 'tquic'\n"}}),))
    assert timeline.writes_qlog(old, "tquic") is False
    monkeypatch.setattr(timeline, "writes_qlog", lambda db, impl: False)
    with pytest.raises(timeline.NoQlog, match="xquic is not asked for any"):
        timeline.qlog_files(db, keys["tquic-bbr"], "xquic")


def test_timeline_of_the_recorded_run(tquic_db):
    db, keys = tquic_db
    item = timeline.build(db, timeline.find_run(db, keys["tquic"]))
    assert item.sender == "server" and item.paths == [0]
    marks = item.marks
    drops, lost = marks[marks["mark"] == "drop"]["t_s"], marks[marks["mark"] == "lost"]["t_s"]
    assert len(drops) == len(lost) == int(tquic_verdicts()["verdict"].sum())
    assert (np.sort(drops.to_numpy()) < np.sort(lost.to_numpy())).all()
    # by packet number: every drop was declared lost, and nothing else was
    assert item.summary["drops_declared"] == len(drops) and item.summary["declared_without_drop"] == 0
    # the metrics hold between updates: no gap once the first value is known
    assert item.metrics["cwnd"].notna().all() and item.metrics["srtt_ms"].iloc[5:].notna().all()
    sent_bytes = item.summary["packets_sent"]
    assert sent_bytes > 0 and item.rate["mbit_s"].max() > 0
    assert item.summary["max_cwnd"] == item.metrics["cwnd"].max()


def test_artifacts_found_in_the_folder_without_the_table(tmp_path):
    db = tmp_path / "bare.sqlite"
    keys = make_db(db, [{"label": "tquic", "impl": "tquic", "qlogs": tquic_files()}], listed=False)
    assert [f.name for f in timeline.qlog_files(db, keys["tquic"])] == sorted(f.name for f in tquic_files())


def _fec_db(tmp_path, **extra):
    fec = fec_qlog(tmp_path / "fec.qlog", paths=(0, 1), lost=(5,), repairs=(9, 19), recovered=(11,))
    none = fec_qlog(tmp_path / "none.qlog", paths=(0, 1), lost=(5, 11))
    db = tmp_path / "fec.sqlite"
    keys = make_db(db, [
        {"label": "fecq-rs", "args": {"fec": "rs:15,10"}, "qlogs": [fec], "metrics": {"dct_ms": 40.0}, **extra},
        {"label": "fecq", "args": {"fec": "none"}, "qlogs": [none], "metrics": {"dct_ms": 50.0}},
        {"label": "fecq-rs", "args": {"fec": "rs:15,10"}, "repetition": 1, "metrics": {"dct_ms": 41.0}}])
    return db, keys


def test_multipath_marks_per_path_and_pair(tmp_path):
    db, keys = _fec_db(tmp_path)
    run = timeline.find_run(db, keys["fecq-rs"])
    item = timeline.build(db, run)
    assert item.paths == [1, 2]
    counts = item.marks.groupby(["path", "mark"]).size()
    for path in (1, 2):
        assert counts[(path, "repair_sent")] == 2 and counts[(path, "recovered")] == 1 and counts[(path, "lost")] == 1
    assert item.summary["repairs_sent"] == 4 and item.summary["recovered"] == 2
    twin = timeline.twin(db, run)
    assert twin["key"] == keys["fecq"]
    # a no-FEC run's twin is the FEC label's run on the same losses
    assert timeline.twin(db, twin)["key"] == run["key"]
    written = explain.explain(db, keys["fecq-rs"], tmp_path / "out", pair=True)
    assert written.figure.name.endswith("-pair.png") and written.figure.read_bytes()[:8] == PNG_MAGIC
    assert written.text.count("run ") == 2 and "repairs sent: 4 in qlog" in written.text


def test_pair_without_a_twin(tmp_path, tquic_db):
    db, keys = tquic_db
    with pytest.raises(UserError, match="no twin"):
        timeline.twin(db, timeline.find_run(db, keys["tquic"]))
    out = _fecbench("explain", str(db), keys["tquic"], "--pair", "-o", str(tmp_path))
    assert out.returncode == 2 and "no twin" in out.stderr and "Traceback" not in out.stderr


def test_dropper_drops_on_the_link_of_their_path(tmp_path):
    """A verdict log of the link of path 2 places its drops among path 2's packets, at the n-th of them."""
    verdicts = np.zeros(40, dtype=RECORD_DTYPE)
    verdicts["index"], verdicts["len"] = np.arange(40), 1200 + 28
    verdicts["verdict"][[5, 30]] = 1
    db, keys = _fec_db(tmp_path, verdicts=verdicts, link_path=2)
    item = timeline.build(db, timeline.find_run(db, keys["fecq-rs"]))
    drops = item.marks[item.marks["mark"] == "drop"]
    assert drops["path"].tolist() == [2.0, 2.0] and drops["t_s"].tolist() == pytest.approx([0.005, 0.030])
    # packet 5 was declared lost on both paths: path 2's by the drop, path 1's without one; packet 30 never
    assert {k: item.summary[k] for k in ("drops_declared", "drops_not_declared", "declared_without_drop")} == \
        {"drops_declared": 1, "drops_not_declared": 1, "declared_without_drop": 1}


def test_flows_panel(tmp_path):
    flows = [{"flow": 0, "role": "foreground", "label": "fecq-rs", "impl": "fecq", "tool": "fecq",
              "workload": "download", "series": [[i * 0.01, 1000 * i, 0, i % 2, 0] for i in range(5)], "bin_s": 0.01,
              "data": "down"},
             {"flow": 1, "role": "competing", "label": "bulk", "impl": "fecq", "tool": "fecq", "workload": "bulk",
              "series": [[i * 0.01, 500, 0, 0, 0] for i in range(5)], "bin_s": 0.01, "data": "down"}]
    db, keys = _fec_db(tmp_path, flows=flows)
    item = timeline.build(db, timeline.find_run(db, keys["fecq-rs"]))
    assert item.flows.groupby("flow").size().tolist() == [5, 5]
    bulk = item.flows[item.flows["flow"].str.startswith("1:")]
    assert bulk["mbit_s"].tolist() == pytest.approx([500 * 8 / 0.01 / 1e6] * 5)
    written = explain.explain(db, keys["fecq-rs"], tmp_path / "out")
    assert written.figure.read_bytes()[:8] == PNG_MAGIC


def test_representatives_of_each_label(tmp_path):
    """The median and the worst of each label's runs that kept qlog and count (the report links their timelines):
    a flagged run, however slow, is no outcome of its label."""
    file = tquic_files()[0]
    runs = [{"label": "a", "repetition": r, "qlogs": [file], "metrics": {"dct_ms": dct}}
            for r, dct in enumerate([30.0, 10.0, 20.0, 40.0])]
    runs += [{"label": "a", "repetition": 4, "metrics": {"dct_ms": 99.0}},          # kept no qlog
             {"label": "a", "repetition": 5, "qlogs": [file], "metrics": {"dct_ms": 30.8}, "status": "fidelity"},
             {"label": "b", "repetition": 0, "qlogs": [file], "metrics": {"dct_ms": 5.0}},
             {"label": "b", "repetition": 1, "qlogs": [file], "status": "timeout"}]
    db = tmp_path / "reps.sqlite"
    keys = make_db(db, runs)
    chosen = {(r["label"], r["which"]): r["key"] for r in explain.representatives(db)}
    assert chosen == {("a", "median"): keys["a#2"], ("a", "worst"): keys["a#3"],
                      ("b", "median"): keys["b"], ("b", "worst"): keys["b#1"]}


def test_rebuilt_after_declared_matches_packets_across_the_two_ends():
    """A packet the receiver's FEC rebuilt (recovered, then the stack's packet_received) that the sender had
    declared lost before, on the traces' wall clock: counted, with its lead; one declared after counted apart."""
    import pandas as pd

    def frame(rows):
        return pd.DataFrame(rows, columns=["t_abs_s", "kind", "path", "packet_type", "packet_number"])
    sender = frame([(100.000, "sent", 0.0, "1RTT", 7), (100.010, "lost", 0.0, "1RTT", 7),
                    (100.030, "lost", 0.0, "1RTT", 9)])
    receiver = frame([(100.015, "recovered", 0.0, None, float("nan")), (100.015, "received", 0.0, "1RTT", 7),
                      (100.020, "received", 0.0, "1RTT", 8),
                      (100.025, "recovered", 0.0, None, float("nan")), (100.025, "received", 0.0, "1RTT", 9)])
    rebuilt, late, lead, after = timeline.rebuilt_after_declared(sender, receiver)
    assert (rebuilt, late, after) == (2, 1, 1) and lead == pytest.approx(5.0)   # 9: rebuilt at .025, declared .030
    # a block decoded at once: two recoveries, then their two packets
    receiver = frame([(100.015, "recovered", 0.0, None, float("nan")), (100.015, "recovered", 0.0, None, float("nan")),
                      (100.016, "received", 0.0, "1RTT", 7), (100.016, "received", 0.0, "1RTT", 9)])
    assert timeline.rebuilt_after_declared(sender, receiver)[:2] == (2, 1)


def test_a_recorded_fecq_fec_run_places_every_drop(tmp_path):
    """A real fecq RS(30,20) download (tests/data/qlog/fecq-rs-download): its sender's 138 QUIC packets and 74
    repairs are the 211 datagrams the dropper saw (one coalesced pair); the 4 drops land on 3 source datagrams and
    1 repair, and the 2 packets the server declared lost are both among the dropped ones. (Walking the QUIC
    packets alone ran out of them after 138 records: 1 drop placed of 4, 1 declared loss without a drop.)"""
    db = tmp_path / "fecq.sqlite"
    keys = make_db(db, [{"label": "quic-fec-rs", "impl": "fecq", "args": {"fec": "rs:30,20"},
                         "qlogs": fecq_rs_files(), "verdicts": fecq_rs_verdicts(), "metrics": {"dct_ms": 326.8}}])
    item = timeline.build(db, timeline.find_run(db, keys["quic-fec-rs"]))
    s = item.summary
    assert (s["packets_sent"], s["repairs_sent"]) == (138, 74)
    assert (s["dropper_drops_placed"], s["repair_drops_placed"]) == (3, 1)
    assert (s["drops_declared"], s["declared_without_drop"]) == (2, 0)
    trace = [t for t in timeline.qlog.read_all(fecq_rs_files())[0] if t.vantage == "server"][0]
    walked = wire.walk(trace.events, fecq_rs_verdicts()["len"].astype(float))
    assert not any(np.isnan(w.t_s) for w in walked) and sum(w.repair for w in walked) == 74


def test_a_plain_fecq_datagram_is_placed_on_its_coalesced_packets():
    """fecq's --fec-protect stream sends handshake and control packets plain (one kind byte before the QUIC datagram,
    two in the multipath envelope): a record of two coalesced packets with that framing is matched whole, so the
    drops after it are not shifted onto the wrong packets (each was off by one before)."""
    import numpy as np

    from fecbench.analysis.traces import wire

    sizes = np.array([100.0, 50.0, 40.0])
    assert wire._source_end(sizes, 0, 28 + 1 + 150) == (2, True)      # IPv4 + UDP, the plain byte, two packets
    assert wire._source_end(sizes, 0, 48 + 2 + 150) == (2, True)      # IPv6, the envelope and the plain byte
    assert wire._source_end(sizes, 0, 28 + 5 + 150) == (2, True)      # a protected source datagram, as before


def test_analysis_never_loads_todays_descriptors():
    """Issue 61 (6): an old database is read by what it recorded, so nothing in analysis/ imports the campaigns
    layer (its descriptors, designs, runners) to interpret a run."""
    import ast

    from fecbench.host.paths import REPO_ROOT

    found = []
    for path in sorted((REPO_ROOT / "fecbench" / "analysis").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("fecbench.runners")]
    assert not found, found


def test_explain_shows_a_trace_links_capacity_beside_the_sending_rate(tmp_path):
    """Issue 71 item 5: the run records which trace it replayed and when the trace started; the sender's qlog says
    when its time 0 was. A trace of 1 opportunity a millisecond for 200 ms, then none for 800 ms, started 100.5 ms
    before the sender: 12.03 Mbit/s in the first 100 ms of the run, nothing after."""
    from fecbench.inputs.traces import load_trace, trace_used

    path = tmp_path / "on-off.down"
    path.write_text("".join(f"{ms}\n" for ms in range(1, 201)) + "1000\n")
    # 100.5 ms before the sender's time 0 (half a millisecond off the opportunities: the wall clock's float is coarse)
    used = {**trace_used(str(path), None), "started_unix_s": 1.7e9 - 0.1005, "offset_ms": 0, "loops": 0}
    qlog = fec_qlog(tmp_path / "server.qlog", packets=300)
    db = tmp_path / "trace.sqlite"
    keys = make_db(db, [{"label": "fecq", "impl": "fecq", "qlogs": [qlog], "trace": used,
                         "metrics": {"dct_ms": 300.0}}])
    run = timeline.find_run(db, keys["fecq"])
    item = timeline.build(db, run)
    cap = item.capacity
    assert set(cap["link"]) == {"cell"} and len(cap) == len(item.rate)
    bin_s = float(cap["t_s"].iloc[1] - cap["t_s"].iloc[0])
    opportunities = cap["mbit_s"] * bin_s * 1e6 / 8 / 1504
    assert round(opportunities.sum(), 6) == 100, cap   # ms 101-200 of the trace: each counted once
    early, late = cap[cap["t_s"] < 0.09]["mbit_s"], cap[cap["t_s"] > 0.11]["mbit_s"]
    assert abs(early.mean() - 12.032) < 0.5 and (late == 0).all(), cap
    assert load_trace(path).sha256 == used["sha256"]
    text = explain.describe(item)
    assert "trace link cell: capacity" in text and "sent" in text
    path.write_text("1\n")   # the trace changed since the run: said, not drawn
    assert timeline.build(db, run).capacity.empty and any("changed since the run" in n
                                                           for n in timeline.build(db, run).notes)
