"""Multipath analysis: per-path factor ratios, packets per path from the droppers, and their figures.
Pure logic on hand-made frames (no root); `path_traffic` on the real multipath smoke campaign (root)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench.analysis import figures, results, tables
from tests.helpers.campaign import CLIENT_PACKETS_AFTER_COUNTERS, rows


def test_path_asymmetry_ratios_and_attrs() -> None:
    frame = pd.DataFrame({"bw_1": [10.0, 5.0, 4.0], "bw_2": [5.0, 10.0, 0.0], "owd_1": [0.0, 20.0, 10.0],
                          "owd_2": [10.0, 10.0, 10.0], "label": ["a", "b", "c"]})
    frame.attrs["labels"] = ["a", "b", "c"]
    out = tables.path_asymmetry(frame)
    assert out.attrs["asymmetry"] == ["bw_1/bw_2", "owd_1/owd_2"] and out.attrs["labels"] == ["a", "b", "c"]
    assert out["bw_1/bw_2"].tolist()[:2] == [2.0, 0.5] and math.isnan(out["bw_1/bw_2"].iloc[2])
    assert math.isnan(out["owd_1/owd_2"].iloc[0]) and out["owd_1/owd_2"].iloc[1] == 2.0  # 0 ms: no ratio
    assert "bw_1/bw_2" not in frame  # the input is left alone
    single = tables.path_asymmetry(pd.DataFrame({"bw": [1.0], "owd": [2.0]}))
    assert single.attrs["asymmetry"] == [] and list(single.columns) == ["bw", "owd"]


def _traffic() -> pd.DataFrame:
    """Two runs of two labels on two paths: sp keeps everything on path 1, mp splits 60/40."""
    base = {"status": "ok", "workload": "download", "point": 0, "repetition": 0, "bw_1": 10.0, "bw_2": 5.0}
    rows_ = []
    for size in (100_000, 1_000_000):
        for label, share_1 in (("sp", 1.0), ("mp", 0.6)):
            for path, share in ((1, share_1), (2, 1 - share_1)):
                rows_.append({**base, "key": f"{label}{size}", "label": label, "size": size, "path": path,
                              "packets_down": 100 * share, "packets_up": 30 * share, "share_down": share,
                              "share_up": share})
    frame = pd.DataFrame(rows_)
    frame.attrs.update(labels=["mp", "sp"], sizes=[100_000, 1_000_000])
    return frame


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def test_path_share_figures() -> None:
    traffic = _traffic()
    fig = figures.path_share(traffic)
    assert len([ax for ax in fig.axes if ax.get_visible() and ax.axison]) == 2  # one panel per size
    bars = [p for p in fig.axes[0].patches]
    assert sorted(round(b.get_width(), 3) for b in bars) == [0.0, 0.4, 0.6, 1.0]
    assert _png(fig).startswith(b"\x89PNG")
    fig = figures.path_share_vs_capacity(traffic, labels=["mp"])
    ax = fig.axes[0]
    points = np.vstack([c.get_offsets() for c in ax.collections])
    assert np.allclose(points[:, 0], 10 / 15) and np.allclose(points[:, 1], 0.6)
    assert _png(fig).startswith(b"\x89PNG")


def test_path_figures_on_nothing_say_so() -> None:
    empty = _traffic().iloc[0:0]
    for fig in (figures.path_share(empty), figures.path_share_vs_capacity(empty),
                figures.path_share_vs_capacity(_traffic().drop(columns=["bw_1", "bw_2"]))):
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert any(text.startswith("no ") for text in texts), texts


def test_ratio_vs_asymmetry_log2_axis() -> None:
    pairs = pd.DataFrame({"design_hash": "h", "workload": "download", "point": [0, 1, 2, 3], "repetition": 0,
                          "size": 1000, "label": "mp", "baseline": "sp", "ratio": [0.5, 0.8, 1.0, 1.2],
                          "bw_1": [2.0, 8.0, 4.0, 16.0], "bw_2": [8.0, 2.0, 4.0, 1.0]})
    pairs.attrs.update(metric="dct_ms", factors=["bw_1", "bw_2"], labels=["mp", "sp"], sizes=[1000])
    pairs = tables.path_asymmetry(pairs)
    fig = figures.ratio_vs_factors(pairs, pairs.attrs["asymmetry"], label="mp", log2_factors=["bw_1/bw_2"])
    assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_xlabel() == "bandwidth ratio path 1 / path 2"
    linear = figures.ratio_vs_factors(pairs, ["bw_1"], label="mp")
    assert linear.axes[0].get_xscale() == "linear"


@pytest.mark.require_root
@pytest.mark.slow
def test_path_traffic_on_real_multipath_campaign(multipath_db: Path) -> None:
    traffic = tables.path_traffic(multipath_db)
    assert set(traffic["path"]) == {1, 2} and len(traffic) == 2 * len(results.load(multipath_db))
    shares = traffic.groupby("key")["share_down"].sum()
    assert np.allclose(shares, 1.0)
    sp = traffic[traffic["label"] == "tquic-sp"]
    assert (sp[sp["path"] == 1]["share_down"] == 1.0).all() and (sp[sp["path"] == 2]["packets_down"] == 0).all()
    mp = traffic[(traffic["label"] == "tquic-mp-minrtt") & (traffic["path"] == 2)]
    assert (mp["packets_down"] > 0).all() and (mp["packets_up"] > 0).all()
    # The counts are the droppers' matched packets of each path's lossy link.
    stats = rows(multipath_db, "SELECT run_key, link, direction, matched FROM link_stats WHERE link = 'path2'")
    down = {s["run_key"]: s["matched"] for s in stats if s["direction"] == "reverse"}
    assert {k: int(v) for k, v in zip(mp["key"], mp["packets_down"], strict=True)} == \
        {k: down[k] for k in mp["key"]}
    assert {"bw_1", "bw_2", "owd_1", "owd_2", "p_1", "p_2"} <= set(traffic.columns)


def test_single_path_label() -> None:
    assert tables.single_path_label(_traffic()) == "sp"
    assert tables.single_path_label(_traffic()[lambda t: t["path"] == 1]) is None
    assert tables.single_path_label(_traffic().iloc[0:0]) is None


@pytest.mark.require_root
@pytest.mark.slow
def test_report_on_real_multipath_campaign(multipath_db: Path, tmp_path: Path) -> None:
    """`fecbench report` compares multipath with the single-path label and shows the traffic per path."""
    from fecbench.analysis.report import build

    report = build(multipath_db, tmp_path)
    names = {p.name for p in tmp_path.glob("*.png")}
    assert {"path-share-down.png", "dct-ratio-ecdf.png", "dct-ratio-vs-factors-tquic-mp-minrtt.png"} <= names, names
    assert "DCT ratio label / tquic-sp" in report.tables
    per_path = report.tables["per-path endpoint metrics (medians)"]
    assert set(per_path["label"]) == {"fecq-mp-rs"} and set(per_path["path"]) == {1, 2}


def _endpoint_view(sent: int, repair: int, recovered: int) -> dict:
    return {"local": "10.0.0.1", "remote": "10.0.1.1:4433", "quic_path_id": 0, "packets_sent": sent,
            "bytes_sent": sent * 1200, "repair_sent": repair, "packets_received": sent, "bytes_received": 0,
            "recovered": recovered, "fec_ignored": 0, "quic_packets_sent": sent - repair, "lost": 1,
            "lost_bytes": 1200, "congestion_events": 1, "cwnd": 12000, "rtt_ms": 20.5}


def test_path_metrics_flattens_each_side_of_each_path(tmp_path: Path) -> None:
    """Hand-made metrics JSON: one row per path and side, shares of each side's sends, nothing for a
    single-path run, a side that never saw a path left out."""
    from fecbench.analysis.studies import path_metrics
    from fecbench.records import db as dbmod
    from tests.helpers.analysis_db import make_table_db

    db = make_table_db(tmp_path / "paths.sqlite", [(0, "mp", 1000, 0, "ok", 10.0), (0, "sp", 1000, 0, "ok", 12.0)])
    mp_json = {"dct_ms": 10.0, "paths": [
        {"path": 1, "client_address": "10.0.0.1", "server_address": "10.0.1.1:4433",
         "client": _endpoint_view(30, 3, 0), "server": _endpoint_view(75, 25, 2)},
        {"path": 2, "client_address": "10.0.0.2", "server_address": "10.0.2.1:4433",
         "client": _endpoint_view(10, 0, 1), "server": None}]}
    con = dbmod.connect(db)
    key = con.execute("SELECT key FROM runs WHERE label = 'mp'").fetchone()[0]
    with dbmod.transaction(con):
        con.execute("UPDATE metrics SET json = ? WHERE run_key = ?", (json.dumps(mp_json), key))
    con.close()
    frame = path_metrics.path_metrics(db)
    assert list(zip(frame["path"], frame["side"], strict=True)) == [(1, "client"), (1, "server"), (2, "client")]
    assert set(frame["label"]) == {"mp"} and set(frame["key"]) == {key}
    client = frame[frame["side"] == "client"]
    assert client["share_sent"].tolist() == [0.75, 0.25]
    assert frame[frame["side"] == "server"]["share_sent"].tolist() == [1.0]
    assert frame["recovered"].tolist() == [0.0, 2.0, 1.0] and frame["rtt_ms"].tolist() == [20.5] * 3
    traffic = path_metrics.as_traffic(frame)
    assert traffic["packets_up"].tolist() == [30.0, 10.0] and traffic["share_down"].tolist()[0] == 1.0
    assert math.isnan(traffic["packets_down"].iloc[1])  # the server never saw path 2
    empty = path_metrics.path_metrics(make_table_db(tmp_path / "none.sqlite", [(0, "sp", 1000, 0, "ok", 12.0)]))
    assert empty.empty and {"path", "side", "share_sent", "recovered"} <= set(empty.columns)


@pytest.mark.require_root
@pytest.mark.slow
def test_path_metrics_on_real_multipath_campaign(multipath_db: Path, tmp_path: Path) -> None:
    """fecq's multipath runs: both paths carry data, and what the client says it sent on each path
    is what the path's dropper counted in that direction (plus the close, sent after the count)."""
    from fecbench.analysis.export import export
    from fecbench.analysis.studies import path_metrics

    frame = path_metrics.path_metrics(multipath_db)
    fecq = frame[frame["label"] == "fecq-mp-rs"]
    assert len(fecq) and set(fecq["path"]) == {1, 2} and set(fecq["side"]) == {"client", "server"}
    server = fecq[fecq["side"] == "server"]
    assert (server.groupby("path")["packets_sent"].sum() > 0).all()
    assert np.allclose(server.groupby("key")["share_sent"].sum(), 1.0)
    counted = {(s["run_key"], s["link"], s["direction"]): s["matched"] for s in
               rows(multipath_db, "SELECT run_key, link, direction, matched FROM link_stats")}
    for _, row in fecq.iterrows():
        direction = "forward" if row["side"] == "client" else "reverse"
        at_dropper = counted[(row["key"], f"path{row['path']}", direction)]
        assert row["packets_sent"] <= at_dropper, (row["side"], row["path"], at_dropper)
        # The client sends little after reading its counters (CLIENT_PACKETS_AFTER_COUNTERS). The server
        # lives on until it is stopped (the reply, then ACKs and probes until the close arrives), so only
        # the client's side is bounded.
        if row["side"] == "client":
            assert at_dropper <= row["packets_sent"] + CLIENT_PACKETS_AFTER_COUNTERS, (row["path"], at_dropper)
    target = export(multipath_db, "csv", tmp_path / "paths.csv", table="paths")
    assert len(pd.read_csv(target)) == len(frame)


def test_setup_shows_the_time_before_the_transfer_beside_the_twin() -> None:
    """A multipath label that opens its paths before its request: its set-up and wall time beside its
    single-path twin's, and the difference (issue 49: a multipath penalty outside dct_ms must show)."""
    from fecbench.analysis.studies import multipath_study

    def run(label: str, args: dict, handshake: float, setup: float, dct: float, wall: float) -> dict:
        return {"label": label, "impl": "fecq", "impl_args": json.dumps(args), "status": "ok", "size": 30_000,
                "handshake_ms": handshake, "setup_ms": setup, "dct_ms": dct, "client_wall_ms": wall}
    frame = pd.DataFrame([run("sp", {}, 12.0, 14.0, 35.0, 66.0), run("sp", {}, 13.0, 15.0, 37.0, 70.0),
                          run("mp", {"multipath": "on"}, 12.5, 76.0, 34.5, 167.0),
                          run("mp", {"multipath": "on"}, 1012.0, 1075.0, 35.0, 1170.0)])
    table = multipath_study.setup(frame).set_index("label")
    assert table.loc["mp", "baseline"] == "sp" and (table.loc["mp", "runs_mp"], table.loc["mp", "runs_sp"]) == (2, 2)
    assert table.loc["mp", "setup_ms_added"] == pytest.approx((76.0 + 1075.0) / 2 - 14.5)
    assert table.loc["mp", "dct_ms_added"] == pytest.approx(34.75 - 36.0)
    assert table.loc["mp", "client_wall_ms_mp"] == pytest.approx(668.5)
    # An implementation that reports no set-up time: NaN, the rest still compared.
    table = multipath_study.setup(frame.drop(columns="setup_ms")).set_index("label")
    assert math.isnan(table.loc["mp", "setup_ms_added"]) and table.loc["mp", "handshake_ms_sp"] == 12.5
