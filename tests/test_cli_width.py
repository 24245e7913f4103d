"""At 80 columns nothing a user needs is cut: `fecbench status` prints each failure kind whole (it once
ended "the client and server waited f"), and the dry run's table folds long values instead of cutting them."""

from __future__ import annotations

import re
from pathlib import Path

from fecbench.runners.prepare import prepare
from tests.helpers.campaign import fake_design, fecbench

LONG = ("endpoints: p99 wake-up latency 3.41 ms > bound 2 ms (the client and server waited for a CPU); emulation: "
        "delay element p99 lateness 1.2 ms > bound 0.5 ms")


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_status_prints_a_failure_kind_whole(tmp_path: Path) -> None:
    from fecbench import db as dbmod

    db = tmp_path / "s.sqlite"
    conn = dbmod.connect(db)
    conn.execute("INSERT INTO runs (key, campaign_id, point, label, workload, status, error) VALUES "
                 "('k1', 1, 0, 'quic-with-a-rather-long-label', 'download', 'fidelity', ?)", (LONG,))
    conn.close()
    out = fecbench("status", str(db), columns=80)
    assert out.returncode == 0, out.stderr
    assert _squeezed(LONG.replace("3.41", "…").replace("1.2", "…").replace("0.5", "…")) in _squeezed(out.stdout)
    table = out.stdout.split("failures by kind")[0]
    first_cells = "".join(line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│"))
    assert first_cells == "quic-with-a-rather-long-label" and "…" not in table   # folded in its cell, not cut


def test_dry_run_table_folds_long_values(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "d.toml", {"a-label-long-enough-to-need-folding": {}}, points=1)
    seeds = {str(run.loss_seed) for run in prepare(design).runs}
    out = fecbench("run", str(design), "--db", str(tmp_path / "x.sqlite"), "--dry-run", columns=80)
    assert out.returncode == 0, out.stderr
    table = out.stdout[out.stdout.index("run(s) to do"):]
    assert "…" not in table and seeds                         # loss seeds and labels folded, never cut
    assert not (tmp_path / "x.sqlite").exists()
