"""`fecbench compare A B --margin` without root (issue 60): the paired statistic and its verdicts (same within
margin, worse, better, not enough data), flagged and failed runs left out and counted, timeouts censored, the
unpaired fallback, what changed (provenance side by side), exit codes, --json and bad input. Databases are
small synthetic campaigns written through the real schema (tests/helpers/analysis_db.py); every expectation is
computed from what the test put in."""

from __future__ import annotations

import json
import math
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from fecbench.analysis import results
from fecbench.analysis.studies import campaign_change as cc
from fecbench.analysis.studies import campaign_provenance as cp
from fecbench.inputs.errors import UserError
from tests.helpers.analysis_db import make_table_db
from tests.helpers.campaign import fecbench

LABELS = ("quic", "fec")
SIZES = (1000, 50_000)


def smoke_like(path: Path, *, points: int = 4, reps: int = 2, scale: float = 1.0, noise: float = 0.0,
               seed: int = 0, shuffle: bool = False, labels: tuple[str, ...] = LABELS,
               statuses: dict[tuple, str] | None = None, first_point: int = 0) -> Path:
    """A download campaign shaped like designs/smoke.toml (points × labels × sizes × repetitions): a DCT per run
    from the point, size and repetition (the same in every database), times ``scale`` and a uniform jitter of ±
    ``noise``; ``statuses`` sets a run's status ((point, label, size, rep) -> status); ``shuffle`` writes the runs
    in another order (the keys stay)."""
    rng = random.Random(seed)
    rows = []
    for point in range(first_point, first_point + points):
        for label in labels:
            for size in SIZES:
                for rep in range(reps):
                    base = 20 + 7 * point + size / 1000 * 1.5 + 3 * rep + (5 if label == "fec" else 0)
                    dct = base * scale * (1 + rng.uniform(-noise, noise))
                    status = (statuses or {}).get((point, label, size, rep), "ok")
                    rows.append((point, label, size, rep, status, dct if status in ("ok", "fidelity") else None))
    if shuffle:
        random.Random(seed + 1).shuffle(rows)
    return make_table_db(path, rows, name="smoke")


def run(a: Path, b: Path, **kwargs) -> cc.ChangeComparison:
    kwargs.setdefault("margin", cc.Margin.parse("5%"))
    return cc.compare(results.load(a), results.load(b), **kwargs)


def verdicts(comparison: cc.ChangeComparison) -> dict[str, str]:
    return {g.name: g.verdict for g in comparison.groups}


# --- the pure parts ---------------------------------------------------------------------------------------------

def test_margin_parse() -> None:
    assert cc.Margin.parse("5%") == cc.Margin(0.05, True) and str(cc.Margin.parse("5%")) == "5 %"
    assert cc.Margin.parse("3") == cc.Margin(3.0, False)
    for bad in ("five", "-5%", "0%", "150%", ""):
        with pytest.raises(UserError, match="--margin"):
            cc.Margin.parse(bad)
    with pytest.raises(UserError, match="a share"):
        cc.band("ratio", cc.Margin.parse("3"))
    assert cc.band("ratio", cc.Margin.parse("5%")) == pytest.approx((0.95, 1.05))
    assert cc.band("difference", cc.Margin.parse("10%"), reference=-40) == pytest.approx((-4, 4))
    assert cc.band("difference", cc.Margin.parse("3")) == (-3, 3)


@pytest.mark.parametrize(("interval", "metric", "expected"), [
    ((0.97, 1.04), "dct_ms", cc.SAME),
    ((0.95, 1.05), "dct_ms", cc.SAME),           # the band's edges are inside
    ((1.06, 1.3), "dct_ms", "worse"),            # a larger DCT is worse
    ((0.7, 0.9), "dct_ms", "better"),
    ((1.06, 1.3), "recovered", "better"),        # more recovered packets are better
    ((0.7, 0.9), "recovered", "worse"),
    ((1.06, 1.3), "cwnd_final", "larger"),       # no direction
    ((1.01, 1.2), "dct_ms", cc.NOT_ENOUGH),      # straddles the band's edge
    ((0.5, 1.5), "dct_ms", cc.NOT_ENOUGH),
    ((math.nan, math.nan), "dct_ms", cc.NOT_ENOUGH),
])
def test_verdict(interval: tuple[float, float], metric: str, expected: str) -> None:
    assert cc.verdict(interval, (0.95, 1.05), metric) == expected


def test_more_needed_shrinks_the_interval_as_one_over_sqrt_n() -> None:
    # A difference of 0 with an interval ±2 around it and a band ±1: half the width, four times the pairs.
    assert cc.more_needed(10, (0.0, 0.0), (-2.0, 2.0), (-1.0, 1.0), log=False) == 30
    # Outside the band: the interval must clear its edge.
    assert cc.more_needed(10, (3.0, 3.0), (-1.0, 7.0), (-1.0, 1.0), log=False) == 30
    # On the edge, or with a censored end, no number of pairs says.
    assert cc.more_needed(10, (1.0, 1.0), (0.0, 2.0), (-1.0, 1.0), log=False) is None
    assert cc.more_needed(10, (1.0, 1.0), (0.9, math.inf), (0.95, 1.05), log=True) is None
    wider = cc.more_needed(10, (1.0, 1.0), (0.8, 1.25), (0.95, 1.05), log=True)
    narrower = cc.more_needed(10, (1.0, 1.0), (0.9, 1.11), (0.95, 1.05), log=True)
    assert wider is not None and narrower is not None and wider > narrower > 0


def test_unknown_metric() -> None:
    with pytest.raises(UserError, match="unknown metric 'dct'.*did you mean 'dct_ms'"):
        cc.kind_of("dct")
    assert cc.kind_of("dct_ms") == "ratio" and cc.kind_of("recovered") == "difference"


# --- two campaigns -----------------------------------------------------------------------------------------------

def test_same_keys_in_another_order_are_the_same_within_margin(tmp_path: Path) -> None:
    """The issue's resolve test: two campaigns of the smoke design whose runs ran in another order (the same
    keys and loss seeds) and measured within ±1 %: same within a 5 % margin; B slowed by 20 %: worse."""
    a = smoke_like(tmp_path / "a.sqlite", noise=0.01, seed=1)
    b = smoke_like(tmp_path / "b.sqlite", noise=0.01, seed=2, shuffle=True)
    assert set(results.load(a)["key"]) == set(results.load(b)["key"])
    same = run(a, b)
    assert set(verdicts(same).values()) == {cc.SAME} and same.exit_code == cc.EQUIVALENT
    assert all(g.mode == "paired" and g.n == 8 for g in same.groups)
    # The paired ratio is what the runs say: B ÷ A per key, its median.
    fa, fb = results.load(a), results.load(b)
    group = next(g for g in same.groups if g.name == "quic 1 kB")
    mine = fa[(fa.label == "quic") & (fa["size"] == 1000)].merge(fb, on="key", suffixes=("_a", "_b"))
    assert group.change[0] == pytest.approx(float(np.median(mine.dct_ms_b / mine.dct_ms_a)))
    assert group.interval[0] <= group.change[0] <= group.interval[1]

    slow = smoke_like(tmp_path / "slow.sqlite", noise=0.01, seed=2, scale=1.2)
    worse = run(a, slow)
    assert set(verdicts(worse).values()) == {"worse"} and worse.exit_code == cc.DIFFERS
    assert all(g.change[0] == pytest.approx(1.2, abs=0.03) for g in worse.groups)
    better = run(slow, a)
    assert set(verdicts(better).values()) == {"better"}


def test_a_noisy_or_small_campaign_is_not_enough_data(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite", noise=0.0)
    noisy = smoke_like(tmp_path / "noisy.sqlite", noise=0.15, seed=3)
    result = run(a, noisy)
    assert cc.NOT_ENOUGH in verdicts(result).values() and result.exit_code == cc.UNDECIDED
    assert all(g.needs.startswith("about ") and g.needs.endswith(" more pairs")
               for g in result.groups if g.verdict == cc.NOT_ENOUGH)
    small = run(smoke_like(tmp_path / "a1.sqlite", points=1), smoke_like(tmp_path / "b1.sqlite", points=1))
    assert all(g.n == 2 and g.verdict == cc.NOT_ENOUGH and "at least 1 more pairs" in g.needs
               for g in small.groups)
    # A wider margin decides what a narrow one could not.
    assert run(a, noisy, margin=cc.Margin.parse("50%")).exit_code == cc.EQUIVALENT


def test_flagged_and_failed_runs_are_left_out_and_counted(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite")
    b = smoke_like(tmp_path / "b.sqlite", statuses={(0, "quic", 1000, 0): "fidelity", (1, "quic", 1000, 1): "failed"})
    result = run(a, b)
    group = next(g for g in result.groups if g.name == "quic 1 kB")
    assert group.n == 6 and group.left_out == {"a": {}, "b": {"failed": 1, "fidelity": 1}}
    assert group.verdict == cc.SAME


def test_timeouts_are_censored_not_dropped(tmp_path: Path) -> None:
    """B timed out on 7 of 8 runs of a group: their ratios are only known to be at least timeout ÷ A, which is
    far above the margin, so the group is worse, not judged on the run that ended (where it was as fast)."""
    timeouts = {(p, "quic", 50_000, r): "timeout" for p in range(4) for r in range(2)}
    timeouts.pop((3, "quic", 50_000, 1))
    a = smoke_like(tmp_path / "a.sqlite")
    b = smoke_like(tmp_path / "b.sqlite", statuses=timeouts)
    group = next(g for g in run(a, b).groups if g.name == "quic 50 kB")
    assert group.n == 8 and group.verdict == "worse"
    assert group.change[0] > 10_000 / 200 and math.isinf(group.change[1])   # bounds: at least timeout ÷ A


def test_counts_are_compared_by_their_difference(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite")
    b = smoke_like(tmp_path / "b.sqlite")
    for path, recovered in ((a, 10), (b, 6)):
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE metrics SET recovered = ?", (recovered,))
    result = run(a, b, metric="recovered", margin=cc.Margin.parse("2"))
    assert result.kind == "difference" and all(g.change == (-4.0, -4.0) for g in result.groups)
    assert set(verdicts(result).values()) == {"worse"}                     # fewer recovered packets
    assert run(a, b, metric="recovered", margin=cc.Margin.parse("50%")).exit_code == cc.EQUIVALENT   # ±5 of 10


def test_another_label_is_compared_unpaired(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite", reps=3)
    b = smoke_like(tmp_path / "b.sqlite", reps=3, labels=("quic2", "fec"), scale=1.3)
    result = run(a, b, labels={"quic": "quic2"}, by=["point"])
    group = next(g for g in result.groups if g.name == "quic (B: quic2) 1 kB point=0")
    assert group.mode == "unpaired" and group.n == 3
    fa = results.load(a)
    mine = fa[(fa.label == "quic") & (fa["size"] == 1000) & (fa.point == 0)]
    assert group.a_median[0] == pytest.approx(float(mine.dct_ms.median()))
    assert group.change[0] == pytest.approx(1.3)
    assert next(g for g in result.groups if g.name == "fec 1 kB point=0").mode == "paired"
    with pytest.raises(UserError, match="--label quic=nope"):
        run(a, b, labels={"quic": "nope"})


def test_a_group_only_one_side_has_differs(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite")
    b = smoke_like(tmp_path / "b.sqlite", labels=("quic",))
    result = run(a, b)
    assert verdicts(result)["fec 1 kB"] == cc.ONLY_A and result.exit_code == cc.DIFFERS


def test_not_the_same_design_is_bad_input(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite")
    elsewhere = smoke_like(tmp_path / "b.sqlite", first_point=5)    # other points: no key, no condition in common
    with pytest.raises(UserError, match="not the same design"):
        run(a, elsewhere)
    other_labels = smoke_like(tmp_path / "c.sqlite", labels=("tcp",))
    with pytest.raises(UserError, match="no group .* in common"):
        run(smoke_like(tmp_path / "d.sqlite", labels=("quic",)), other_labels)
    with pytest.raises(UserError, match="--by 'owdd'.*did you mean 'owd'"):
        run(a, a, by=["owdd"])


def test_provenance_side_by_side(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite")
    b = smoke_like(tmp_path / "b.sqlite")
    impl = {"quic": {"name": "fecq", "version": "fecq 0.2.0", "binaries": {"binary": {"sha256": "ab" * 32}},
                     "descriptor": "[impl]\n"}}
    with sqlite3.connect(b) as conn:
        conn.execute("UPDATE campaigns SET git_sha = 'f35d330aa1b2', impls_json = ?, host_json = ?",
                     (json.dumps(impl), json.dumps({"kernel": "6.12", "hostname": "lab", "cpus": 8})))
    rows = cp.side_by_side(cp.provenance(a), cp.provenance(b))
    assert cp.changed(rows) == ["fecbench", "impl fecq", "kernel", "machine"]
    by_name = {r.name: r for r in rows}
    assert by_name["impl fecq"].a == cp.NOT_RECORDED and "build abababababab" in by_name["impl fecq"].b
    assert by_name["link backend"].a == by_name["link backend"].b == "netem"
    lines = cp.text(rows)
    assert lines[0] == "what changed: fecbench, impl fecq, kernel, machine"
    assert any(line.startswith("≠ fecbench") for line in lines) and any(line.startswith("  link backend")
                                                                        for line in lines)


# --- the command -------------------------------------------------------------------------------------------------

def test_exit_codes_text_and_json(tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite", noise=0.01, seed=1)
    b = smoke_like(tmp_path / "b.sqlite", noise=0.01, seed=2, shuffle=True)
    slow = smoke_like(tmp_path / "slow.sqlite", noise=0.01, seed=2, scale=1.2)
    noisy = smoke_like(tmp_path / "noisy.sqlite", noise=0.15, seed=3)

    out = fecbench("compare", str(a), str(b), "--margin", "5%")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("what changed:")                        # what changed comes first
    assert any("quic 1 kB" in line and "same within margin" in line for line in lines)
    assert lines[-1].startswith("equivalent: every group the same within 5 %")

    out = fecbench("compare", str(a), str(slow), "--margin", "5%")
    assert out.returncode == 1 and "differs: " in out.stdout and "worse" in out.stdout, out.stdout + out.stderr
    out = fecbench("compare", str(a), str(noisy), "--margin", "5%", "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 3 and data["exit_code"] == 3 and data["metric_comparison"]["outcome"] == "undecided"
    assert data["changed"] == [] and data["same"] is True                 # the key check is there too
    assert {g["verdict"] for g in data["metric_comparison"]["groups"]} <= {cc.SAME, cc.NOT_ENOUGH}
    # Without --margin: the key check alone, as before.
    assert fecbench("compare", str(a), str(slow)).returncode == 0
    help_text = fecbench("compare", "--help").stdout
    assert "3 undecided" in help_text and "2: bad input" in help_text


@pytest.mark.parametrize("case", ["text file", "missing", "other design", "unknown metric", "unknown factor",
                                  "metric without margin", "bad margin"])
def test_bad_input_exits_2_with_one_line(case: str, tmp_path: Path) -> None:
    a = smoke_like(tmp_path / "a.sqlite")
    b = smoke_like(tmp_path / "b.sqlite")
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database\n" * 100)
    argv = {"text file": [str(a), str(text), "--margin", "5%"],
            "missing": [str(a), str(tmp_path / "none.sqlite"), "--margin", "5%"],
            "other design": [str(a), str(smoke_like(tmp_path / "c.sqlite", first_point=5)), "--margin", "5%"],
            "unknown metric": [str(a), str(b), "--margin", "5%", "--metric", "speed"],
            "unknown factor": [str(a), str(b), "--margin", "5%", "--by", "nope"],
            "metric without margin": [str(a), str(b), "--metric", "recovered"],
            "bad margin": [str(a), str(b), "--margin", "lots"]}[case]
    out = fecbench("compare", *argv)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("fecbench: error: ")


def test_without_a_common_key_the_loss_seeds_are_compared_by_point_and_repetition(tmp_path: Path) -> None:
    """Issue 62 (5): two databases whose keys differ (an extended campaign against one run whole) but whose seeds
    are the same said "loss seeds: 0 of 0 the same"."""
    from fecbench.cli import compare as compare_cli

    a = smoke_like(tmp_path / "a.sqlite")
    b = smoke_like(tmp_path / "b.sqlite")
    with sqlite3.connect(b) as conn:
        for table, column in (("runs", "key"), ("metrics", "run_key")):
            conn.execute(f"UPDATE {table} SET {column} = {column} || '-other'")
    found = compare_cli.compare(a, b)
    assert found.common == 0
    line = next(x for x in compare_cli.text(found, a, b) if x.startswith("loss seeds"))
    n = len(results.load(a)[["point", "repetition"]].drop_duplicates())
    assert line == f"loss seeds: no key in both to pair by; by point and repetition, {n} of {n} the same", line
