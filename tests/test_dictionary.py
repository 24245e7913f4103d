"""The runs frame's data dictionary (fecbench.analysis.dictionary): every column a database yields has its unit,
source and meaning; notebooks/README.md carries the same table; `fecbench export --table dictionary` writes it."""

from __future__ import annotations

from pathlib import Path

from fecbench.analysis import dictionary, results
from fecbench.analysis.export import export
from tests.helpers.analysis_db import make_download_db, make_messages_db

ROOT = Path(__file__).resolve().parent.parent


def test_every_column_is_documented(tmp_path: Path) -> None:
    one = make_download_db(tmp_path / "d.sqlite")
    two = make_messages_db(tmp_path / "m.sqlite")
    frame = results.load([one, two])
    table = dictionary.dictionary(frame)
    assert list(table["column"]) == list(frame.columns)
    undocumented = table.loc[table["unit"] == "?", "column"].tolist()
    assert not undocumented, f"columns without an entry in fecbench.analysis.dictionary.COLUMNS: {undocumented}"
    assert set(table.loc[table["source"] == "points", "column"]) == set(frame.attrs["factors"])
    stale = set(dictionary.COLUMNS) - set(frame.columns)
    assert not stale, f"entries for columns results.load no longer yields: {stale}"


def test_the_readme_carries_the_dictionary_and_export_writes_it(tmp_path: Path) -> None:
    assert dictionary.markdown() in (ROOT / "notebooks" / "README.md").read_text(), \
        "notebooks/README.md's data dictionary is not fecbench.analysis.dictionary.markdown(): paste it again"
    db = make_download_db(tmp_path / "d.sqlite")
    lines = export(db, "csv", tmp_path / "dict.csv", "dictionary").read_text().splitlines()
    assert lines[0] == "column,unit,source,meaning" and any(line.startswith("dct_ms,ms,") for line in lines)
