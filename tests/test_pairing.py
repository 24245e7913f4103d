"""Pairs are formed by what makes two runs comparable, never by the design file's hash (issue 48, item 4).

The case of the issue: a label added to a design later (`quic-fec-rs-free`) runs under a campaign of its own
(the design changed, so did its hash) on the same points and loss seeds; on main 2781c76 it had no pair at all,
silently. Here it pairs with the baseline's runs; a label that ran elsewhere is named as unpaired with the reason;
the same runs twice in one database are refused, and two databases loaded together are kept apart, never
averaged."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from fecbench.analysis import ratios, results
from fecbench.inputs.errors import UserError
from tests.helpers.analysis_db import SIZES, add_label_later, make_download_db

POINTS, REPS = 4, 3


def _with_label_added_later(path: Path, label: str = "quic-fec-rs-free", *, other_points: bool = False) -> Path:
    """The download campaign, then a second campaign (another design hash) running only ``label`` on the same
    points, sizes and repetitions (same loss seeds), or with ``other_points`` on points of its own."""
    make_download_db(path, points=POINTS, repetitions=REPS, failures=0)
    return add_label_later(path, label, points=POINTS, repetitions=REPS, other_points=other_points)


def test_a_label_added_later_pairs_with_the_runs_already_there(tmp_path: Path) -> None:
    db = _with_label_added_later(tmp_path / "added.sqlite")
    frame = results.load(db)
    assert frame.groupby("label")["design_hash"].nunique().max() == 1 and frame["design_hash"].nunique() == 2
    pairs = ratios.pairs(frame, baseline="quic", labels=["quic-fec-rs-free"])
    assert len(pairs) == POINTS * REPS * len(SIZES) and set(pairs["outcome"]) == {"finished"}
    # Each pair is the same network, size, repetition and loss seed on both sides.
    both = pairs.merge(frame[["key", "loss_seed"]].rename(columns={"key": "baseline_key",
                                                                   "loss_seed": "baseline_seed"}), on="baseline_key")
    assert (both["loss_seed"] == both["baseline_seed"]).all()
    assert len(results.paired(frame, baseline="quic", labels=["quic-fec-rs-free"])) == len(pairs)
    points = ratios.point_ratios(pairs)
    assert sorted(points["point"].unique()) == list(range(POINTS))


def test_a_label_on_other_networks_is_named_unpaired_with_the_fix(tmp_path: Path) -> None:
    db = _with_label_added_later(tmp_path / "elsewhere.sqlite", other_points=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = ratios.pairs(db, baseline="quic", labels=["quic-fec-rs-free"])
    assert pairs.empty and "quic-fec-rs-free" in pairs.attrs["unpaired"]
    why = pairs.attrs["unpaired"]["quic-fec-rs-free"]
    assert "ran on other networks" in why and "run quic there too" in why
    assert any(issubclass(w.category, results.UnpairedWarning) and "quic-fec-rs-free" in str(w.message)
               for w in caught)


def test_the_same_runs_twice_are_refused_and_two_databases_kept_apart(tmp_path: Path) -> None:
    db = _with_label_added_later(tmp_path / "twice.sqlite", label="quic")   # quic again, in a second campaign
    campaigns = r"\(campaigns: test-download, test-download-with-quic\)"
    with pytest.raises(UserError, match=r"share their conditions .*" + campaigns):
        ratios.pairs(db, baseline="quic")
    with pytest.raises(UserError, match="share their conditions"):
        results.paired(db, baseline="quic")
    # Two copies of one database: every pair within its own database, its values those of one run (not a mean).
    one = make_download_db(tmp_path / "one.sqlite", points=POINTS, repetitions=REPS, failures=0)
    copy = shutil.copy(one, tmp_path / "copy.sqlite")
    alone = results.paired(one, baseline="quic")
    both = results.paired(results.load([one, copy]), baseline="quic")
    assert len(both) == 2 * len(alone) and set(both["database"]) == {str(one), str(copy)}
    for _, part in both.groupby("database"):
        assert sorted(part["baseline_value"]) == sorted(alone["baseline_value"])
