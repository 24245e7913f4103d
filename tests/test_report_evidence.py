"""The report says what its comparisons rest on (issue 48, items 1-2).

A campaign whose FEC label's endpoints wait for a CPU at half the design points (a CPU hog beside them, as
the tracer would count it; the in-memory testbed, real engine, runner, recorder and SQLite) loses those runs
to the flag, its baseline none: the report's first sentence names the differing exclusion, and the headline is
shown with and without the flagged runs. A comparison resting on fewer pairs than the minimum says so instead of
a ratio. And the report's per-point ratio of medians is reproduce's: the same runs give the same number."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench.analysis import ratios, report, results
from fecbench.analysis.report import evidence, sentences
from fecbench.host import cleanup
from fecbench.records.status import Status
from fecbench.timekeeping import endpoint_timing
from tests.helpers.analysis_db import make_table_db

MS = 1_000_000


@pytest.fixture
def hogged_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """12 points, quic and fec (the fake implementation at `--level 1`); fec's endpoints wait 50 ms five times per
    run at the first 6 points (every attempt: its re-runs stay flagged), never elsewhere, quic's never."""
    from tests.test_engine import Campaign

    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    monkeypatch.delenv(endpoint_timing.ENV, raising=False)
    camp = Campaign(tmp_path, {"quic": {}, "fec": {"level": "1"}}, points=12,
                    wake_ns=lambda values: waits(values))
    hogged = sorted(p["bw"] for p in camp.prepared.points.values())[:6]

    def waits(values: dict) -> list[int]:
        client = [argv for role, argv in camp.testbeds[-1].started if role == "client"][-1]
        late = "--level" in client and values["bw"] in hogged
        return [20_000] * 40 + ([50 * MS] * 5 if late else [])

    camp.run()
    return camp.db


def test_a_label_flagged_more_often_is_named_first_with_both_comparisons(hogged_campaign: Path,
                                                                         tmp_path: Path) -> None:
    statuses = results.load(hogged_campaign).groupby("label")["status"].value_counts().unstack(fill_value=0)
    assert statuses.loc["fec", Status.FIDELITY] == 6 and statuses.loc["quic"].get(Status.FIDELITY, 0) == 0
    written = report.build(hogged_campaign, tmp_path / "rep")
    first = written.sentences[0]
    assert first.startswith("Exclusions differ: fec lost 6 of its 12 pairs (6 fidelity), quic 0"), first
    assert "with and without the flagged runs" in first
    both = written.headline["with and without flagged runs against quic"]
    assert both["pairs used (without flagged)"].iloc[0].startswith("6 points, 6 pairs")
    assert both["pairs used (with flagged)"].iloc[0].startswith("12 points, 12 pairs")
    lost = written.headline["exclusions by side against quic"]
    assert lost.iloc[0]["label excluded"] == 6 and lost.iloc[0]["fisher p"] < 0.05
    assert "exclusions" in written.figures
    page = written.html.read_text()
    assert page.index("Exclusions differ") < page.index("<h2>Headline")
    # Each flagged run was re-run (3 rounds), every attempt kept with its metrics, compared in the report.
    tried = written.tables["attempts compared (runs run again)"].set_index("label")
    assert tried.loc["fec", "attempts kept"] == 18 and tried.loc["fec", "with the metric both times"] == 18


def test_a_headline_from_too_few_pairs_says_so() -> None:
    rows = pd.DataFrame({"label": "fec", "baseline": "quic", "size": 10_000, "workload": "download",
                         "outcome": ["finished"] * 3 + ["excluded"] * 57, "excluded_why": [""] * 3 +
                         ["label endpoints late"] * 57, "point": [0, 1] * 30})
    points = pd.DataFrame({"label": "fec", "size": 10_000, "workload": "download", "point": [0, 1],
                           "seeds": [2, 1], "ratio": [1.9, 2.0], "ratio_low": [1.9, 2.0], "ratio_high": [1.9, 2.0],
                           "state": "exact", "ci_low": np.nan, "ci_high": np.nan})
    said = sentences.downloads(points, rows, "quic")
    assert said[0] == ("fec against quic for 10 kB downloads: from 3 of 60 pairs at 2 of 2 design points: not enough "
                       "to say (fewer than 10 usable pairs; what was left out and why: below).")
    one_point = points.assign(seeds=[12, 0])
    enough = rows.assign(outcome=["finished"] * 12 + ["excluded"] * 48)
    said = sentences.downloads(one_point, enough, "quic")
    assert said[0].endswith("from 12 of 60 pairs at 1 of 2 design points: not enough to say (1 of the design's "
                            "points without a usable pair; what was left out and why: below).")


def test_the_reports_point_ratio_is_reproduces(tmp_path: Path) -> None:
    """One definition per statistic: the report's ratio of medians at a point (timeouts censored) and reproduce's
    block value over the same runs agree, bounds included."""
    from fecbench.verdicts.statistics.blocks import block_bounds

    table = {(0, r): (100 + 10 * r, 60 + 7 * r) for r in range(9)} | {(1, 0): (200, "timeout"), (1, 1): (210, 90),
                                                                     (1, 2): (220, 95)}
    rows = [(p, lab, 1000, r, "ok" if not isinstance(v, str) else v, None if isinstance(v, str) else v)
            for (p, r), pair in table.items() for lab, v in zip(("quic", "fec"), pair, strict=True)]
    db = make_table_db(tmp_path / "one.sqlite", rows)
    pairs = ratios.pairs(db, baseline="quic")
    points = ratios.point_ratios(pairs).set_index("point")
    sample = pairs.assign(draw=0, cell=pairs["point"], factor=0.0,
                          value=pairs["value"].fillna(np.inf), base=pairs["baseline_value"],
                          value_lo=pairs["ratio_low"] * 0 + pairs["value"].fillna(pairs["limit"]),
                          value_hi=pairs["value"].fillna(np.inf), base_lo=pairs["baseline_value"],
                          base_hi=pairs["baseline_value"])
    blocks = block_bounds(sample).set_index("cell")
    for point in (0, 1):
        assert blocks.loc[point, "low"] == pytest.approx(points.loc[point, "ratio_low"])
        assert blocks.loc[point, "high"] == pytest.approx(points.loc[point, "ratio_high"])
    assert json.dumps(evidence.exclusions(pairs)["differ"].tolist()) == "[false]"
