"""At 80 columns nothing a user needs is cut: `fecbench status` prints each failure kind whole (it once
ended "the client and server waited f") with the range of the values measured in it (it once printed "…" in their
place), and the dry run's table folds long values instead of cutting them."""

from __future__ import annotations

import re
from pathlib import Path

from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fake_design, fecbench

LONG = ("endpoints: p99 wake-up latency 3.41 ms > bound 2 ms (the client and server waited for a CPU); emulation: "
        "delay element p99 lateness 1.2 ms > bound 0.5 ms")


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_status_prints_a_failure_kind_whole(tmp_path: Path) -> None:
    from fecbench.records import db as dbmod

    db = tmp_path / "s.sqlite"
    conn = dbmod.connect(db)
    for key, error in (("k1", LONG), ("k2", LONG.replace("3.41", "5.2"))):
        conn.execute("INSERT INTO runs (key, campaign_id, point, label, workload, status, error) VALUES "
                     "(?, 1, 0, 'quic-with-a-rather-long-label', 'download', 'fidelity', ?)", (key, error))
    conn.close()
    out = fecbench("status", str(db), columns=80)
    assert out.returncode == 0, out.stderr
    assert _squeezed(LONG.replace("3.41", "3.41–5.2")) in _squeezed(out.stdout)   # one kind, its values' range
    table = out.stdout.split("failures by kind")[0]
    first_cells = "".join(line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│"))
    assert first_cells == "quic-with-a-rather-long-label" and "…" not in table   # folded in its cell, not cut


def test_dry_run_table_folds_long_values(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "d.toml", {"a-label-long-enough-to-need-folding": {}}, points=1)
    seeds = {str(run.loss_seed) for run in prepare(design).runs}
    out = fecbench("run", str(design), "--db", str(tmp_path / "x.sqlite"), "--dry-run", columns=80)
    assert out.returncode == 0, out.stderr
    table = out.stdout[out.stdout.index("run(s) to do"):]
    assert "…" not in table and seeds                         # labels folded, never cut
    assert all(seed in table for seed in seeds)               # each loss seed whole on its line
    assert not (tmp_path / "x.sqlite").exists()


def test_every_output_place_is_checked_before_anything_is_written(tmp_path: Path) -> None:
    """Each command's output option at a file, a folder or under /proc: exit 2 naming the problem."""
    file = tmp_path / "a-file"
    file.write_text("x")
    design = fake_design(tmp_path / "d.toml", {"a": {}}, points=1)
    from fecbench.records import db as dbmod

    db = tmp_path / "db" / "s.sqlite"
    dbmod.connect(db).close()
    cases = [("run", str(design), "--dry-run", "--db", str(tmp_path)),
             ("run", str(design), "--dry-run", "--db", f"{file}/x.sqlite"),
             ("plan", str(design), "--out", str(file)),
             ("reproduce", "smoke", "--dry-run", "--results", str(file)),
             ("reproduce", "smoke", "--dry-run", "--results", "/proc/fecbench-test"),
             ("export", str(db), "-o", "/proc/x.csv"),
             ("export", str(db), "-o", str(tmp_path)),
             ("report", str(db), "-o", str(file))]
    for args in cases:
        out = fecbench(*args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and "fecbench: error:" in out.stderr, (args, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "d.toml", "db"]
