"""Page loads for real (root, Mininet, fecq): designs/pageload-small.toml end to end (every run ok, each activity's
times recorded, the report's page loads with their intervals, the page-load notebook on its database). The load
time against a hand computation: tests/test_page_timing.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.campaign import ROOT, fecbench, rows

FECQ = ROOT / "quic-impls" / "fecq" / "target" / "release" / "fecq"


@pytest.mark.require_root
def test_the_small_page_load_design(tmp_path: Path) -> None:
    if not FECQ.exists():
        pytest.skip(f"{FECQ} is not built (make bootstrap)")
    db = tmp_path / "pages.sqlite"
    out = fecbench("run", str(ROOT / "designs" / "pageload-small.toml"), "--db", str(db), timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    runs = rows(db, "SELECT r.key, r.status, r.label, r.size, m.dct_ms, m.json FROM runs r "
                    "LEFT JOIN metrics m ON m.run_key = r.key")
    assert len(runs) == 12 and [r for r in runs if r["status"] != "ok"] == []
    for run in runs:
        page = json.loads(run["json"])["page"]
        assert page["load_ms"] == run["dct_ms"] > 0 and len(page["activities"]) == 18
        assert all(a["end_ms"] is not None and a["end_ms"] <= page["load_ms"] + 1e-6 for a in page["activities"])
    report = tmp_path / "report"
    out = fecbench("report", str(db), "-o", str(report))
    assert out.returncode == 0, out.stdout + out.stderr
    html = (report / "index.html").read_text()
    # the page loads' table with each median's interval, and the median loads' waterfall
    assert "page load times per label and point" in html and "median_low_ms" in html
    assert (report / "page-waterfall.png").stat().st_size > 1000
    # the page-load notebook on the same database, executed headless
    from tests.test_notebooks import execute, pngs

    execute(ROOT / "notebooks" / "07-page-loads.ipynb", db, tmp_path / "nb")
    assert set(pngs(tmp_path / "nb")) == {"page-load-ecdf", "page-load-vs-loss", "page-waterfall"}
