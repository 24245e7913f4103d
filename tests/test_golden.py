"""fecbench's golden campaigns (golden/, issue 60 item 4): every golden design has its recorded database, small, of
that very design, named in golden/CHANGELOG.md (a re-recording needs its line); the stage (golden/check, `make
golden`) fails when a re-run moved and passes when it did not. The stage's real campaigns run in `.ci/run`; here a
stand-in for `fecbench run` hands the stage the recording itself, or the recording with every completion time 1.5 ×
(as a slower link, e.g. a changed link rate, makes them), and the stage's own compare judges it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.campaign import ROOT

GOLDEN = ROOT / "golden"
DESIGNS = sorted(GOLDEN.glob("*.toml"))


def test_every_golden_design_has_a_small_recording_of_itself() -> None:
    from fecbench.runners.experiment.design import parse_design

    assert {d.stem for d in DESIGNS} == {"networking2019-small", "no-loss", "rquic-wifi", "short-messages", "two-path"}
    for design in DESIGNS:
        db = design.with_suffix(".sqlite")
        assert db.is_file(), f"{design} has no recording: make golden-record NAMES={design.stem}"
        assert db.stat().st_size < 1_000_000, f"{db}: {db.stat().st_size} bytes"
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
            hashes = {row[0] for row in conn.execute("SELECT design_hash FROM campaigns")}
            kinds = {row[0] for row in conn.execute("SELECT kind FROM artifacts")}
        assert hashes == {parse_design(design).hash}, f"{db} was recorded from another {design.name}: re-record it"
        assert "pcap" not in kinds


def test_every_golden_database_is_named_in_the_changelog() -> None:
    changelog = (GOLDEN / "CHANGELOG.md").read_text()
    for design in DESIGNS:
        digest = hashlib.sha256(design.with_suffix(".sqlite").read_bytes()).hexdigest()[:12]
        assert digest in changelog, (f"golden/{design.stem}.sqlite ({digest}) was re-recorded without a line in "
                                     "golden/CHANGELOG.md saying why")


STAND_IN = """#!{python}
# `fecbench run DESIGN --db DB` hands over DESIGN's golden recording (its DCTs times SCALE); the rest is fecbench's.
import os, shutil, sqlite3, sys
from pathlib import Path
args = sys.argv[1:]
if args[:1] == ["run"]:
    design, db = Path(args[1]), Path(args[args.index("--db") + 1])
    shutil.copy(design.with_suffix(".sqlite"), db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE metrics SET dct_ms = dct_ms * ?", (float(os.environ["SCALE"]),))
        noise = float(os.environ.get("NOISE", "0"))   # each run's DCT times its own factor: spread, not shift
        if noise:
            import random
            rng = random.Random(1)
            for (key,) in conn.execute("SELECT run_key FROM metrics").fetchall():
                conn.execute("UPDATE metrics SET dct_ms = dct_ms * ? WHERE run_key = ?",
                             (rng.choice([1 - noise, 1 + noise]), key))
    sys.exit(0)
os.execv({fecbench!r}, [{fecbench!r}, *args])
"""


@pytest.mark.parametrize(("scale", "noise", "expected"), [(1.0, 0.0, 0), (1.5, 0.0, 1), (1.0, 0.3, 0)])
def test_the_stage_fails_when_a_number_moved(tmp_path: Path, scale: float, noise: float, expected: int) -> None:
    """Unchanged: passes; every DCT 1.5×: fails (worse); each run ±30 % at random, no shift: undecided, said and
    not failed (the twins' noise, designs/README.md)."""
    stand_in = tmp_path / "fecbench"
    stand_in.write_text(STAND_IN.format(python=sys.executable, fecbench=str(Path(sys.executable).parent / "fecbench")))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    out = subprocess.run([str(GOLDEN / "check"), "--out", str(tmp_path / "out"), "two-path"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=False,
                         env={**os.environ, "FECBENCH": str(stand_in), "SCALE": str(scale), "NOISE": str(noise),
                              "COLUMNS": "200"})
    assert out.returncode == expected, out.stdout[-3000:] + out.stderr[-2000:]
    compare = (tmp_path / "out" / "two-path" / "compare.txt").read_text()
    if expected:
        assert "differs: " in compare and "worse" in compare and "re-record it" in out.stdout
    elif noise:
        assert "undecided" in compare and "golden two-path: undecided" in out.stdout, out.stdout[-2000:]
    else:
        assert "equivalent: every group the same within 10 %" in compare


SLOWER_LINK = """#!{python}
# `fecbench` with one deliberate fault: every shaped link's rate halved where the topology resolves the design's
# values, as a regression in fecbench's own link code would do it (the link is then built, read back and checked
# as resolved: nothing but the numbers can show it). The rest is fecbench's.
import dataclasses, sys
from fecbench.emulation import spec
resolve = spec.Topology.resolve
def halved(self, values):
    out = resolve(self, values)
    for pair in out.values():
        for direction, shaping in pair.items():
            if shaping.bw is not None:
                pair[direction] = dataclasses.replace(shaping, bw=shaping.bw / 2)
    return out
spec.Topology.resolve = halved
from fecbench.cli import main
sys.argv[0] = "fecbench"
main()
"""


@pytest.mark.skipif(not os.environ.get("FECBENCH_GOLDEN_STAGE"),
                    reason="real golden campaigns on a quiet machine: run by the golden stage (make golden, .ci/run)")
def test_the_stage_fails_on_a_changed_link_rate(tmp_path: Path) -> None:
    """Issue 60: the stage's lossless campaign (no-loss, 10 real runs) with fecbench's link rate halved by a
    deliberate fault: the compare finds the download times worse and the stage fails (exit 1, 'differs')."""
    fault = tmp_path / "fecbench"
    fault.write_text(SLOWER_LINK.format(python=sys.executable))
    fault.chmod(fault.stat().st_mode | stat.S_IEXEC)
    out = subprocess.run([str(GOLDEN / "check"), "--out", str(tmp_path / "out"), "no-loss"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, check=False,
                         env={**os.environ, "FECBENCH": str(fault), "COLUMNS": "200"})
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    compare = (tmp_path / "out" / "no-loss" / "compare.txt").read_text()
    assert "differs: " in compare and "worse" in compare, compare
    assert "re-record it" in out.stdout
