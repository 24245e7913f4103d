"""fecbench.analysis.ratios on a hand-made database: every pair accounted for, timeouts censored at the
design's timeout_s, and the per-point ratio of medians (Michel et al. 2019 §IV-B) with the values
documented in notebooks/README.md ("A worked example")."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pandas as pd
import pytest

from fecbench.analysis import ratios, results, stats
from fecbench.inputs.specs import DEFAULT_TIMEOUT_S
from fecbench.records import db as dbmod
from tests.helpers.analysis_db import CENSORED_TABLE as TABLE
from tests.helpers.analysis_db import make_download_db, make_table_db, table_rows

INF = math.inf
@pytest.fixture(scope="module")
def hand_db(tmp_path_factory):
    return make_table_db(tmp_path_factory.mktemp("ratios") / "hand.sqlite", table_rows(TABLE), timeout_s=10)


@pytest.fixture(scope="module")
def hand_pairs(hand_db):
    return ratios.pairs(hand_db, baseline="quic")


def test_timeout_s_comes_from_the_stored_design(hand_db, tmp_path):
    assert set(results.load(hand_db)["timeout_s"]) == {10.0}
    default = make_table_db(tmp_path / "default.sqlite", table_rows({(0, 0): (100, "timeout")}), timeout_s=None)
    assert set(results.load(default)["timeout_s"]) == {DEFAULT_TIMEOUT_S}
    assert dbmod.campaign_settings(None, "not [toml") == {}   # a time limit it cannot tell: NaN in load()
    # A campaign recorded with its settings (schema 6) is read from them, not from its design text.
    assert dbmod.campaign_settings('{"timeout_s": 5.0}', '[design]\ntimeout_s = 300\n') == {"timeout_s": 5.0}


def test_every_run_is_in_exactly_one_pair(hand_db, hand_pairs):
    frame = results.load(hand_db)
    fec_keys = set(frame.loc[frame["label"] == "fec", "key"])
    quic_keys = set(frame.loc[frame["label"] == "quic", "key"])
    assert set(hand_pairs["key"].dropna()) == fec_keys and hand_pairs["key"].dropna().is_unique
    assert set(hand_pairs["baseline_key"].dropna()) == quic_keys and hand_pairs["baseline_key"].dropna().is_unique
    assert len(hand_pairs) == len(TABLE)


def test_pair_outcomes_and_per_run_bounds(hand_pairs):
    got = {(int(r.point), int(r.repetition)): r for r in hand_pairs.itertuples()}
    assert got[(0, 0)].outcome == "finished" and got[(0, 0)].ratio == 0.5
    assert got[(0, 2)].outcome == "label timed out"
    assert (got[(0, 2)].ratio_low, got[(0, 2)].ratio_high) == (pytest.approx(10_000 / 300), INF)
    assert got[(0, 4)].outcome == "baseline timed out"
    assert (got[(0, 4)].ratio_low, got[(0, 4)].ratio_high) == (0.0, pytest.approx(250 / 10_000))
    assert got[(3, 0)].outcome == "both timed out" and (got[(3, 0)].ratio_low, got[(3, 0)].ratio_high) == (0, INF)
    assert (got[(1, 5)].outcome, got[(1, 5)].excluded_why) == ("excluded", "label failed")
    assert (got[(2, 4)].outcome, got[(2, 4)].excluded_why) == ("excluded", "baseline missing")
    assert (got[(3, 2)].outcome, got[(3, 2)].excluded_why) == ("excluded", "baseline unsupported")
    assert hand_pairs.loc[hand_pairs["outcome"] != "finished", "ratio"].isna().all()
    assert hand_pairs.loc[hand_pairs["outcome"] == "excluded", ["ratio_low", "ratio_high"]].isna().all().all()
    assert set(hand_pairs["limit"]) == {10_000.0}


def test_accounting_per_label_and_per_point(hand_pairs):
    table = ratios.accounting(hand_pairs)
    row = table.loc[("fec", 1000)]
    assert row.to_dict() == {"pairs": 19, "finished": 6, "label timed out": 4, "baseline timed out": 4,
                             "both timed out": 2, "excluded": 3, "excluded: baseline missing": 1,
                             "excluded: baseline unsupported": 1, "excluded: label failed": 1}
    per_point = ratios.accounting(hand_pairs, by=["point", "label"])
    assert per_point["pairs"].tolist() == [5, 6, 5, 3]
    assert per_point["finished"].tolist() == [3, 2, 1, 0]
    assert per_point["excluded: label failed"].tolist() == [0, 1, 0, 0]


def test_point_ratio_of_medians_documented_values(hand_pairs):
    points = ratios.point_ratios(hand_pairs, seed=3).set_index("point")
    assert points["seeds"].tolist() == [5, 5, 4, 2]
    assert points["state"].tolist() == ["exact", "at least", "at most", "undefined"]
    # point 0: medians 150 (fec: 50, 100, 150, 250, >T) and 300 (quic: 100, 200, 300, 400, >T)
    assert (points.loc[0, "label_median"], points.loc[0, "baseline_median"], points.loc[0, "ratio"]) == (150, 300, 0.5)
    assert points.loc[0, "run_ratio_median"] == 0.5  # per-run: 0.375, 0.5, 0.5, >=33.3, <=0.025
    # point 1: fec >= 10 000 (3 of 5 timed out), quic 120 over the same five seeds (not 130 with seed 5)
    assert points.loc[1, "baseline_median"] == 120
    assert (points.loc[1, "ratio_low"], points.loc[1, "ratio_high"]) == (pytest.approx(10_000 / 120), INF)
    assert math.isnan(points.loc[1, "ratio"])
    # point 2: fec 130 = (120 + 140) / 2, quic >= 10 000
    assert (points.loc[2, "ratio_low"], points.loc[2, "ratio_high"]) == (0.0, pytest.approx(130 / 10_000))
    assert (points.loc[3, "ratio_low"], points.loc[3, "ratio_high"]) == (0.0, INF)
    assert points["excluded_why"].tolist() == ["", "label failed: 1", "baseline missing: 1",
                                               "baseline unsupported: 1"]
    # Intervals: none from fewer than 10 seeds (stats.MIN_SEEDS_FOR_INTERVAL: "too few seeds")
    again = ratios.point_ratios(hand_pairs, seed=3).set_index("point")
    pd.testing.assert_frame_equal(points, again)
    assert points["ci_low"].isna().all() and points["ci_high"].isna().all() and points.attrs["min_seeds"] == 10
    assert points.loc[0, "bw"] == 1.0  # factor values of the point
    assert ratios.excluded_reasons(points.reset_index()) == {"baseline missing": 1, "baseline unsupported": 1,
                                                            "label failed": 1}


def test_summary_over_points_gives_bounds(hand_pairs):
    summary = ratios.summary(ratios.point_ratios(hand_pairs))
    row = summary.iloc[0].to_dict()
    assert (row["label"], row["size"], row["points"], row["seeds_min"], row["seeds_max"]) == ("fec", 1000, 4, 2, 5)
    assert (row["exact"], row["at_least"], row["at_most"], row["undefined"]) == (1, 1, 1, 1)
    # Per-point ratio bounds [0.5, 0.5], [83.3, inf], [0, 0.013], [0, inf]: median of lows and of highs.
    assert (row["median_ratio_low"], row["median_ratio_high"]) == (0.25, INF) and math.isnan(row["median_ratio"])
    assert (row["below_1_low"], row["below_1_high"]) == (0.5, 0.75)
    assert (row["timed_out_pairs"], row["excluded_pairs"]) == (10, 3)


def test_without_timeouts_the_ratio_of_medians_is_the_plain_one(tmp_path):
    db = make_download_db(tmp_path / "d.sqlite", points=3, repetitions=5, failures=0)
    pairs = ratios.pairs(db, baseline="quic")
    assert (pairs["outcome"] == "finished").all()
    points = ratios.point_ratios(pairs)
    frame = results.load(db)
    for row in points.itertuples():
        runs = frame[(frame["point"] == row.point) & (frame["size"] == row.size)]
        label = runs.loc[runs["label"] == row.label, "dct_ms"].median()
        base = runs.loc[runs["label"] == "quic", "dct_ms"].median()
        assert row.state == "exact" and row.ratio == pytest.approx(label / base)
        assert row.seeds == 5 and np.isnan(row.ci_low) and np.isnan(row.ci_high)   # too few seeds
    # The per-run ratios are those of results.paired.
    finished = pairs.sort_values(["label", "point", "repetition", "size"])["ratio"].to_numpy()
    paired = results.paired(db).sort_values(["label", "point", "repetition", "size"])["ratio"].to_numpy()
    assert np.allclose(finished, paired)


def test_non_duration_metric_excludes_timeouts(hand_db):
    pairs = ratios.pairs(hand_db, metric="packets_sent")
    assert pairs.attrs["censored"] is False
    assert set(pairs.loc[pairs["outcome"] != "finished", "outcome"]) == {"excluded"}
    assert "label timeout" in set(pairs["excluded_why"]) and "baseline timeout" in set(pairs["excluded_why"])


def test_pairs_with_ok_runs_without_the_metric(tmp_path, hand_db):
    copy = tmp_path / "nometric.sqlite"
    copy.write_bytes(hand_db.read_bytes())
    with sqlite3.connect(copy) as con:
        con.execute("UPDATE metrics SET dct_ms = NULL WHERE run_key IN "
                    "(SELECT key FROM runs WHERE label = 'fec' AND point = 0 AND repetition = 0)")
    pairs = ratios.pairs(copy)
    row = pairs[(pairs["point"] == 0) & (pairs["repetition"] == 0)].iloc[0]
    assert (row["outcome"], row["excluded_why"]) == ("excluded", "label ok without dct_ms")


def test_describe_as_the_report_shows_it(hand_pairs):
    points = ratios.point_ratios(hand_pairs)
    texts = [stats.describe((lo, hi)) for lo, hi in zip(points["ratio_low"], points["ratio_high"], strict=True)]
    assert texts == ["0.5", "≥ 83.3", "≤ 0.013", "undefined"]


def test_run_summary_per_run_ratios_as_bounds(hand_pairs):
    row = ratios.run_summary(hand_pairs).iloc[0]
    assert (row["pairs"], row["excluded"]) == (16, 3)
    # Lower bounds sorted: six 0s, 0.375, 0.4615, 0.5, 0.5, … (8th and 9th of 16 in the middle);
    # upper bounds: 0.01, 0.012, 0.014, 0.025, 0.375, 0.4615, 0.5, 0.5, 0.5, 0.8, then six +inf.
    assert row["median_ratio_low"] == pytest.approx((60 / 130 + 0.5) / 2)
    assert row["median_ratio_high"] == 0.5
    assert (row["below_1_low"], row["below_1_high"]) == (10 / 16, 12 / 16)


def test_censored_medians_per_label(hand_db):
    frame = results.load(hand_db)
    table = ratios.censored_medians(frame).set_index("label")
    # fec: 12 finished (50 … 250), 6 timed out at 10 000, 1 failed: the median of 18 is (140 + 150) / 2.
    assert table.loc["fec", ["runs", "finished", "timed_out", "other"]].tolist() == [19, 12, 6, 1]
    assert table.loc["fec", "median"] == 145
    # quic: 11 finished, 6 timed out, 1 unsupported: the 9th of 17 values is 200.
    assert table.loc["quic", ["runs", "finished", "timed_out", "other"]].tolist() == [18, 11, 6, 1]
    assert table.loc["quic", "median"] == 200
    per_point = ratios.censored_medians(frame, by=["point", "label"]).set_index(["point", "label"])
    assert (per_point.loc[(1, "fec"), "median_low"], per_point.loc[(1, "fec"), "median_high"]) == (10_000, INF)
    # Not a duration: timeouts are not censored, just not used.
    packets = ratios.censored_medians(frame, "packets_sent").set_index("label")
    assert packets.loc["fec", ["finished", "timed_out", "other"]].tolist() == [12, 0, 7]


def test_a_point_without_usable_pair_is_still_counted(tmp_path):
    table = {(0, 0): (100, 50), (0, 1): (200, 100), (1, 0): (100, "failed"), (1, 1): (120, "failed")}
    pairs = ratios.pairs(make_table_db(tmp_path / "f.sqlite", table_rows(table)))
    points = ratios.point_ratios(pairs).set_index("point")
    assert points.loc[1, "seeds"] == 0 and points.loc[1, "state"] == "no data" and points.loc[1, "excluded"] == 2
    row = ratios.summary(points.reset_index()).iloc[0]
    assert (row["points"], row["points_without_seeds"], row["excluded_pairs"]) == (1, 1, 2)


def test_pairs_of_two_databases_concatenated_keep_their_factors_and_baselines(tmp_path):
    """Issue 62 item 5: the loader's frames carry their factors in ``attrs``, which ``pd.concat`` drops when the
    frames' attrs differ (two stacks' pairs, each against its own baseline): the ratios still find the factors
    (from the columns) and keep each baseline's comparisons apart."""
    one = make_download_db(tmp_path / "one.sqlite", points=4, seed=1)
    two = make_download_db(tmp_path / "two.sqlite", points=3, seed=2)
    first, second = ratios.pairs(one, baseline="quic"), ratios.pairs(two, baseline="quic-fec-rs")
    both = pd.concat([first, second], ignore_index=True)
    assert both.attrs == {}     # what pandas does: attrs that differ are dropped
    factors = ["bw", "owd", "p", "r", "k", "h"]
    assert ratios.factor_names(both) == factors
    points = ratios.point_ratios(both, seed=1)
    assert set(factors) <= set(points.columns) and points[factors].notna().all().all()
    assert points.attrs["factors"] == factors
    alone = ratios.point_ratios(first, seed=1)
    mine = points[points["baseline"] == "quic"].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine[alone.columns], alone, check_dtype=False)
    table = ratios.summary(points, by=("label", "baseline", "size"))
    assert set(zip(table["label"], table["baseline"], strict=True)) == {
        ("quic-fec-rs", "quic"), ("quic-fec-rlc", "quic"), ("quic", "quic-fec-rs"), ("quic-fec-rlc", "quic-fec-rs")}
    # One database against two baselines: the same label's comparisons are not pooled.
    same = pd.concat([first, ratios.pairs(one, baseline="quic-fec-rs")], ignore_index=True)
    rlc = ratios.point_ratios(same, seed=1)
    rlc = rlc[rlc["label"] == "quic-fec-rlc"]
    assert len(rlc) == 2 * len(alone[alone["label"] == "quic-fec-rlc"])
    assert (rlc["seeds"] <= 3).all()     # 3 repetitions a point: never both baselines' pairs at once
    # runs frames concatenated without their attrs pair as one database's do
    runs = pd.concat([results.load(one)], ignore_index=True)
    runs.attrs = {}
    pd.testing.assert_frame_equal(ratios.pairs(runs, baseline="quic"), first)
