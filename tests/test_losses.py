"""Losses by cause (fecbench.analysis.traces.losses) on a database written by the real schema: the loss model's
drops apart from a schedule's outages, queue drops from the shaper and the delay element, the sender's
declared and spurious losses, and what remains unexplained."""

from __future__ import annotations

import json
from pathlib import Path

from fecbench.analysis.traces.losses import link_losses, run_losses
from fecbench.records import db as dbmod


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
    # A download's data goes the reverse way: 13 drops, 11 declared for real; 2 FEC rebuilt, none other.
    assert k1[["data_drops", "rebuilt", "undeclared", "unexplained"]].tolist() == [13, 2, 0, 0]
    # An upload's forward: 10 drops, 3 declared, no recoveries reported: 7 never declared.
    assert runs.loc["k2", ["data_drops", "rebuilt", "undeclared", "unexplained"]].tolist() == [10, 0, 7, 0]
    assert (runs[["rebuilt", "undeclared", "unexplained"]].dropna() >= 0).all().all()   # parts, never a residual


def test_declared_losses_no_drop_explains_are_unexplained() -> None:
    from fecbench.analysis.traces.losses import reconcile

    parts = reconcile(drops=4, declared=10, spurious=1, recovered=3)
    assert parts == {"data_drops": 4, "rebuilt": 0, "undeclared": 0, "unexplained": 5}
    many = reconcile(drops=250, declared=20, spurious=0, recovered=216)   # issue 48: was −230 "unexplained"
    assert many == {"data_drops": 250, "rebuilt": 216, "undeclared": 14, "unexplained": 0}
    assert 20 - 0 + many["rebuilt"] + many["undeclared"] - many["unexplained"] == many["data_drops"]


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
