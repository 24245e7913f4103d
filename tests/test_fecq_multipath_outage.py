"""Repair on the other path during a path's outage (issue: FEC over multipath QUIC), on the real
2-path topology: a link schedule cuts path 1 in both directions for 1 s while fecq downloads 3 MB
over both paths with RS (40,20) per-path blocks. With the repairs of path 1's blocks sent on path 2
(`repair_path = "other"`) the client rebuilds many of the datagrams the server sent on path 1 during
the outage; with the repairs on path 1 itself (`same`) they are cut with the data they protect."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fecbench.analysis import tables
from fecbench.analysis.studies import path_metrics
from tests.helpers.campaign import FECQ, fecbench, queue_drops, rows, two_path_design

OUTAGE_S = (0.3, 1.3)


def _design(tmp_path: Path) -> Path:
    (tmp_path / "cut.toml").write_text(textwrap.dedent(f"""
        [schedule]
        description = "path 1 cut for 1 s"
        [[change]]
        link = "path1"
        at_s = {OUTAGE_S[0]}
        outage_ms = {(OUTAGE_S[1] - OUTAGE_S[0]) * 1000:g}
        direction = "both"
        """))
    # Per-path idle timeout above the outage: path 1 stays open, so its datagrams keep being lost.
    labels = {where: f'multipath = "on", fec = "rs:40,20", repair_path = "{where}", path_idle_timeout = "5"'
              for where in ("other", "same")}
    # Queues far above what 3 MB can fill: the outage is the only loss (a BDP queue overflows in slow
    # start by 60–430 datagrams a run, and rebuilding those would blur what the repair path changes).
    return two_path_design(tmp_path, "outage", [(10, 10, 10, 10, 3000, 3000)], impls=labels,
                           extra=f'schedule = "{tmp_path / "cut.toml"}"\nverdict_log = true',
                           loss='model = "uniform"\np = 0.0', workload='kind = "download"\nsizes = ["3MB"]')


@pytest.mark.require_root
@pytest.mark.slow
def test_repairs_on_the_other_path_rebuild_what_an_outage_cut(tmp_path: Path) -> None:
    assert FECQ.exists(), "build fecq first (make fecq)"
    db = tmp_path / "outage.sqlite"
    out = fecbench("run", str(_design(tmp_path)), "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    runs = {r["label"]: r for r in rows(db, "SELECT * FROM runs")}
    assert {label: r["status"] for label, r in runs.items()} == {"other": "ok", "same": "ok"}
    # The outage happened in every run, on schedule, and cut path 1's server → client datagrams
    # (no other loss: p = 0 and no queue overflowed).
    events = tables.link_events(db)
    for key in (r["key"] for r in runs.values()):
        mine = events[events["run_key"] == key]
        assert sorted(mine["kind"]) == ["outage-end"] * 2 + ["outage-start"] * 2
    cut = {}
    for r in rows(db, "SELECT run_key, link, direction, data FROM verdict_logs"):
        log = np.load(io.BytesIO(r["data"]), allow_pickle=False)
        cut[(r["run_key"], r["link"], r["direction"])] = int(np.asarray(log["verdict"]).sum())
    for r in runs.values():
        assert cut[(r["key"], "path1", "reverse")] > 0 and cut[(r["key"], "path2", "reverse")] == 0
    assert not any(queue_drops(db).values()), queue_drops(db)
    # What the client rebuilt of the datagrams the server sent on path 1 (the client's view of path 1).
    per_path = path_metrics.path_metrics(db)
    rebuilt = {label: int(per_path[(per_path["label"] == label) & (per_path["path"] == 1)
                                   & (per_path["side"] == "client")]["recovered"].iloc[0])
               for label in runs}
    print(f"path 1 datagrams rebuilt by the client: {rebuilt}")
    assert rebuilt["other"] >= 20, rebuilt  # measured: 50–85 (same: 0–2)
    assert rebuilt["other"] > 3 * rebuilt["same"], rebuilt
