"""The report's words name the files it wrote (issue 62 item 5): a campaign compared against several baselines
writes `point-ratios-vs-<baseline>.csv` and `pairs-vs-<baseline>.csv`, and each headline's note names its own."""

from __future__ import annotations

import re
from pathlib import Path

from fecbench.analysis.report import build
from tests.test_baselines import _two_path_db


def test_every_csv_the_page_names_was_written(tmp_path: Path) -> None:
    written = build(_two_path_db(tmp_path / "two.sqlite"), tmp_path / "out")
    files = {name for name in written.files if name.endswith(".csv")}
    assert "pairs-vs-fecq-sp.csv" in files and "pairs.csv" not in files
    for name, note in written.notes.items():
        if name.startswith("DCT: ratio of medians label / "):
            base = name.removeprefix("DCT: ratio of medians label / ").split(" ")[0]
            assert f"point-ratios-vs-{base}.csv" in note and f"pairs-vs-{base}.csv" in note, note
    page = written.html.read_text()
    named = set(re.findall(r"[\w.-]+\.csv", page))
    assert named and named <= files | {f"{Path(tmp_path / 'two.sqlite').stem}.csv"}, named - files
    for name in named & files:
        assert (tmp_path / "out" / name).is_file()
