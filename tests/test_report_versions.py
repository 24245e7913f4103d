"""`fecbench report THIS --against OTHER` (issue 60 item 5): two campaigns of one design side by side, the ECDFs
of the per-run ratios in both and of THIS ÷ OTHER by run key, what changed first (fecbench.analysis.report.versions).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.analysis_db import make_table_db
from tests.helpers.campaign import fecbench

SIZES = (1000, 50_000)


def campaign(path: Path, fec_ratio: float, *, quic_scale: float = 1.0, name: str = "versions",
             points: int = 3, reps: int = 4) -> Path:
    """quic and fec (the same stack with and without FEC), each run's DCT from its point, size and repetition (the
    same in every database), fec's = quic's × ``fec_ratio``; the keys are the same in every database made here."""
    rows = []
    for point in range(points):
        for size in SIZES:
            for rep in range(reps):
                quic = (100 + 20 * point + size / 1000 + 7 * rep) * quic_scale
                rows += [(point, "quic", size, rep, "ok", quic), (point, "fec", size, rep, "ok", quic * fec_ratio)]
    return make_table_db(path, rows, name=name)


def test_two_versions_side_by_side(tmp_path: Path) -> None:
    """Version 1 (the reference) has FEC 20 % slower than QUIC; version 2 made FEC 5 % slower and left QUIC alone.
    The report of version 2 against version 1 says both ratios, the change by key (fec: 1.05 / 1.2, quic: 1),
    and draws both."""
    from fecbench.analysis import report

    old = campaign(tmp_path / "v1.sqlite", 1.2)
    new = campaign(tmp_path / "v2.sqlite", 1.05)
    written = report.build(new, tmp_path / "out", against=old)
    for name in ("versions-ratio-ecdf", "versions-change-ecdf"):
        assert written.figures[name] == tmp_path / "out" / f"{name}.png" and written.figures[name].stat().st_size > 0
    table = written.headline["against v1.sqlite: per-run ratios in both campaigns"].set_index(["label", "size"])
    fec = table.loc[("fec", "1 kB")]
    assert fec["baseline"] == "quic" and fec["pairs"] == fec["pairs "] == 12 and fec["keys"] == 12
    assert float(fec["median ratio, v2.sqlite"]) == pytest.approx(1.05, abs=1e-3)
    assert float(fec["median ratio, v1.sqlite"]) == pytest.approx(1.2, abs=1e-3)
    assert float(fec["DCT v2.sqlite ÷ v1.sqlite by key"]) == pytest.approx(1.05 / 1.2, abs=1e-3)
    assert float(table.loc[("quic", "50 kB"), "DCT v2.sqlite ÷ v1.sqlite by key"]) == pytest.approx(1.0)
    # Said first, in words, and what changed between the two campaigns before the numbers.
    assert written.sentences[0].startswith("against v1.sqlite: fec at 1 kB: DCT here ÷ there by run key 0.875 "
                                           "(12 keys); median per-run ratio fec / quic 1.05 here (12 pairs), 1.2 there")
    assert list(written.headline)[:2] == ["against v1.sqlite: what changed",
                                          "against v1.sqlite: per-run ratios in both campaigns"]
    page = html.unescape(written.html.read_text())
    assert "versions-change-ecdf" in page and "against v1.sqlite: what changed" in page


def test_the_figure_draws_both_versions(tmp_path: Path) -> None:
    """One panel per compared label, per size one solid curve (this campaign) and one dashed (the other), each
    ending at the share of its pairs, with its median in the legend."""
    from fecbench.analysis import figures, ratios, results

    frames = {version: results.load(campaign(tmp_path / f"{version}.sqlite", ratio))
              for version, ratio in (("new", 1.05), ("old", 1.2))}
    pairs = [ratios.pairs(frame, baseline="quic").assign(version=version) for version, frame in frames.items()]
    import pandas as pd

    both = pd.concat(pairs, ignore_index=True)
    both.attrs["metric"] = "dct_ms"
    fig = figures.versions_ratio_ecdf(both)
    (ax,) = [a for a in fig.axes if a.get_visible() and a.lines]
    curves = {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}
    assert set(curves) == {"1 kB new (12, median 1.05)", "1 kB old (12, median 1.2)",
                           "50 kB new (12, median 1.05)", "50 kB old (12, median 1.2)"}
    assert {curves[k].get_linestyle() for k in curves if " new " in k} == {"-"}
    assert {curves[k].get_linestyle() for k in curves if " old " in k} == {"--"}
    steps = curves["1 kB old (12, median 1.2)"].get_xydata()
    assert np.allclose(steps[1:-1, 0], 1.2) and steps[-1, 1] == pytest.approx(1.0)


def test_the_command_and_its_bad_input(tmp_path: Path) -> None:
    old = campaign(tmp_path / "v1.sqlite", 1.2)
    new = campaign(tmp_path / "v2.sqlite", 1.05)
    out = fecbench("report", str(new), "--against", str(old), "-o", str(tmp_path / "out"))
    assert out.returncode == 0, out.stdout + out.stderr
    said = " ".join(out.stdout.split())
    assert re.search(r"against v1\.sqlite: fec at 50 kB: DCT here ÷ there by run key 0\.875", said), said
    assert (tmp_path / "out" / "versions-ratio-ecdf.png").is_file()
    other = make_table_db(tmp_path / "other.sqlite", [(5, "quic", 1000, 0, "ok", 100.0)], name="elsewhere")
    for against, why in ((other, "not the same design"), (tmp_path / "none.sqlite", "no such results database")):
        out = fecbench("report", str(new), "--against", str(against), "-o", str(tmp_path / "bad"))
        assert out.returncode == 2 and why in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert not (tmp_path / "bad").exists()      # said before anything is written
