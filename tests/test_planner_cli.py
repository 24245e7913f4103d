"""Planner: the `fecbench plan` command (subprocess, as users run it; no root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

DESIGN = """
[design]
name = "tiny"
seed = 42

[space]
method = "wsp"
points = 12
candidates = 4096
[space.factors]
bw  = { low = 0.3, high = 10, unit = "Mbit/s", scale = "log" }
owd = { low = 100, high = 400, unit = "ms" }
fec = { levels = ["rs:30,20", "rlc:3,2,20"] }
"""


def fecbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fecbench", "plan", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_plan_writes_points_and_manifest_to_the_default_folder(tmp_path):
    (tmp_path / "tiny.toml").write_text(DESIGN)
    result = fecbench("tiny.toml", "--compare", "--plot", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "results" / "tiny-plan"
    frame = pd.read_csv(folder / "points.csv", index_col="point")
    assert list(frame.columns) == ["bw", "owd", "fec"] and len(frame) == 12
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["seed"] == 42 and manifest["candidates"] == 4096
    assert (folder / "pairs.png").stat().st_size > 1000
    for method in ("wsp-lhs", "wsp", "lhs", "sobol", "random"):
        assert method in result.stdout
    assert manifest["method"] == "wsp" and set(manifest["metrics"]["projections"]) >= {"worst_gap", "maxpro"}


def test_plan_json_seed_override_and_augment(tmp_path):
    (tmp_path / "tiny.toml").write_text(DESIGN)
    out = tmp_path / "o"
    result = fecbench("tiny.toml", "--json", "--seed", "3", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["manifest"]["seed"] == 3 and report["manifest"]["points"] == 12
    result = fecbench("tiny.toml", "--json", "--augment", str(out / "points.csv"), "--add", "4",
                      "--out", str(tmp_path / "more"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(pd.read_csv(tmp_path / "more" / "points.csv")) == 16


def test_bad_design_is_one_line_exit_2(tmp_path):
    (tmp_path / "bad.toml").write_text(DESIGN.replace("low = 100, high = 400", "low = 400, high = 100"))
    result = fecbench("bad.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "space.factors.owd.low" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "results").exists()


def test_augment_without_add_is_a_user_error(tmp_path):
    (tmp_path / "tiny.toml").write_text(DESIGN)
    result = fecbench("tiny.toml", "--augment", "x.csv", cwd=tmp_path)
    assert result.returncode == 2 and "--add" in result.stderr


def test_plan_writes_where_the_user_is_and_says_so(tmp_path):
    """Issue 62 item 5: `plan` writes into results/ of the current folder (as `fecbench run` its database), never the
    checkout's from elsewhere; its help and its last line say where."""
    (tmp_path / "tiny.toml").write_text(DESIGN)
    where = tmp_path / "elsewhere"
    where.mkdir()
    result = subprocess.run([sys.executable, "-m", "fecbench", "plan", str(tmp_path / "tiny.toml")], cwd=where,
                            capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    assert (where / "results" / "tiny-plan" / "points.csv").is_file()
    assert f"wrote {where / 'results' / 'tiny-plan' / 'points.csv'}" in result.stdout
    assert "results/ in the current folder; --out to choose" in result.stdout
    helped = subprocess.run([sys.executable, "-m", "fecbench", "plan", "--help"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "COLUMNS": "400"})
    assert "in the current folder" in " ".join(helped.stdout.split())
