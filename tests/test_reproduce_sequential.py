"""Anytime-valid verdicts (issue 35): the confidence sequences' coverage under optional stopping, the
verdict rule, the extra seeds' keys and loss seeds, and the adaptive allocator (no root: pure logic and
prepared designs)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench.reproduce import allocate, plan, profiles, seeds
from fecbench.reproduce import evaluate as ev
from fecbench.reproduce import sequential as sq
from fecbench.reproduce.pack import load_pack
from fecbench.reproduce.statistics import points
from fecbench.runners.experiment.prepare import prepare
from fecbench.runners.experiment.runs import loss_seed, run_key
from fecbench.status import Status

# --- confidence sequences ---------------------------------------------------------------------------------------


def test_a_share_stays_covered_however_often_it_is_looked_at() -> None:
    rng = np.random.default_rng(35)
    missed = 0
    for _ in range(200):
        hits = rng.random(400) < 0.3
        low, high = sq.running(*sq.share_bounds(np.cumsum(hits), np.arange(1, 401), 0.05))
        missed += bool(np.any((low > 0.3) | (high < 0.3)))   # a look after every observation
    assert missed / 200 <= 0.08                             # 0.05 + sampling noise over 200 sequences


def test_peeking_at_a_fixed_sample_interval_inflates_false_verdicts_and_a_sequence_does_not() -> None:
    """An A/A share (truth 0.5) looked at after every pair: stopping when a 95 % Wald interval first
    excludes 0.5 gives far more than 5 % false verdicts; the confidence sequence stays below."""
    rng = np.random.default_rng(7)
    naive = anytime_false = 0
    for _ in range(200):
        hits = rng.random(300) < 0.5
        n = np.arange(1, 301)
        share = np.cumsum(hits) / n
        half = 1.96 * np.sqrt(np.maximum(share * (1 - share), 1e-12) / n)
        naive += bool(np.any((np.abs(share - 0.5) > half) & (n >= 10)))
        low, high = sq.share_bounds(np.cumsum(hits), n, 0.05)
        anytime_false += bool(np.any((low > 0.5) | (high < 0.5)))
    assert naive / 200 > 0.2 and anytime_false / 200 <= 0.08


def test_a_quantile_sequence_covers_the_median_and_never_widens() -> None:
    rng = np.random.default_rng(3)
    values = rng.exponential(size=400)
    low, high = sq.running(*sq.quantile_bounds(values, 0.5, 0.05))
    assert np.all(low[1:] >= low[:-1]) and np.all(high[1:] <= high[:-1])
    assert np.isinf(low[0]) and low[-1] < math.log(2) < high[-1] and high[-1] - low[-1] < 0.4
    censored = sq.quantile(np.r_[values[:50], np.full(60, np.inf)], 0.5, 0.05)
    assert censored.value == math.inf and censored.high == math.inf   # timeouts keep their rank


def test_kendall_pairs_points_with_different_factors_only() -> None:
    ratios = np.array([1.0, 0.9, 2.0, 0.5, 0.4, 3.0])
    factor = np.array([1.0, 1.0, 2.0, 4.0, 8.0, 8.0])
    # 1.0@1 waits, 0.9@1 waits (same factor), 2.0@2 pairs with 1.0@1 (concordant), 0.5@4 with 0.9@1
    # (discordant), 0.4@8 waits, 3.0@8 waits: two pairs.
    assert list(sq.concordance(ratios, factor)) == [1.0, 0.0]
    falling = sq.kendall(np.arange(40.0)[::-1], np.arange(40.0), 0.05)
    assert falling.value == -1 and falling.high < 0


@pytest.mark.parametrize(("low", "high", "compare", "tolerance", "expected"), [
    (0.4, 0.6, "<", 0.0, "holds"), (1.0, 1.2, "<", 0.0, "fails"), (0.9, 1.1, "<", 0.0, "inconclusive"),
    (0.97, 1.02, "<", 0.05, "at the threshold"), (0.9, 1.02, "<", 0.05, "inconclusive"),
    (0.97, 0.99, "<", 0.05, "at the threshold"), (1.0, 1.0, "<", 0.0, "fails"),
    (1.0, 1.0, ">", 0.02, "at the threshold"),
    (1.01, 1.2, ">", 0.05, "holds"), (0.96, 1.04, "approx", 0.05, "holds"), (1.2, 1.3, "approx", 0.05, "fails"),
    (math.nan, 1.0, "<", 0.0, "inconclusive")])
def test_the_verdict_rule(low: float, high: float, compare: str, tolerance: float, expected: str) -> None:
    assert sq.decide(low, high, compare, 1.0, tolerance) == expected


def test_a_claim_near_its_verdict_needs_fewer_runs() -> None:
    near = sq.runs_to_decide(0.8, 0.7, 1.05, 50, "<", 1.0, 0.0)
    far = sq.runs_to_decide(0.95, 0.7, 1.2, 50, "<", 1.0, 0.0)
    assert 0 < near < far and sq.runs_to_decide(1.0, 0.8, 1.2, 50, "<", 1.0, 0.0) == math.inf


def test_an_approx_claim_is_as_far_from_its_verdict_as_from_the_bands_edge() -> None:
    # networking2019's "≈ 0.75 ± 0.15" at 0.515 [0.397, 0.631]: fails once the interval leaves the band
    # (its edge 0.6 is 0.085 away, half-width 0.117): well over 1 more observation. Measuring the distance to
    # the threshold (0.235) had said 1, so the allocator gave it 305 pairs of a 2 h budget.
    more = sq.runs_to_decide(0.515, 0.397, 0.631, 305, "approx", 0.75, 0.15)
    assert more > 100
    assert sq.runs_to_decide(0.75, 0.7, 0.8, 50, "approx", 0.75, 0.15) == 1.0   # inside the band already
    # Today's 2 h run: the same claim at 0.6 [0.293, 0.906], on the band's edge: no projection (it said
    # 2.4e33 units, from a distance of 1e-17 that was rounding), also a rounding away from the edge.
    for value in (0.6, 0.75 - 0.15, 0.6 + 1e-15):
        assert sq.runs_to_decide(value, 0.293, 0.906, 20, "approx", 0.75, 0.15) == math.inf


@pytest.mark.parametrize("alpha", [0.05, 0.05 / 18])
def test_the_fewest_observations_that_could_decide_are_the_sequences_own(alpha: float) -> None:
    """At the fewest observations a unanimous sample decides, one fewer decides nothing, for each kind of
    sequence (the allocator's need and the page's "at least" for a claim with nothing measured)."""
    n = int(sq.fewest_for_quantile(0.5, alpha))
    for m, verdict in ((n, "holds"), (n - 1, "inconclusive")):
        s = sq.quantile(np.full(m, 0.5), 0.5, alpha)
        assert sq.decide(s.low, s.high, "<", 1.0, 0.0) == verdict, m
    n = int(sq.fewest_for_quantile(0.95, alpha / 2, both_sides=True))      # a quantile ratio, unpaired
    for m, verdict in ((n, "holds"), (n - 1, "inconclusive")):
        s = sq.two_quantiles(np.full(m, 0.5), np.full(m, 1.0), 0.95, alpha, "ratio")
        assert sq.decide(s.low, s.high, "<", 1.0, 0.0) == verdict, m
    for compare, threshold, tolerance in (("<", 0.1, 0.0), (">", 0.5, 0.0), ("approx", 0.75, 0.15)):
        n = int(sq.fewest_for_share(compare, threshold, tolerance, alpha))
        patterns = [lambda m: np.zeros(m), lambda m: np.ones(m),
                    lambda m, rate=threshold: np.diff(np.floor(np.arange(m + 1) * rate))]   # hits at that rate
        decided = [[sq.decide(s.low, s.high, compare, threshold, tolerance) != "inconclusive"
                    for s in (sq.share(p(m), alpha) for p in patterns)] for m in (n, n - 1)]
        assert any(decided[0]) and not any(decided[1]), (compare, n)
    claim = next(c for c in load_pack("networking2019").claims if c.id == "fig6-1MB-worse")
    n = int(claim.stat.fewest_observations(claim.params, claim.compare, claim.threshold, claim.tolerance, alpha))
    for m, verdict in ((n, "holds"), (n - 1, "inconclusive")):   # blocks of a median over points
        s = claim.stat.over_blocks(np.full(m, 1.5), np.zeros(m), alpha)
        assert sq.decide(s.low, s.high, claim.compare, claim.threshold, claim.tolerance) == verdict, m
    trend = points.Trend()
    n = int(trend.fewest_observations({}, "<", 0.0, 0.1, alpha))
    for m, verdict in ((n, "holds"), (n - 1, "inconclusive")):   # pairs of points, every one against the factor
        s = trend.over_blocks(-np.arange(2.0 * m), np.arange(2.0 * m), alpha)
        assert s.n == m and sq.decide(s.low, s.high, "<", 0.0, 0.1) == verdict, m


@pytest.mark.parametrize("compare", ["<", ">", "approx"])
@pytest.mark.parametrize("tolerance", [0.0, 0.05, 0.15])
def test_the_allocations_distance_to_a_verdict_is_the_verdict_rules(compare: str, tolerance: float) -> None:
    """Just inside the decisive half-width the rule gives a verdict, just outside it does not: the distance
    runs-to-decide uses is the one ``decide`` has, for every comparison, band and side."""
    if compare == "approx" and tolerance == 0:
        return
    for value in np.linspace(0.5, 1.5, 101) + 0.0013:   # off the edges (a value on one decides nothing)
        width = sq.decisive_half_width(float(value), compare, 1.0, tolerance)
        if width == 0:
            continue
        inside, outside = width * (1 - 1e-6), width * (1 + 1e-6)
        assert sq.decide(value - inside, value + inside, compare, 1.0, tolerance) != "inconclusive", value
        assert sq.decide(value - outside, value + outside, compare, 1.0, tolerance) == "inconclusive", value


def test_points_give_a_block_per_min_seeds_seeds_in_order() -> None:
    rows = [{"group": f"{p}|1", "value": 100.0 * (0.5 if p % 2 else 2.0), "base": 100.0, "ratio": 0.5,
             "factor": float(p), "order": f"2026-01-01T00:{rep:02d}:{p:02d}"} for p in range(4) for rep in range(7)]
    blocks = points.point_blocks(pd.DataFrame(rows), 3)
    assert len(blocks) == 8 and list(blocks["value"][:4]) == [2.0, 0.5, 2.0, 0.5]   # 7 seeds: 2 blocks each


# --- extra seeds -----------------------------------------------------------------------------------------------


@pytest.fixture()
def smoke(tmp_path: Path):
    pack = load_pack("smoke")
    out = {}
    for name in ("defaults", "repair-free"):
        target = profiles.write(pack, pack.profile(name), pack.designs["smoke"], tmp_path)
        out[name] = plan.Campaign(name, "smoke", target.db, prepare(target.design), {})
    return pack, out


def test_extra_seeds_continue_the_designs_seed_stream(smoke, tmp_path: Path) -> None:
    _, campaigns = smoke
    campaign = campaigns["defaults"]
    before = {r.key: r.loss_seed for r in campaign.prepared.runs}
    design = campaign.prepared.design
    own = campaign.prepared.runs[5]
    assert seeds.extension_run(campaign, own.point, own.repetition, own.size, own.label) is own
    # The formula of an extra run is enumerate_runs' own: recomputed for a run of the design it gives its key.
    assert run_key(campaign.prepared.experiment_hash, own.values, own.impl, design.workload.params(), own.size,
                   own.repetition) == own.key
    extra = seeds.extension_run(campaign, own.point, design.repetitions + 2, own.size, own.label)
    assert extra is not None and extra.repetition == design.repetitions + 2
    assert extra.loss_seed == loss_seed(design.seed, own.point, design.repetitions + 2)
    # Same loss seed in every profile (common random numbers), and for both labels of the point.
    other = seeds.extension_run(campaigns["repair-free"], own.point, design.repetitions + 2, own.size, "quic")
    assert other is not None and other.loss_seed == extra.loss_seed and other.key != extra.key
    seeds.adopt(campaign, [extra])
    assert {r.key: r.loss_seed for r in campaign.prepared.runs[:len(before)]} == before   # nothing re-keyed
    assert campaign.prepared.runs[-1] is extra and extra.index == len(before) and seeds.extra_count(campaign) == 1
    assert seeds.extension_run(campaign, 999, 0, own.size, own.label) is None


# --- adaptive allocation -----------------------------------------------------------------------------------------


def _verdict(claim, profile: str, verdict: str, n: int = 0, value: float = math.nan, low: float = math.nan,
             high: float = math.nan) -> ev.Verdict:
    return ev.Verdict(claim, profile, verdict, None, "", sq.Sequence(value, low, high, n))


def test_a_decided_claim_takes_no_runs_and_the_others_draw_extra_seeds(smoke) -> None:
    pack, campaigns = smoke
    campaigns = {("defaults", "smoke"): campaigns["defaults"]}
    claims = [c for c in pack.claims if c.design == "smoke"]
    by = {c.id: c for c in claims}
    verdicts = [_verdict(by["share-below"], "defaults", "holds", 40, 0.5, 0.3, 0.7),
                _verdict(by["ratio-of-medians-1kB"], "defaults", "inconclusive", 12, 1.8, 1.0, 2.6),
                _verdict(by["median-point-ratio"], "defaults", "holds", 8, 1.0, 0.9, 1.2),
                _verdict(by["trend-bw"], "defaults", "holds", 4, -1.0, -1.0, -0.5),
                _verdict(by["p95-ratio"], "defaults", "holds", 24, 1.0, 0.8, 1.2)]
    campaign = campaigns[("defaults", "smoke")]
    campaign.statuses = {r.key: Status.OK for r in campaign.prepared.runs}   # every design run done
    selection, idle = allocate.next_batch(claims, campaigns, verdicts, capacity=60.0)
    chosen = selection.runs[("defaults", "smoke")]
    assert idle["share-below"] == "decided" and selection.claim_units.get("share-below", 0) == 0
    assert chosen and all(r.size == 1000 and r.repetition >= 3 for r in chosen)   # only the undecided claim's
    assert {r.label for r in chosen} == {"quic", "quic-fec-rs"}
    assert sum(campaign.seconds(r) for r in chosen) <= 60.0
    assert all(r in campaign.prepared.runs for r in chosen)   # adopted: the recorder will insert them


def test_the_claim_nearest_its_verdict_goes_first(smoke) -> None:
    pack, campaigns = smoke
    campaigns = {("defaults", "smoke"): campaigns["defaults"]}
    claims = [c for c in pack.claims if c.id in ("share-below", "ratio-of-medians-1kB")]
    near = dataclasses.replace(claims[1])
    verdicts = [_verdict(claims[0], "defaults", "inconclusive", 12, 0.98, 0.4, 1.0),   # far: needs hundreds
                _verdict(near, "defaults", "inconclusive", 12, 1.5, 1.1, 2.05)]          # near: a few more
    one = min(campaigns[("defaults", "smoke")].seconds(r) for r in campaigns[("defaults", "smoke")].prepared.runs)
    selection, _ = allocate.next_batch(claims, campaigns, verdicts, capacity=4.5 * one)
    assert selection.claim_units.get("ratio-of-medians-1kB", 0) >= 1
    assert selection.claim_units.get("share-below", 0) == 0


def test_a_unit_dearer_than_a_batch_still_goes_to_the_claim_nearest_its_verdict(smoke) -> None:
    """Near the end of a budget batches are short: the most promising claim's unit goes in whole if the time
    left allows it (networking2019's fig9 units, 2.2 min, never fit the last 2-min batches of a 2 h run)."""
    pack, campaigns = smoke
    campaigns = {("defaults", "smoke"): campaigns["defaults"]}
    claims = [c for c in pack.claims if c.id in ("share-below", "ratio-of-medians-1kB")]
    verdicts = [_verdict(claims[0], "defaults", "inconclusive", 12, 0.98, 0.4, 1.0),
                _verdict(claims[1], "defaults", "inconclusive", 12, 1.5, 1.1, 2.05)]
    unit = max(campaigns[("defaults", "smoke")].seconds(r) for r in campaigns[("defaults", "smoke")].prepared.runs)
    left = allocate.next_batch(claims, campaigns, verdicts, capacity=0.5 * unit, ceiling=10 * unit)[0]
    assert left.claim_units.get("ratio-of-medians-1kB", 0) == 1 and sum(left.claim_seconds.values()) <= 10 * unit
    assert left.claim_units.get("share-below", 0) == 0        # the batch is full once that unit is in
    short = allocate.next_batch(claims, campaigns, verdicts, capacity=0.5 * unit, ceiling=0.5 * unit)[0]
    assert not any(short.runs.values())                        # nothing beyond the time left


def _beside_a_fresh_claim(smoke, other: tuple, blocks: int) -> dict[str, int]:
    """Units a batch of ``blocks`` runs of both labels gives "share-below" (measured: ``other``) and
    "median-point-ratio" (nothing measured: its first block is min_seeds 3 × 3 points, 9 units)."""
    pack, campaigns = smoke
    campaigns = {("defaults", "smoke"): campaigns["defaults"]}
    claims = [c for c in pack.claims if c.id in ("share-below", "median-point-ratio")]
    verdicts = [_verdict(claims[0], "defaults", "inconclusive", *other),
                ev.Verdict(claims[1], "defaults", "inconclusive", None, "no runs yet")]
    campaign = campaigns[("defaults", "smoke")]
    one = max(campaign.seconds(r) for r in campaign.prepared.runs)
    selection, _ = allocate.next_batch(claims, campaigns, verdicts, capacity=blocks * 2 * one)
    return selection.claim_units


def test_a_claim_with_nothing_measured_goes_before_a_claim_far_from_its_verdict(smoke) -> None:
    units = _beside_a_fresh_claim(smoke, (40, 0.75, 0.3, 1.0), blocks=9)      # far: ~38 units
    assert units.get("median-point-ratio", 0) >= 9


def test_a_claim_with_nothing_measured_waits_behind_a_claim_a_unit_from_its_verdict(smoke) -> None:
    units = _beside_a_fresh_claim(smoke, (12, 0.6, 0.45, 0.9), blocks=3)      # near: 1 unit
    assert units.get("share-below", 0) >= 3
    assert units.get("median-point-ratio", 0) == 0


def test_a_claim_with_nothing_measured_needs_at_least_what_could_decide_it(smoke) -> None:
    """Nothing measured: the allocator's need and the page's projection are the fewest blocks a unanimous
    sample decides on (a median over points: more than the 3 points an interval needs), said as a lower bound;
    a claim with an unbounded interval still short of that many gets the rest of them."""
    from fecbench.reproduce import session

    pack, campaigns = smoke
    campaigns = {("defaults", "smoke"): campaigns["defaults"]}
    claim = next(c for c in pack.claims if c.id == "median-point-ratio")
    alpha = ev.claim_alpha(pack)
    fewest = claim.stat.fewest_observations(claim.params, claim.compare, claim.threshold, claim.tolerance, alpha)
    assert fewest > claim.stat.min_for_interval
    fresh = ev.Verdict(claim, "defaults", "inconclusive", None, "no runs yet", None, alpha)
    units, seconds, at_least = allocate.projection(claim, [fresh], campaigns)
    assert units == fewest * 3 and seconds > 0 and at_least
    assert allocate.need_units(claim, [fresh]) == units
    short = ev.Verdict(claim, "defaults", "inconclusive", None, "", sq.Sequence(1.2, -math.inf, math.inf, 2), alpha)
    assert allocate.projection(claim, [short], campaigns)[0] == (fewest - 2) * 3
    session._what_it_would_take([fresh], campaigns)
    assert f"at least (every observation agreeing) {units:.0f} more unit(s)" in fresh.reason
    # Its hours are those of its own points and sizes (the mean over every size had said 0.3 h for
    # networking2019's 1 MB claims, whose 36 units take 1 h on this machine)
    one_kb = next(c for c in pack.claims if c.id == "ratio-of-medians-1kB")
    units, seconds, _ = allocate.projection(one_kb, [dataclasses.replace(fresh, claim=one_kb)], campaigns)
    campaign = campaigns[("defaults", "smoke")]
    runs = [r for r in campaign.prepared.runs if r.size == 1000 and r.label in ("quic", "quic-fec-rs")]
    assert seconds / units == pytest.approx(2 * np.mean([campaign.seconds(r) for r in runs]))


def test_the_note_says_when_a_value_on_a_boundary_has_no_projection() -> None:
    from fecbench.reproduce import session

    claim = next(c for c in load_pack("networking2019").claims if c.id == "fig5-mss-50kB-75pct")
    on_edge = ev.Verdict(claim, "paper", "inconclusive", None, "20 blocks", sq.Sequence(0.6, 0.293, 0.906, 20))
    unbounded = ev.Verdict(claim, "paper", "inconclusive", None, "20 blocks", sq.Sequence(math.inf, 0.3, math.inf, 20))
    session._what_it_would_take([on_edge, unbounded], {})
    assert "sits on a verdict's boundary" in on_edge.reason and "boundary" not in unbounded.reason
