"""The report opens on sentences generated from its statistics (fecbench.analysis.report.sentences)."""

from __future__ import annotations

import re
from pathlib import Path

from fecbench.analysis import ratios
from fecbench.analysis.report import REPORT_SEED, build, sentences
from tests.helpers.analysis_db import DOWNLOAD_LABELS, SIZES, make_download_db, make_messages_db


def test_download_sentences_say_what_the_points_say(tmp_path: Path) -> None:
    db = make_download_db(tmp_path / "d.sqlite", points=6, repetitions=3)
    written = build(db, tmp_path / "out")
    pairs = ratios.pairs(db, baseline="quic")
    points = ratios.point_ratios(pairs, seed=REPORT_SEED)
    lines = written.sentences
    assert lines == sentences.downloads(points, pairs, "quic", REPORT_SEED)
    per_size = [s for s in lines if "design points" in s]
    assert len(per_size) == (len(DOWNLOAD_LABELS) - 1) * len(SIZES)
    first = points[(points["label"] == "quic-fec-rlc") & (points["size"] == SIZES[0])]
    faster = int((first["ratio_high"] < 1).sum()), int((first["ratio_low"] < 1).sum())
    count = f"{faster[0]}" if faster[0] == faster[1] else f"{faster[0]}–{faster[1]}"
    assert per_size[0].startswith(f"quic-fec-rlc was faster than quic at {count} of {len(first)} design points "
                                  "for 1 kB downloads (median ratio ")
    assert re.search(r"95 % interval \[[0-9.]+, [0-9.]+\]", per_size[0])
    # The synthetic campaign has a failed and a timed-out quic-fec-rlc run: said, not hidden.
    left_out = next(s for s in lines if s.startswith("quic-fec-rlc:"))
    assert "excluded: 1 (1 label failed)" in left_out and "censored at the time limit: 1" in left_out
    page = written.html.read_text()
    assert page.index("In short") < page.index("Headline") and per_size[0] in page.replace("&#x27;", "'")


def test_messages_sentences(tmp_path: Path) -> None:
    db = make_messages_db(tmp_path / "m.sqlite")
    written = build(db, tmp_path / "out")
    assert any(s.startswith("quic-fec-rs received more data than udp in ") for s in written.sentences)
