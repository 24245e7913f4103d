"""Two stacks' FEC findings side by side (fecbench.analysis.studies.cross_stack), on synthetic runs: twins, each stack's
ratio FEC ÷ no FEC, the verdicts and the ratio of the two ratios."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fecbench.analysis import stats
from fecbench.analysis.studies import cross_stack

SEEDS = 12   # at least stats.MIN_SEEDS_FOR_INTERVAL: every point has its interval


def runs(effects: dict[str, dict[int, float]], *, extra: dict[str, tuple[str, dict]] | None = None) -> pd.DataFrame:
    """Runs of two stacks on two points: each no-FEC run takes a seed-dependent time; each FEC label
    that time × its factor at that point (``effects``: label → point → factor)."""
    labels = {"fecq": ("fecq", {"fec": "none", "initial_window": "32"}),
              "fecq-rs": ("fecq", {"fec": "rs:15,10", "initial_window": "32"}),
              "xquic": ("xquic", {"fec": "none", "cc": "cubic"}),
              "xquic-rs": ("xquic", {"fec": "rs", "fec_block": "10", "cc": "cubic"}),
              **(extra or {})}
    rng = np.random.default_rng(1)
    rows = []
    for point in (0, 1):
        base = rng.uniform(100, 300, size=SEEDS)
        for label, (impl, args) in labels.items():
            for rep in range(SEEDS):
                factor = effects.get(label, {}).get(point, 1.0)
                jitter = 1 + 0.005 * ((rep * 3 + ("fec" in args and args["fec"] != "none")) % 3)  # < 1 %
                rows.append({"key": f"{label}-{point}-{rep}", "design_hash": "d", "campaign": "c",
                             "workload": "download", "point": point, "repetition": rep, "size": 50_000,
                             "label": label, "impl": impl, "impl_args": json.dumps(args), "status": "ok",
                             "timeout_s": 60.0,
                             "dct_ms": base[rep] * factor * jitter, "bw": 2.0 + point})
    frame = pd.DataFrame(rows)
    frame.attrs.update(factors=["bw"], labels=sorted(labels), sizes=[50_000])
    return frame


def test_twins_same_implementation_closest_arguments() -> None:
    frame = runs({}, extra={"xquic-bbr": ("xquic", {"fec": "none", "cc": "bbr"}),
                            "xquic-rs-bbr": ("xquic", {"fec": "rs", "fec_block": "10", "cc": "bbr"})})
    assert cross_stack.twins(frame) == {"fecq-rs": "fecq", "xquic-rs": "xquic", "xquic-rs-bbr": "xquic-bbr"}
    # Two equally close no-FEC labels: no twin rather than a guess.
    ambiguous = runs({}, extra={"fecq-cubic": ("fecq", {"fec": "none", "initial_window": "32", "cc": "cubic"})})
    ambiguous.loc[ambiguous["label"] == "fecq-rs", "impl_args"] = json.dumps({"fec": "rs:15,10"})
    assert "fecq-rs" not in cross_stack.twins(ambiguous)


def test_side_by_side_verdicts() -> None:
    # Point 0: both stacks 30 % faster with FEC; point 1: fecq 40 % slower, XQUIC 30 % faster.
    frame = cross_stack.side_by_side(runs({"fecq-rs": {0: 0.7, 1: 1.4}, "xquic-rs": {0: 0.7, 1: 0.7}}), seed=3)
    assert len(frame) == 2 and set(frame["label_a"]) == {"fecq-rs"} and set(frame["label_b"]) == {"xquic-rs"}
    same, opposite = frame.iloc[0], frame.iloc[1]
    assert same["ratio_a"] == pytest.approx(0.7, rel=0.03) and same["ratio_b"] == pytest.approx(0.7, rel=0.03)
    assert (same["effect_a"], same["effect_b"], same["stacks"]) == ("faster", "faster", "agree")
    assert same["a_over_b_low"] <= 1 <= same["a_over_b_high"] and same["seeds_all_finished"] == SEEDS
    assert (opposite["effect_a"], opposite["effect_b"], opposite["stacks"]) == ("slower", "faster", "disagree")
    assert opposite["a_over_b"] == pytest.approx(2.0, rel=0.05) and opposite["a_over_b_low"] > 1
    assert list(frame["point_key"]) == ["0", "1"] and "bw" not in frame   # the point's factors once, apart:
    assert cross_stack.points(runs({}), frame).to_dict("list") == {"point": ["0", "1"], "bw": [2.0, 3.0]}
    table = cross_stack.table(frame)
    assert list(table["point"]) == ["0", "1"]
    assert table.iloc[0]["A: FEC ÷ no FEC"] == "fecq-rs ÷ fecq" and table.iloc[1]["stacks"].startswith("disagree")
    # The same seed gives the same intervals.
    again = cross_stack.side_by_side(runs({"fecq-rs": {0: 0.7, 1: 1.4}, "xquic-rs": {0: 0.7, 1: 0.7}}), seed=3)
    pd.testing.assert_frame_equal(frame, again)


def test_negligible_effect_and_differing_stacks() -> None:
    """fecq without effect (ratio 1 on every seed: negligible), XQUIC 40 % faster: the stacks differ,
    and A ÷ B says by how much."""
    row = cross_stack.side_by_side(runs({"xquic-rs": {0: 0.6}})).iloc[0]
    assert row["effect_a"] == "negligible" and row["effect_b"] == "faster"
    assert row["stacks"] == "differ" and row["a_over_b_low"] > 1


@pytest.mark.parametrize("low, high, effect", [
    (0.5, 0.9, "faster"), (1.1, 1.3, "slower"), (0.99, 1.01, "negligible"), (0.7, 1.1, "no clear effect"),
    (0.97, 1.01, "no clear effect"), (float("nan"), 1.2, "not enough to say"),
])
def test_effect_from_the_interval(low: float, high: float, effect: str) -> None:
    assert cross_stack.effect(low, high) == effect


@pytest.mark.parametrize("a, b, between, verdict", [
    ("faster", "faster", (0.5, 2.0), "agree"), ("faster", "slower", (0.5, 2.0), "disagree"),
    ("faster", "no clear effect", (0.8, 1.1), "consistent"), ("faster", "negligible", (0.5, 0.8), "differ"),
    ("faster", "not enough to say", (0.5, 0.8), "not enough to say"), ("slower", "negligible", (float("nan"),) * 2,
                                                             "not enough to say"),
])
def test_agreement(a: str, b: str, between: tuple[float, float], verdict: str) -> None:
    assert cross_stack.agreement(a, b, between) == verdict


def test_failed_runs_leave_the_all_finished_seeds() -> None:
    frame = runs({"fecq-rs": {0: 0.7}, "xquic-rs": {0: 0.7}})
    frame.loc[(frame["label"] == "xquic") & (frame["repetition"] < 3), "status"] = "failed"
    row = cross_stack.side_by_side(frame).iloc[0]
    assert row["seeds_a"] == SEEDS and row["seeds_b"] == SEEDS - 3 and row["seeds_all_finished"] == SEEDS - 3


def test_without_two_stacks_nothing_is_added() -> None:
    one_stack = runs({})
    one_stack = one_stack[one_stack["impl"] == "fecq"]
    tables: dict = {}
    cross_stack.section(tables, {}, one_stack)
    assert tables == {}


def test_bootstrap_ratio_of_ratios() -> None:
    a = np.arange(1.0, 11.0)
    low, high = stats.bootstrap_ratio_of_ratios(a, a, 2 * a, a, seed=1)
    assert low == high == pytest.approx(0.5)  # A's ratio is 1, B's 2 on every resample
    assert np.isnan(stats.bootstrap_ratio_of_ratios(a[:2], a[:2], a[:2], a[:2])[0])


def test_stacks_are_matched_code_family_against_code_family() -> None:
    """Issue 62: RS × XOR and XOR × RS rows crossed every FEC label of one stack with every one of the other; a
    row compares RS with RS, XOR with XOR (each stack's own spelling), on the same multipath setting."""
    extra = {"fecq-xor": ("fecq", {"fec": "xor:4", "initial_window": "32"}),
             "xquic-xor": ("xquic", {"fec": "xor", "cc": "cubic"}),
             "xquic-mp": ("xquic", {"fec": "none", "cc": "cubic", "multipath": "on"}),
             "xquic-mp-rs": ("xquic", {"fec": "rs", "cc": "cubic", "multipath": "on"})}
    frame = runs({}, extra=extra)
    assert cross_stack.twins(frame) == {"fecq-rs": "fecq", "fecq-xor": "fecq", "xquic-mp-rs": "xquic-mp",
                                        "xquic-rs": "xquic", "xquic-xor": "xquic"}
    assert cross_stack.matches(frame) == [("fecq-rs", "xquic-rs"), ("fecq-xor", "xquic-xor")]
    rows = cross_stack.side_by_side(frame)
    assert len(rows) == 2 * 2 and set(zip(rows["label_a"], rows["label_b"], strict=True)) == {
        ("fecq-rs", "xquic-rs"), ("fecq-xor", "xquic-xor")}


def test_the_table_says_whether_rebuilt_packets_spare_the_senders_losses() -> None:
    """Issue 62 (6): fecq's rebuilt packets are not declared lost (6 rebuilt, 6 fewer declared); XQUIC's are (17
    rebuilt, 3 more declared lost with FEC than without: its receiver never acknowledges a rebuilt packet)."""
    frame = runs({"fecq-rs": {0: 0.7, 1: 0.7}, "xquic-rs": {0: 0.7, 1: 0.7}})
    counters = {"fecq-rs": (6, 4, 4 * 1200), "fecq": (0, 10, 10 * 1200), "xquic-rs": (17, 31, None),
                "xquic": (0, 28, None)}
    for label, (rebuilt, lost, sent_again) in counters.items():
        mine = frame["label"] == label
        frame.loc[mine, "recovered"] = rebuilt
        frame.loc[mine, "lost"] = lost
        frame.loc[mine, "retransmitted_bytes"] = sent_again
        frame.loc[mine, "retransmitted_packets"] = None if sent_again else lost
    spares = cross_stack.recovery(frame).set_index("label")
    assert spares.loc["fecq-rs", "spares"] == "yes" and spares.loc["fecq-rs", "spared per rebuilt"] == 1.0
    assert spares.loc["xquic-rs", "spares"].startswith("no: rebuilt packets are still declared lost")
    assert spares.loc["xquic-rs", "declared lost (packets) with / without"] == "31 / 28"
    tables: dict[str, pd.DataFrame] = {}
    notes: dict[str, str] = {}
    cross_stack.section(tables, notes, frame)
    shown = tables["cross-stack: FEC ÷ no FEC per stack, per point"]
    assert shown["rebuilt packets spare losses (A / B)"].iloc[0].startswith("yes / no: rebuilt")
    assert "acknowledging its packet number" in notes["cross-stack: what rebuilt packets spare, per stack"]
