"""Reproduction packs without root: the packs' files, statistics and verdicts, the budget plan, profiles,
evaluation on a recorded database, the engine's explicit run list and stop time (fake testbed), the CLI's
errors. The smoke pack end to end on real networks is tests/test_reproduce_pack.py."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench.host import cleanup
from fecbench.inputs.errors import SpecError, UserError
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.executors.serial import SerialExecutor
from fecbench.runners.experiment.prepare import prepare
from fecbench.verdicts import budgeting, profiles
from fecbench.verdicts import campaign as cp
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts import sequential as sq
from fecbench.verdicts import statistics as st
from fecbench.verdicts.pack import Claim, Source, load_pack, pack_names
from tests.helpers.analysis_db import make_download_db
from tests.helpers.campaign import fake_design, fecbench
from tests.helpers.fake_testbed import FakeTestbed

REAL_PACKS = ["aa", "networking2019", "rquic2021", "short-messages", "smoke", "starlink-uploads", "thesis2018"]


def test_every_pack_loads_and_cites_its_sources() -> None:
    assert pack_names() == REAL_PACKS
    for name in REAL_PACKS:
        pack = load_pack(name)
        assert pack.default_profile in pack.profiles
        for claim in pack.claims:
            assert claim.source.paper in pack.papers and claim.source.quote and claim.source.section
        for profile in pack.profiles.values():
            assert profile.description


def test_every_shipped_claim_can_be_decided_sequentially() -> None:
    """A claim on a statistic without a confidence sequence stays inconclusive at any budget (#35): the
    shipped packs state theirs on one that has one (networking2019's Fig. 10 means, on the median)."""
    undecidable = [(name, claim.id) for name in REAL_PACKS for claim in load_pack(name).claims
                   if claim.stat.no_sequence]
    assert undecidable == []


def test_the_fairness_claims_wait_for_their_design() -> None:
    pack = load_pack("networking2019")
    fig9 = [c for c in pack.claims if c.id.startswith("fig9")]
    assert fig9 and all(c.design == "fairness" for c in fig9)
    if not pack.designs["fairness"].present:
        assert all("issue #26" in (c.needs or "") for c in fig9)
        verdicts = ev.evaluate(pack, {}, ["paper"])
        assert {v.verdict for v in verdicts if v.claim.id.startswith("fig9")} == {ev.NOT_RUNNABLE}


def _pack(tmp_path: Path, claims: str, extra: str = "") -> Path:
    folder = tmp_path / "mine"
    folder.mkdir(parents=True)
    design = Path(__file__).resolve().parent.parent / "designs" / "reproduce-smoke.toml"
    (folder / "pack.toml").write_text(textwrap.dedent(f"""
        [pack]
        title = "t"
        default_profile = "a"
        [papers.x]
        cite = "X"
        [designs]
        d = "{design}"
        [profiles.a]
        description = "a"
        {extra}
        """))
    (folder / "claims.toml").write_text(textwrap.dedent(claims))
    return folder


CLAIM = """
    [[claim]]
    id = "c"
    text = "t"
    design = "d"
    statistic = "ratio_of_medians"
    label = "quic-fec-rs"
    baseline = "quic"
    compare = "<"
    threshold = 1.0
    source = {{ paper = "x", section = "s", quote = "q" }}
    {more}
    """


@pytest.mark.parametrize(("more", "key"), [
    ("colour = 1", "claim[0].colour"),
    ("where = { size = '3kB' }", "claim[0].where.size"),
    ("where = { nope = 1 }", "claim[0].where.nope"),
    ("where = { loss_class = 'some' }", "claim[0].where.loss_class"),
    ("q = 2", "claim[0].q"),
])
def test_a_bad_claim_names_its_file_and_key(tmp_path: Path, more: str, key: str) -> None:
    folder = _pack(tmp_path, CLAIM.format(more=more))
    with pytest.raises(SpecError) as err:
        load_pack(folder)
    assert err.value.key == key and str(err.value.file).endswith("claims.toml")


def test_a_bad_label_or_profile_is_a_user_error(tmp_path: Path) -> None:
    folder = _pack(tmp_path, CLAIM.format(more="").replace('"quic-fec-rs"', '"nope"'))
    with pytest.raises(SpecError, match="no label 'nope'"):
        load_pack(folder)
    folder = _pack(tmp_path / "b", CLAIM.format(more=""), extra='set = { repair_cc = 3 }')
    with pytest.raises(SpecError, match="profiles.a.set"):
        load_pack(folder)


def test_the_cli_exits_2_on_a_bad_pack(tmp_path: Path) -> None:
    folder = _pack(tmp_path, CLAIM.format(more="").replace('compare = "<"', 'compare = "about"'))
    done = fecbench("reproduce", str(folder), "--no-run")
    assert done.returncode == 2 and re.search(r"claims\.toml(:\d+)?: claim\[0\]\.compare", done.stderr)
    done = fecbench("reproduce", "no-such-pack")
    assert done.returncode == 2 and "no reproduction pack 'no-such-pack'" in done.stderr
    done = fecbench("reproduce", "smoke", "--budget", "soon", "--dry-run")
    assert done.returncode == 2 and "--budget 'soon'" in done.stderr
    done = fecbench("reproduce", "smoke", "--error", "fdp", "--dry-run")
    assert done.returncode == 2 and "--error 'fdp': choose fwer or fdr" in done.stderr


def test_budget_text() -> None:
    assert budgeting.parse_budget("30m") == 1800 and budgeting.parse_budget("1h30m") == 5400
    assert budgeting.parse_budget("90s") == 90 and budgeting.parse_budget("2") == 120
    for bad in ("", "m", "0s", "3 days"):
        with pytest.raises(UserError):
            budgeting.parse_budget(bad)


# --- statistics and verdicts ------------------------------------------------------------------------------------

def test_verdict_rule() -> None:
    assert st.verdict(0.5, 0.4, 0.6, "<", 1.0, 0) == "holds"
    assert st.verdict(1.5, 1.2, 1.8, "<", 1.0, 0) == "fails"
    assert st.verdict(0.9, 0.7, 1.1, "<", 1.0, 0) == "inconclusive"
    assert st.verdict(1.5, 1.2, 1.8, ">", 1.0, 0) == "holds"
    assert st.verdict(0.75, 0.65, 0.85, "approx", 0.75, 0.15) == "holds"
    assert st.verdict(0.3, 0.2, 0.4, "approx", 0.75, 0.15) == "fails"
    assert st.verdict(0.6, 0.5, 0.7, "approx", 0.75, 0.15) == "inconclusive"
    assert st.verdict(0.5, math.nan, math.nan, "<", 1.0, 0) == "inconclusive"


def _pairs(ratios: list[float], groups: int = 1) -> pd.DataFrame:
    base = np.full(len(ratios), 100.0)
    value = base * np.asarray(ratios, float)
    return pd.DataFrame({"draw": range(len(ratios)), "cell": 0, "group": [str(i % groups) for i in range(len(ratios))],
                         "value": value, "base": base, "ratio": ratios, "value_lo": value, "value_hi": value,
                         "base_lo": base, "base_hi": base, "ratio_lo": ratios, "ratio_hi": ratios})


def test_share_of_pairs_and_its_interval() -> None:
    sample = _pairs([0.8] * 15 + [1.2] * 5)
    e = st.get("share_pairs_below").estimate(sample, {}, seed=1)
    assert e.value == pytest.approx(0.75) and e.low < 0.75 < e.high and e.n == 20
    assert st.get("share_pairs_below").estimate(sample, {}, seed=1).low == e.low  # seeded
    ties = _pairs([1.0] * 10 + [0.5] * 3 + [2.0] * 1)
    assert st.get("share_pairs_below").estimate(ties, {"ties": "exclude"}).value == pytest.approx(0.75)
    assert st.get("share_pairs_below").estimate(ties, {}).value == pytest.approx(3 / 14)
    few = st.get("ratio_of_medians").estimate(_pairs([0.5, 0.6]), {})
    assert not few.has_interval and "too few" in few.note


def test_timeouts_count_as_infinite() -> None:
    sample = _pairs([0.9] * 4 + [1.1] * 2)
    sample.loc[[0, 1, 2], "value"] = np.inf   # the label timed out in half the pairs
    sample.loc[[0, 1, 2], "ratio"] = np.inf
    e = st.get("median_pair_ratio").estimate(sample, {})
    assert e.value > 1


def test_point_block_statistics_and_trend() -> None:
    """A census reads every cell's seeds (each cell's own ratio of medians); a block statistic each draw's block;
    a trend each draw's two blocks (issue 58: one estimand each)."""
    rows = []
    for point, bw in enumerate([1.0, 2.0, 4.0, 8.0, 16.0]):
        for seed in range(5):
            ratio = 2.0 / bw * (1 + 0.01 * seed)
            rows.append({"draw": point, "cell": 0, "group": f"{point}|1", "value": 100 * ratio, "base": 100.0,
                         "ratio": ratio, "factor": bw})
    rows.append({"draw": 9, "cell": 0, "group": "9|1", "value": 50.0, "base": 100.0, "ratio": 0.5, "factor": 3.0})
    sample = pd.DataFrame(rows)
    e = st.get("median_point_ratio").estimate(sample, {"min_seeds": 3}, seed=2)
    assert e.n == 6 and e.value == pytest.approx(float(np.median([2.04, 1.02, 0.51, 0.255, 0.1275, 0.5])))
    share = st.get("share_points_below").estimate(sample, {}, seed=2)
    assert share.value == pytest.approx(4 / 6)
    blocks = st.get("median_block_ratio").estimate(sample, {"min_seeds": 3}, seed=2)
    assert blocks.n == 6 and blocks.value == e.value      # one block per draw here: the same ratios
    pairs = []
    for draw in range(6):     # two blocks per draw, the ratio falling as the bandwidth grows
        for cell, bw in ((0, 1.0 + draw), (1, 10.0 + draw)):
            for seed in range(3):
                ratio = 2.0 / bw * (1 + 0.01 * seed)
                pairs.append({"draw": draw, "cell": cell, "group": f"{draw}{cell}|1", "value": 100 * ratio,
                              "base": 100.0, "ratio": ratio, "factor": bw, "value_lo": 100 * ratio,
                              "value_hi": 100 * ratio, "base_lo": 100.0, "base_hi": 100.0})
    t = st.get("trend").estimate(pd.DataFrame(pairs), {"min_seeds": 3}, seed=2)
    assert t.value == pytest.approx(-1.0) and t.n == 6


def test_quantile_ratio_is_unpaired() -> None:
    label, base = np.arange(1.0, 101.0), np.arange(2.0, 202.0, 2.0)
    e = st.get("quantile_ratio").estimate(st.Runs(label, base), {"q": 0.95}, seed=3)
    assert e.value == pytest.approx(0.5) and e.low <= 0.5 <= e.high


def _sample_for(stat: st.ClaimStatistic) -> pd.DataFrame | st.Runs:
    """A small sample of what the statistic reads: 12 draws over 6 points (a trend's draws: two points, a point
    statistic's: 3 seeds), with a factor and every value's bounds (``samples``), or each side's runs."""
    if stat.reads in (st.RUNS, st.FLOWS):
        return st.Runs(np.arange(1.0, 21.0), np.arange(2.0, 42.0, 2.0))
    rows = []
    for draw in range(12):
        for cell in range(stat.points_per_observation):
            point = (2 * draw + cell) % 6
            for seed in range(stat.seeds_per_point({"min_seeds": 3})):
                value = 100.0 * (0.6 + 0.1 * point + 0.01 * seed)
                rows.append({"draw": draw, "cell": cell, "group": f"{point}|", "factor": float(point), "value": value,
                             "base": 100.0, "ratio": value / 100, "value_lo": value, "value_hi": value,
                             "base_lo": 100.0, "base_hi": 100.0, "ratio_lo": value / 100, "ratio_hi": value / 100})
    return pd.DataFrame(rows)


def _defaults(stat: st.ClaimStatistic) -> dict:
    params = {"min_seeds": 3, "loss_direction": "any", **{p.name: p.default for p in stat.params}}
    return {**params, **{p.name: {float: 0.5, str: "f"}[p.kind] for p in stat.params if p.required}}


def test_every_claim_statistic_is_complete() -> None:
    """Issue 36: each registered statistic is one object that answers everything the harness asks: what it
    reads and needs from the plan, its keys, its estimate with an interval, its anytime-valid form (or why
    none), its words; the pack format's choices are the registry's names."""
    from fecbench.verdicts import pack as pk

    assert pk.STATISTICS == tuple(st.REGISTRY) and len(st.REGISTRY) >= 11
    for name, stat in st.REGISTRY.items():
        assert isinstance(stat, st.ClaimStatistic) and stat.name == name and st.get(name) is stat
        assert stat.reads in (st.PAIRS, st.RUNS, st.FLOWS), name
        assert stat.unit in ("pairs", "points", "runs", "blocks", "pairs of blocks") and stat.sequence_unit, name
        assert stat.text and stat.estimand_text, f"{name}: its estimand is written (issue 58)"
        assert all(isinstance(p, st.Param) for p in stat.params), name
        params = _defaults(stat)
        assert stat.min_for_interval >= 3 and stat.first_block(params) >= stat.min_for_interval, name
        assert stat.points_per_observation in (1, 2) and stat.seeds_per_point(params) >= 1, name
        assert stat.seeds_per_point(params) == (3 if stat.needs_points else 1), name
        words = stat.describe(params, "fec", "quic")
        assert words and "{" not in words, name
        sample = _sample_for(stat)
        estimate = stat.estimate(sample, params, seed=1, n_boot=50)
        assert isinstance(estimate, st.Estimate) and estimate.unit == stat.unit and estimate.samples, name
        assert not math.isnan(estimate.value) and estimate.has_interval, (name, estimate)
        assert estimate.value == stat.estimand(sample, params), f"{name}: the page's number is its estimand's"
        sequence = stat.sequence(sample, params, 0.05)
        if sequence is None:
            assert stat.no_sequence, f"{name}: no confidence sequence and no reason why"
        else:
            assert isinstance(sequence, sq.Sequence) and sequence.n > 0 and not stat.no_sequence, name


def test_a_campaign_without_finished_pairs_gives_no_estimate_not_an_error() -> None:
    """No pair finished (every run failed): the pair columns come empty and of object dtype."""
    empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in ("group", "value", "base", "ratio")})
    for name, stat in st.REGISTRY.items():
        if stat.reads == st.PAIRS:
            estimate = stat.estimate(empty, _defaults(stat), seed=1, n_boot=50)
            assert math.isnan(estimate.value) and estimate.n == 0 and estimate.note, (name, estimate)


# --- evaluation on a recorded database ---------------------------------------------------------------------------

def _claim(**kw) -> Claim:
    base = dict(id="c", text="t", design="d", statistic="share_pairs_below", label="quic-fec-rs",
                baseline="quic", metric="dct_ms", where={}, compare=">", threshold=0.5, tolerance=0.0,
                source=Source("x", "s", "", "q"),
                # the synthetic campaign's FEC gains on 1 kB are a few %: within the twins' margin, so its claims state
                # a finer one (statistics.ties)
                params={"min_seeds": 3, "loss_direction": "any", "tie_margin": 0.001})
    base.update(kw)
    return Claim(**base)


def _judge(claim: Claim, db: Path, data: ev.Data | None = None) -> ev.Verdict:
    from fecbench.analysis import results
    from fecbench.verdicts.draws import space_from_runs

    return ev.evaluate_claim(claim, "p", data or ev.Data(db), space_from_runs(results.load(db)), seed=1)


def test_claims_on_a_database(tmp_path: Path) -> None:
    # 12 points × 16 seeds: a claim reads the prefix of its own draws whose runs are done (uniformly random
    # points, each draw a point's next seed), until a draw asks for a seed the campaign never ran.
    db = make_download_db(tmp_path / "d.sqlite", points=12, repetitions=16)
    data = ev.Data(db)
    # In the synthetic campaign FEC saves the retransmission penalty on small files and pays 1.5x on 1 MB.
    small = _judge(_claim(where={"size": [1000]}), db, data)
    assert small.verdict == "holds" and small.sequence.n >= 12 and small.sequence.low > 0.5
    assert "waits for a run not run yet" in small.reason and small.stopped == "decided"
    large = _judge(_claim(statistic="median_point_ratio", where={"size": [1_000_000]}, compare=">", threshold=1.0),
                   db, data)
    assert large.sequence.n >= 3 and large.sequence.low > 1.0
    rlc = _claim(label="quic-fec-rlc", where={"size": [1000]})
    excluded = _judge(rlc, db, data)   # a failed run is final (issue 69): imputed, nothing waits to run it again
    assert "to run again" not in excluded.reason and "label failed" in excluded.reason
    assert "value(s) imputed" in excluded.reason
    nothing = _judge(_claim(where={"bw": {"min": 100.0, "max": 200.0}}), db, data)
    assert nothing.verdict == "inconclusive" and "no observations" in nothing.reason


def test_a_claims_sample_is_its_own_draws_whatever_else_was_run(tmp_path: Path) -> None:
    """Issue 46 (1): a claim over 1, 10 and 50 kB reads its own draws, a third of each size in the long run,
    however many 1 kB runs another claim bought; on main 2781c76 its sample was every matching run in the
    database, 74 % 1 kB pairs when the 1 kB claim had bought them, and a true claim failed 40 times in 40."""
    from fecbench.analysis import results
    from fecbench.verdicts import draws, samples

    db = make_download_db(tmp_path / "d.sqlite", points=4, repetitions=60, failures=0)
    frame = results.load(db)
    space = draws.space_from_runs(frame)
    claim = _claim(where={"size": [1000, 10000, 50000]})
    everything = samples.sample(claim, ev.Data(db), draws.draws(claim, space))
    # Only the 1 kB runs beyond the first 10 seeds: the other sizes stop at 10 seeds (what another claim bought).
    kept = frame[(frame["size"] == 1000) | (frame["repetition"] < 10)]
    kept.attrs.update(frame.attrs)
    fewer = samples.sample(claim, ev.Data(db, kept), draws.draws(claim, space))
    assert len(fewer.rows) < len(everything.rows)
    assert fewer.rows.equals(everything.rows.iloc[:len(fewer.rows)])   # a prefix of the same draws
    share_1kb = (everything.rows["group"].str.endswith("|1000")).mean()
    assert 0.25 < share_1kb < 0.42                                      # a third, not the 1 kB claim's mix


# --- plan: draws, selection, budget ------------------------------------------------------------------------------

@pytest.fixture()
def smoke_prepared(tmp_path: Path):
    pack = load_pack("smoke")
    target = profiles.write(pack, pack.profile("defaults"), pack.designs["smoke"], tmp_path)
    return pack, cp.Campaign("defaults", "smoke", target.db, prepare(target.design), {})


def test_a_claims_draws_are_its_own_cells_at_each_cells_next_seeds(smoke_prepared) -> None:
    """A point statistic's draw is min_seeds consecutive seeds of one point; a pair statistic's one seed of one
    of its cells; cells drawn uniformly (seeded: the same draws every time), each cell's seeds in turn."""
    pack, campaign = smoke_prepared
    by_id = {c.id: c for c in pack.claims}
    point_draws = campaign.draws(by_id["median-block-ratio"])
    first = point_draws[0].units
    # over every size: each size's seeds in a lane of their own (draws._lanes), consecutive within it
    stride = len(campaign.space.sizes)
    reps = [u.mine[1] for u in first]
    assert reps == [reps[0] + k * stride for k in range(3)] and reps[0] < stride
    assert len({u.mine[0] for u in first}) == 1
    pair_draws = campaign.draws(by_id["ratio-of-medians-1kB"])
    assert all(len(d.units) == 1 and d.units[0].mine[2] == 1000 for d in pair_draws)
    assert pair_draws == campaign.draws(by_id["ratio-of-medians-1kB"])            # seeded
    seen: dict[int, int] = {}
    for d in pair_draws[:200]:
        point, rep = d.units[0].mine[0], d.units[0].mine[1]
        assert rep == seen.get(point, 0)                                      # each cell's next seed
        seen[point] = rep + 1
    assert len(seen) == 4 and min(seen.values()) > 30                          # 4 cells, about 50 each
    trend = campaign.draws(by_id["trend-bw"])[0]
    assert {u.cell for u in trend.units} == {0, 1}


def test_selection_fits_the_capacity_and_shares_it(smoke_prepared) -> None:
    pack, campaign = smoke_prepared
    campaigns = {("defaults", "smoke"): campaign}
    everything = budgeting.select(pack.claims, campaigns, None, full=True)
    assert len(everything.runs[("defaults", "smoke")]) == len(campaign.prepared.runs)
    half = everything.seconds[("defaults", "smoke")] / 2
    some = budgeting.select(pack.claims, campaigns, half)
    assert 0 < some.seconds[("defaults", "smoke")] <= half
    share = half / len([c for c in pack.claims if c.design == "smoke"])
    for claim in pack.claims:
        if claim.design != "smoke":
            continue
        block = campaign.draws(claim)[:budgeting.first_block(claim)]
        cost = sum(campaign.seconds(run) for draw in block for run in budgeting.draw_runs(claim, campaign, draw))
        taken = some.claim_draws[claim.id]
        # A claim whose first block fits an equal share gets it whole; none gets part of its first block.
        assert taken >= len(block) if cost <= share else taken in (0,) or taken >= len(block), claim.id
    campaign.statuses = {r.key: "ok" for r in campaign.prepared.runs}
    assert budgeting.select(pack.claims, campaigns, None, full=True).runs[("defaults", "smoke")] == []


def test_measured_durations_scale_the_model(smoke_prepared, tmp_path: Path) -> None:
    from fecbench.records import db as dbmod

    _, campaign = smoke_prepared
    db = tmp_path / "m.sqlite"
    con = dbmod.connect(db)
    rows = [(r.key, r.point, r.repetition, r.size, r.label, 3 * campaign.prepared.estimate(r), "ok")
            for r in campaign.prepared.runs[:6]]
    con.executemany("INSERT INTO runs (key, point, repetition, size, label, duration_s, status) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    (tmp_path / "foreign.sqlite").write_text("not a database")
    cp.measured_durations(campaign, [db, tmp_path / "foreign.sqlite", tmp_path / "absent.sqlite"])
    assert campaign.factor == pytest.approx(3.0) and campaign.measured == 6
    unmeasured = cp.Campaign("other", "smoke", db, campaign.prepared, {})
    cp.share_factors([campaign, unmeasured])
    assert unmeasured.factor == pytest.approx(3.0)


def test_profiles_touch_only_declared_arguments(tmp_path: Path) -> None:
    pack = load_pack("networking2019")
    today = profiles.write(pack, pack.profile("today"), pack.designs["fixed"], tmp_path)
    free = profiles.write(pack, pack.profile("repair-free"), pack.designs["fixed"], tmp_path)
    design_today, design_free = prepare(today.design).design, prepare(free.design).design
    assert all("initial_window" not in e.args and "max_window" not in e.args for e in design_today.impls)
    assert all(e.args["repair_cc"] == "free" and e.args["initial_window"] == "32" for e in design_free.impls)
    assert design_free.name == "networking2019-fixed.repair-free"
    multipath = load_pack("thesis2018")
    cubic = profiles.write(multipath, multipath.profile("cubic"), multipath.designs["multipath"], tmp_path)
    assert all("cc" not in e.args for e in prepare(cubic.design).design.impls)


# --- the engine: an explicit run list and a stop time (fake testbed) ----------------------------------------------

def test_engine_runs_only_the_listed_runs_and_stops_in_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    design = fake_design(tmp_path / "c.toml", {"a": {}, "b": {}}, points=3, timeout_s=10)
    prepared = prepare(design)
    db = tmp_path / "c.sqlite"
    chosen = list(reversed(prepared.runs))[:3]

    def engine(**kw) -> Engine:
        executor = SerialExecutor(prepared, db, link_backend=None,
                                  testbed_factory=lambda t, v, b: FakeTestbed(t, v, b))
        return Engine(prepared, db, executor, SilentReporter(), **kw)

    summary = engine(only=chosen).run(set())
    assert summary.selected == 3 and summary.counts["ok"] == 3
    from fecbench.runners.run.recorder import read_statuses

    statuses = read_statuses(db)
    assert {k for k, s in statuses.items() if s == "ok"} == {r.key for r in chosen}
    late = engine(stop_at=0.0).run(set())     # the stop time has passed: nothing starts, all stay pending
    assert late.out_of_time == len(prepared.runs) - 3 and sum(late.counts.values()) == 0


def test_the_deadline_interrupts_like_ctrl_c() -> None:
    import time

    from fecbench.verdicts.execute import BudgetSpent, deadline_alarm

    with pytest.raises(BudgetSpent), deadline_alarm(time.monotonic() + 0.05):
        time.sleep(30)
    assert issubclass(BudgetSpent, KeyboardInterrupt)   # the engine records runs in flight as interrupted
    with deadline_alarm(None):
        pass


def test_the_page_opens_on_the_verdicts(tmp_path: Path) -> None:
    import json

    from fecbench.verdicts import page

    pack = load_pack("smoke")
    claims = {c.id: c for c in pack.claims}
    verdicts = [
        ev.Verdict(claims["share-below"], "defaults", "holds",
                   st.Estimate(0.6, 0.5, 0.7, 12, "pairs", samples={"ratio": np.array([0.5, np.inf, 1.2])}),
                   sequence=sq.Sequence(0.6, 0.3, 0.9, 12), alpha=0.01, looks=3),
        ev.Verdict(claims["trend-bw"], "defaults", "inconclusive",
                   st.Estimate(-0.2, -1.0, 0.8, 4, "points", samples={"block_ratio": np.array([1.0, 2.0, 0.5, 1.5]),
                                                                      "factor": np.array([5.0, 8, 12, 20])})),
        ev.Verdict(claims["p95-ratio"], "defaults", "inconclusive",
                   st.Estimate(math.inf, math.nan, math.nan, 2, "runs", "too few",
                               samples={"label": np.array([np.inf, 3.0]), "baseline": np.array([2.0, 1.0])}),
                   sequence=sq.Sequence(math.inf, 0.0, math.inf, 2)),
        ev.Verdict(claims["absent-design"], "defaults", ev.NOT_RUNNABLE, None, "needs it"),
    ]
    html_path = page.write(pack, ["defaults"], verdicts, {}, tmp_path)
    text = html_path.read_text()
    assert text.index("Verdicts") < text.index("Claims") and "not runnable here" in text
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["p95-ratio.png", "share-below.png",
                                                                         "trend-bw.png"]
    saved = {v["claim"]: v for v in json.loads((tmp_path / "verdicts.json").read_text())}
    assert saved["p95-ratio"]["value"] == "inf" and saved["absent-design"]["value"] is None
    assert saved["p95-ratio"]["bootstrap_value"] == "inf" and saved["p95-ratio"]["cs"] == [0.0, "inf"]
    # Per claim: the statistic's anytime-valid interval, its level, the looks taken and why it stopped.
    assert saved["share-below"]["cs"] == [0.3, 0.9] and saved["share-below"]["looks"] == 3
    assert saved["share-below"]["stopped"] == "decided" and saved["absent-design"]["stopped"] == "not runnable"
    assert saved["trend-bw"]["statistic"] == "trend" and saved["trend-bw"]["stopped"] == "budget"
    assert "3 look(s), stopped: decided" in text
    # Issue 46 (5): one level for the page, over every verdict it shows (claims × profiles), stated once.
    assert text.count("Error level.") == 1 and f"{pack.judgeable} verdict(s) it can show" in text


def test_one_seed_per_point_still_has_an_interval() -> None:
    # Ten points with one seed each: resampling seeds within points alone would give a zero-width interval.
    sample = _pairs([0.5, 0.7, 0.9, 1.1, 1.3, 0.6, 0.8, 1.0, 1.2, 1.4], groups=10)
    e = st.get("median_pair_ratio").estimate(sample, {}, seed=4)
    assert e.low < e.value < e.high
    share = st.get("share_pairs_below").estimate(sample, {}, seed=4)
    assert share.low < share.high


def test_a_unanimous_share_of_few_pairs_is_not_certain() -> None:
    e = st.get("share_pairs_above").estimate(_pairs([1.5] * 5, groups=5), {}, seed=5)
    assert e.value == 1.0 and e.high == 1.0 and e.low < 0.6   # Wilson: about [0.57, 1]
    assert st.verdict(e.value, e.low, e.high, ">", 0.5, 0) == "holds"
    few = st.get("share_pairs_above").estimate(_pairs([1.5] * 3, groups=3), {}, seed=5)
    assert st.verdict(few.value, few.low, few.high, ">", 0.5, 0) == "inconclusive"
