"""The reproduce page agrees with itself and with `fecbench status` (issue 48, item 5): run counts read from the
database as status reads them, beside what this session started (chosen runs and re-runs named apart); one
"left pending" figure per campaign over its batches; a need never printed as nothing; quoted table values with
their column names."""

from __future__ import annotations

import json
from pathlib import Path

from fecbench.verdicts import allocate, execute, page
from fecbench.verdicts.pack import load_pack
from fecbench.verdicts.profiles import Target
from tests.helpers.analysis_db import make_download_db
from tests.helpers.campaign import fecbench


def test_the_pages_counts_are_status_counts(tmp_path: Path) -> None:
    db = make_download_db(tmp_path / "c.sqlite", points=3, repetitions=2, failures=3)
    status = json.loads(fecbench("status", str(db), "--json").stdout)["statuses"]
    text = page.database_counts(db)
    assert text == f"{sum(status.values())} runs: " + ", ".join(f"{k} {n}" for k, n in sorted(status.items()))
    assert page.database_counts(tmp_path / "none.sqlite") == "no database yet"


def test_batches_of_one_campaign_give_one_pending_figure(tmp_path: Path) -> None:
    target = Target("paper", "d", tmp_path / "d.toml", tmp_path / "d.sqlite")
    first = execute.Ran(target, 300, {"ok": 200, "fidelity": 40}, 600.0, 500.0, out_of_time=60, reruns=40)
    second = execute.Ran(target, 100, {"ok": 90}, 200.0, 180.0, out_of_time=10, reruns=5)
    (merged,) = execute.merge([first, second])
    assert (merged.selected, merged.reruns, merged.out_of_time) == (400, 45, 10)
    assert merged.counts == {"ok": 290, "fidelity": 40}


def test_a_need_is_never_printed_as_nothing() -> None:
    assert allocate._hours(1.0) == "under a minute" and allocate._hours(59.0) == "under a minute"
    assert allocate._hours(3599.0) == "60 min" and allocate._hours(3700.0) == "1.0 h"


def test_quoted_table_values_carry_their_column_names() -> None:
    for claim in load_pack("starlink-uploads").claims:
        quote = claim.source.quote
        if quote.count(" ms") >= 4:   # a row of the slides' table
            assert quote.startswith("Med(DCT) | Med(DCT) FEC | pct95(DCT) | pct95(DCT) FEC — "), claim.id
