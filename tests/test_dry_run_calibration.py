"""`fecbench run --dry-run --jobs auto` says what the calibration will run before the campaign (issue 62 item 5):
its serial pilot's runs (kept as results), the networks it tries and about how long."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.campaign import fake_design, fecbench


def test_the_dry_run_says_what_the_calibration_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FECBENCH_CALIBRATIONS", str(tmp_path / "none.json"))   # no kept calibration here
    monkeypatch.setenv("FECBENCH_HISTORY", str(tmp_path / "history.txt"))
    design = fake_design(tmp_path / "camp.toml", {"a": {}, "b": {}}, points=6)
    out = fecbench("run", str(design), "--db", str(tmp_path / "x.sqlite"), "--dry-run", "--jobs", "auto",
                   "--jobs-pilot", "5", columns=400)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "--jobs auto: calibrates first: a serial pilot of 5 of the runs to do (kept as results: about " in text
    assert "then the same 5 runs on 2, 4, 8 networks at once" in text, text
    assert "(none beyond 70% of the CPUs by the serial pilot's CPU use, that limit itself tried)" in text
    assert "measured up to 2 times and stopping at the first that changes the results (against serial twins" in text
    assert "--dry-run says what it runs" in " ".join((out.stdout + out.stderr).split())
    plain = fecbench("run", str(design), "--db", str(tmp_path / "x.sqlite"), "--dry-run", columns=400)
    assert "calibrates first" not in plain.stdout
