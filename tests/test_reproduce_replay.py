"""Replays of the verdict procedure (issue 35): a recorded world answers runs, A/A swaps make it symmetric,
false verdicts are counted against the truth by construction (no root: recorded frames and prepared designs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from fecbench.runners.experiment.prepare import prepare
from fecbench.verdicts import campaign as cp
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts import profiles
from fecbench.verdicts import sequential as sq
from fecbench.verdicts.pack import load_pack
from fecbench.verdicts.validation import replay


def _recorded(points: int = 4, reps: int = 3) -> pd.DataFrame:
    rows = []
    for point in range(points):
        for rep in range(reps):
            for label, value in (("a", 100.0 + rep), ("b", 200.0 + rep)):
                rows.append({"key": f"{point}-{rep}-{label}", "point": point, "repetition": rep, "size": 5000,
                             "label": label, "status": "ok", "dct_ms": value, "duration_s": 0.5})
    return pd.DataFrame(rows)


class _Run:
    def __init__(self, point: int, repetition: int, label: str) -> None:
        self.point, self.repetition, self.label, self.size, self.key = point, repetition, label, 5000, f"v{label}"


def test_a_world_keeps_its_recordings_and_draws_beyond_them() -> None:
    world = replay.RecordedWorld(_recorded(), np.random.default_rng(1))
    own = world.answer(_Run(1, 2, "a"), order=7)
    assert own is not None and own["dct_ms"] == 102.0 and own["repetition"] == 2 and own["started_at"].endswith("7")
    beyond_a, beyond_b = world.answer(_Run(1, 9, "a"), 8), world.answer(_Run(1, 9, "b"), 9)
    assert beyond_a is not None and beyond_b is not None and beyond_a["repetition"] == 9
    assert beyond_b["dct_ms"] - beyond_a["dct_ms"] == 100.0          # both labels from one recorded repetition
    assert world.answer(_Run(99, 0, "a"), 10) is None


def test_a_design_point_with_no_recording_is_answered_by_the_nearest_recorded_one() -> None:
    """A budgeted run records few of a large design's points: a replayed run at another point gets the recording
    of the nearest recorded point, as its own point (without that it got nothing, at no cost, for ever)."""
    frame = _recorded()
    frame["bw"], frame["owd"] = frame["point"] * 2.0 + 1.0, 100.0 + frame["point"] * 10.0   # points 0..3
    world = replay.RecordedWorld(frame, np.random.default_rng(1))
    run = _Run(99, 0, "b")
    run.values = {"bw": 5.4, "owd": 118.0}                  # nearest: point 2 (bw 5, owd 120)
    row = world.answer(run, 1)
    assert row is not None and row["point"] == 99 and row["bw"] == 5.4 and row["owd"] == 118.0
    assert frame.set_index("key").loc[row["recorded_key"], "point"] == 2 and row["dct_ms"] >= 200.0
    assert world.answer(_Run(1, 0, "a"), 2)["recorded_key"] == "1-0-a"   # a recorded point answers for itself


def test_an_aa_world_swaps_both_labels_of_a_unit_together() -> None:
    world = replay.RecordedWorld(_recorded(), np.random.default_rng(2), resample=True, swap=("a", "b"))
    swapped = 0
    for rep in range(200):
        a, b = world.answer(_Run(0, rep, "a"), 1), world.answer(_Run(0, rep, "b"), 2)
        assert a is not None and b is not None and abs(a["dct_ms"] - b["dct_ms"]) == 100.0
        swapped += a["dct_ms"] > b["dct_ms"]
    assert 70 < swapped < 130                                          # about half: symmetric by construction
    effect = replay.RecordedWorld(_recorded(), np.random.default_rng(2), effect={"a": 0.5})
    assert effect.answer(_Run(0, 0, "a"), 1)["dct_ms"] == 50.0


def test_false_verdicts_are_judged_against_the_truth_by_construction() -> None:
    claims = {c.id: c for c in load_pack("aa").claims}
    def verdict(cid: str, what: str) -> ev.Verdict:
        return ev.Verdict(claims[cid], "defaults", what, None, "", sq.Sequence(1.0, 0.9, 1.1, 10))
    fine = [verdict("ratio-below-1", "at the threshold"), verdict("ratio-above-1", "inconclusive"),
            verdict("ratio-about-1", "holds")]
    assert replay.false_verdicts(fine) == []
    wrong = [verdict("ratio-below-1", "holds"), verdict("points-above-1", "fails"), verdict("ratio-about-1", "fails")]
    assert replay.false_verdicts(wrong) == ["ratio-below-1", "points-above-1", "ratio-about-1"]
    low, high = replay.wilson(3, 200)
    assert low < 0.015 < high and math.isnan(replay.wilson(0, 0)[0])


def test_the_old_and_the_new_allocator_replay_the_same_recorded_runs(tmp_path: Path) -> None:
    pack = load_pack("aa")
    target = profiles.write(pack, pack.profile("defaults"), pack.designs["aa"], tmp_path)
    campaign = cp.Campaign("defaults", "aa", target.db, prepare(target.design), {})
    rows = [{"key": r.key, "point": r.point, "repetition": r.repetition, "size": r.size, "label": r.label,
             "status": "ok", "dct_ms": 100.0 + 10 * r.point + r.repetition, "duration_s": 0.4,
             "started_at": "", "loss_seed": r.loss_seed, "workload": "download", "design_hash": "h", "bw": 1.0}
            for r in campaign.prepared.runs]
    frame = pd.DataFrame(rows)
    frame["bw"] = frame["point"].map(lambda p: campaign.prepared.points[p]["bw"])
    frame.attrs.update(factors=["bw"], labels=["a", "b"], sizes=[5000, 50000])
    for allocator in ("old", "new"):
        world = replay.RecordedWorld(frame, np.random.default_rng(3))
        looks = replay.simulate(pack, "defaults", {("defaults", "aa"): campaign}, {"aa": world}, 120.0, allocator)
        assert looks[0].machine_s == 0 and looks[-1].machine_s <= 120.0 + 0.4
        # Identical stacks on identical values: no claim on the threshold holds or fails; the new allocator's
        # extra seeds give the ≈ claim enough draws to hold (the old one stops at the design's repetitions).
        final = {v.claim.id: v.verdict for v in looks[-1].verdicts}
        assert replay.false_verdicts(looks[-1].verdicts) == [], allocator
        assert final["ratio-about-1"] == "holds" or allocator == "old"
    assert len(campaign.prepared.runs) == len(rows)                    # replays work on copies of the campaign


def test_a_replay_reads_loss_classes_and_flows_of_the_runs_it_drew_only() -> None:
    """Per-run tables of the recording (loss classes, competing flows) follow the runs a replay drew, under
    the replay's keys: nothing else of the recording counts (it read the whole recording from the first look)."""
    recorded = _recorded(points=2, reps=2)
    world = replay.RecordedWorld(recorded, np.random.default_rng(1))
    world.classes = pd.DataFrame({"run_key": recorded["key"], "class_any": ["loss"] * len(recorded)})
    world.flows = pd.DataFrame({"run_key": list(recorded["key"]) * 2, "role": ["foreground"] * len(recorded)
                                 + ["competing"] * len(recorded), "label": list(recorded["label"]) * 2,
                                 "dct_ms": list(recorded["dct_ms"]) * 2})
    drawn = [world.answer(_Run(1, rep, label), order) for order, (rep, label) in
             enumerate([(0, "a"), (0, "b"), (7, "a")])]        # repetition 7 draws a recorded one
    data = ev.Data.replayed(pd.DataFrame(drawn), world)
    classified = data.classified()
    assert sorted(classified["key"]) == ["va", "va", "vb"] and set(classified["class_any"]) == {"loss"}
    assert list(classified["recorded_key"])[:2] == ["1-0-a", "1-0-b"]
    table = data.flow_table()
    assert len(table) == 2 * 3 and set(table["run_key"]) == {"va", "vb"}
    nothing = ev.Data.replayed(recorded.iloc[0:0], world)
    assert nothing.classified().empty and nothing.flow_table().empty
