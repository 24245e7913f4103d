"""Losses by cause (fecbench.analysis.traces.losses) on a database written by the real schema: the loss model's
drops apart from a schedule's outages, queue drops from the shaper and the delay element, the sender's
declared and spurious losses, and what remains unexplained."""

from __future__ import annotations

import json
from pathlib import Path

from fecbench import db as dbmod
from fecbench.analysis.traces.losses import link_losses, run_losses


def _db(path: Path) -> Path:
    conn = dbmod.connect(path)
    conn.execute("INSERT INTO runs (key, campaign_id, point, label, workload, status) VALUES "
                 "('k1', 1, 0, 'quic', 'download', 'ok'), ('k2', 1, 0, 'quic', 'upload', 'ok'), "
                 "('k3', 1, 0, 'quic', 'download', 'pending')")
    delay = {"delay": {"ab": {"drop_queue": 2}, "ba": {"drop_queue": 1}}, "qdiscs": [{"drops": 3}]}
    for key in ("k1", "k2"):
        for direction, dropped, outage in (("forward", 5, 0), ("reverse", 9, 4)):
            conn.execute("INSERT INTO link_stats (run_key, link, direction, seen, dropped, outage_dropped, delay_json) "
                         "VALUES (?, 'bottleneck', ?, 100, ?, ?, ?)", (key, direction, dropped, outage,
                                                                       json.dumps(delay)))
    metrics = {"lost": 99, "recovered": 2, "sender": {"lost": 12, "spurious_lost": 1}}
    conn.execute("INSERT INTO metrics (run_key, json) VALUES ('k1', ?), ('k2', ?)",
                 (json.dumps(metrics), json.dumps({"lost": 3})))
    conn.close()
    return path


def test_drops_by_cause_and_what_the_stack_declared(tmp_path: Path) -> None:
    db = _db(tmp_path / "l.sqlite")
    links = link_losses(db).set_index(["run_key", "direction"])
    assert links.loc[("k1", "reverse"), ["dropper", "outage", "queue"]].tolist() == [5, 4, 4]   # 3 tbf + 1 delay
    assert links.loc[("k1", "forward"), ["dropper", "outage", "queue"]].tolist() == [5, 0, 5]
    runs = run_losses(db).set_index("run_key")
    assert "k3" not in runs.index
    k1 = runs.loc["k1"]
    assert (k1["declared_lost"], k1["spurious"], k1["recovered"]) == (12, 1, 2)
    assert k1["unexplained"] == 12 - (5 + 4 + 4) - 1          # a download's data goes the reverse way
    assert runs.loc["k2", "unexplained"] == 3 - (5 + 0 + 5)   # an upload's forward


def test_export_writes_losses_and_the_artifacts_with_their_files(tmp_path: Path) -> None:
    from fecbench.analysis.export import export

    db = _db(tmp_path / "l.sqlite")
    conn = dbmod.connect(db)
    conn.execute("INSERT INTO artifacts VALUES ('k1', 'qlog', 'k1/client.sqlog.gz', 123, 'failed')")
    conn.close()
    artifacts = (tmp_path / "a.csv").read_text() if export(db, "csv", tmp_path / "a.csv", "artifacts") else ""
    assert f"k1,qlog,{tmp_path.resolve()}/l.artifacts/k1/client.sqlog.gz,123,failed" in artifacts
    losses = export(db, "csv", tmp_path / "l.csv", "losses").read_text().splitlines()
    assert losses[0].startswith("run_key,dropper_forward") and len(losses) == 3
