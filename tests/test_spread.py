"""Metrics the claims need (issue 70, item 3; pure logic). A spread statistic: each design point's interquartile
spread of the label over the baseline's, the median over the points, with an anytime-valid interval from the four
quartiles' sequences; rQUIC's "more predictable behaviour" is judged on it (relative spread: a label twice as fast
with the same relative scatter is no more predictable). One label's own level (its coding overhead, coded ÷ all
datagrams sent) over the points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fecbench.inputs.errors import SpecError
from fecbench.verdicts import draws as dr
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts import samples
from fecbench.verdicts import statistics as st
from fecbench.verdicts.pack import load_pack
from fecbench.verdicts.statistics.points import spread_of
from tests.test_reproduce import CLAIM, _pack
from tests.test_reproduce_estimands import _claim, _data, _run, _space


def _rows(n: int, label_sd: float, base_sd: float, scale: float, seed: int = 70) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for rep in range(n):
        rows.append(_run(0, rep, "quic", 100 * math.exp(base_sd * rng.standard_normal())))
        rows.append(_run(0, rep, "fec", scale * 100 * math.exp(label_sd * rng.standard_normal())))
    return rows


def test_relative_spread_ignores_the_level_and_absolute_spread_does_not() -> None:
    x = np.exp(np.random.default_rng(1).normal(0, 0.3, 10_000))
    assert spread_of(0.4 * x, "relative") == pytest.approx(spread_of(x, "relative"))
    assert spread_of(0.4 * x, "absolute") == pytest.approx(0.4 * spread_of(x, "absolute"))


def test_a_label_that_scatters_less_holds_and_one_that_only_runs_faster_does_not() -> None:
    # FEC's log times with sd 0.1 against QUIC's 0.4: the spread ratio exp(1.35 × 0.1) ÷ exp(1.35 × 0.4) ≈ 0.67
    claim = _claim("median_point_spread_ratio", "<", 1.0, spread="relative")
    verdict = ev.evaluate_claim(claim, "p", _data(_rows(240, 0.1, 0.4, 1.0)), _space(1, 240), seed=1, alpha=0.05,
                                bootstrap=False)
    assert verdict.verdict == "holds", verdict.reason
    assert verdict.estimate.value == pytest.approx(0.67, abs=0.08)
    assert verdict.sequence.low <= 0.67 <= verdict.sequence.high
    # the same scatter at 0.4 × the level: relative spread 1 (never "holds"), absolute spread 0.4 (holds)
    faster = _data(_rows(240, 0.4, 0.4, 0.4))
    relative = ev.evaluate_claim(claim, "p", faster, _space(1, 240), seed=1, alpha=0.05, bootstrap=False)
    assert relative.verdict != "holds" and relative.sequence.low <= 1.0 <= relative.sequence.high, relative.reason
    absolute = _claim("median_point_spread_ratio", "<", 1.0, spread="absolute")
    assert ev.evaluate_claim(absolute, "p", faster, _space(1, 240), seed=1, alpha=0.05,
                             bootstrap=False).verdict == "holds"


def test_a_cells_interval_covers_its_spread_ratio_at_every_look() -> None:
    # equal spreads (truth 1) over 60 sequences, looked at after 30, 90 and 240 seeds: misses at most about α
    stat, misses = st.get("median_point_spread_ratio"), 0
    for seed in range(60):
        claim = _claim("median_point_spread_ratio", "<", 1.0, spread="relative")
        rows = _rows(240, 0.3, 0.3, 0.5, seed=seed)
        for n in (30, 90, 240):
            sample = samples.sample(claim, _data(rows[: 2 * n]), dr.draws(claim, _space(1, 240)))
            s = stat.sequence(sample.rows, claim.params, 0.05)
            misses += not (s.low <= 1.0 <= s.high)
    assert misses <= 6, misses


def test_rquics_predictability_claim_is_runnable() -> None:
    claim = next(c for c in load_pack("rquic2021").claims if c.id == "abstract-bulk-more-predictable")
    assert claim.statistic == "median_point_spread_ratio" and claim.params["spread"] == "relative"
    assert not claim.needs


def _level_rows(medians: dict[int, float], n: int) -> list[dict]:
    rng = np.random.default_rng(7)
    rows = []
    for rep in range(n):
        for point, median in medians.items():
            overhead = median * math.exp(0.05 * rng.standard_normal())
            rows.append({**_run(point, rep, "fec", 0.0), "coding_overhead": overhead})
    return rows


@pytest.mark.parametrize(("statistic", "threshold", "verdict"), [
    ("lowest_point_level", 0.2, "holds"),        # every network above 20 %
    ("lowest_point_level", 0.25, "fails"),       # one network at 0.22
    ("median_point_level", 0.25, "holds"),       # the median network (0.27) above 25 %
])
def test_one_labels_level_over_the_points(statistic: str, threshold: float, verdict: str) -> None:
    claim = _claim(statistic, ">", threshold)
    claim.baseline, claim.metric = claim.label, "coding_overhead"
    data = _data(_level_rows({0: 0.22, 1: 0.27, 2: 0.31}, 120))
    judged = ev.evaluate_claim(claim, "p", data, _space(3, 120), seed=1, alpha=0.05, bootstrap=False)
    assert judged.verdict == verdict, judged.reason


def test_a_level_claim_has_no_baseline(tmp_path) -> None:
    more = 'metric = "coding_overhead"'
    claim = CLAIM.format(more=more).replace('"ratio_of_medians"', '"median_point_level"')
    with pytest.raises(SpecError, match="no baseline"):
        load_pack(_pack(tmp_path, claim))
    alone = load_pack(_pack(tmp_path / "b", claim.replace('baseline = "quic"\n', ''))).claims[0]
    assert alone.baseline == alone.label and alone.stat.one_label
    assert {c.id for c in load_pack("rquic2021").claims if c.metric == "coding_overhead" and not c.needs} == {
        "fig5d-overhead-above-20pct-at-5pct", "fig5d-satellite-overhead-above-25pct-at-5pct",
        "fig5d-no-loss-some-coded-packets"}
