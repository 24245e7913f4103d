"""Link schedules without root: parsing and validation (errors name file and key, exit 2), expansion
into timed actions (periodic, random outage lengths from the seed), topology checks, the design key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fecbench.emulation import load_topology
from fecbench.emulation.schedule import load_schedule
from fecbench.inputs.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "topologies" / "single.toml"
HANDOVER = ROOT / "topologies" / "schedules" / "starlink-handover.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_one_shot_outage_actions(tmp_path):
    s = load_schedule(write(tmp_path, '[[change]]\nlink = "bottleneck"\nat_s = 1.0\noutage_ms = 200\n'))
    actions = s.actions(10, seed=1)
    assert [(a.at_s, a.kind, a.directions) for a in actions] == [
        (1.0, "outage-start", ("forward", "reverse")), (pytest.approx(1.2), "outage-end", ("forward", "reverse"))]
    assert s.actions(0.5, seed=1) == []  # past the run's horizon


def test_periodic_handover_lengths_follow_the_seed_and_steps_cycle(tmp_path):
    s = load_schedule(write(tmp_path, '[[change]]\nlink = "bottleneck"\nevery_s = 15\noutage_ms = [100, 300]\n'
                                      'owd_ms = [25, 32]\nuntil_s = 50\n'))
    actions = s.actions(60, seed=7)
    starts = [a for a in actions if a.kind == "outage-start"]
    assert [a.at_s for a in starts] == [15, 30, 45]
    lengths = [a.params["length_ms"] for a in starts]
    assert all(100 <= x <= 300 for x in lengths) and len(set(lengths)) == 3
    assert lengths == [a.params["length_ms"] for a in s.actions(60, seed=7) if a.kind == "outage-start"]
    assert lengths != [a.params["length_ms"] for a in s.actions(60, seed=8) if a.kind == "outage-start"]
    assert [a.params["owd_ms"] for a in actions if a.kind == "set"] == [25, 32, 25]
    # ends come before starts at one instant; each outage ends at start + its length
    for a in starts:
        end = next(b for b in actions if b.kind == "outage-end" and b.occurrence == a.occurrence)
        assert end.at_s == pytest.approx(a.at_s + a.params["length_ms"] / 1e3)


def test_hold_undoes_a_change(tmp_path):
    s = load_schedule(write(tmp_path, '[[change]]\nlink = "bottleneck"\nat_s = [1, 5]\nbw_scale = 0.5\n'
                                      'hold_ms = 2000\ndirection = "reverse"\n'))
    assert [(a.at_s, a.kind) for a in s.actions(10, 0)] == [(1, "set"), (3, "undo"), (5, "set"), (7, "undo")]


@pytest.mark.parametrize("text, key, problem", [
    ('[[change]]\nlink = "bottleneck"\noutage_ms = 10\n', "change[0].at_s", "either at_s"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\nevery_s = 2\noutage_ms = 10\n', "change[0].at_s", "either at_s"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\n', "change[0]", "changes nothing"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\noutage_ms = -5\n', "change[0].outage_ms", "[0.001"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\noutage_ms = [300, 100]\n', "change[0].outage_ms", "low must"),
    ('[[change]]\nlink = "bottleneck"\nat_s = [2, 1]\noutage_ms = 10\n', "change[0].at_s", "increase"),
    ('[[change]]\nlink = "bottleneck"\nevery_s = 0.1\noutage_ms = 200\n', "change[0].every_s", "overlap"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\nowd_ms = 5\nowd_delta_ms = 5\n', "change[0].owd_delta_ms",
     "not both"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\nloss_p = 1.5\n', "change[0].loss_p", "[0, 1]"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\noutage_ms = 5\ndirection = "up"\n', "change[0].direction",
     "unknown value"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\noutage_ms = 5\nspeed = 3\n', "change[0].speed", "unknown key"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\nstart_s = 3\noutage_ms = 5\n', "change[0].start_s",
     "only with every_s"),
    ('[[change]]\nlink = "bottleneck"\nat_s = 1\nhold_ms = 5\noutage_ms = 5\n', "change[0].hold_ms", "undoes"),
    ('[schedule]\nname = "x"\n[[change]]\nlink = "b"\nat_s = 1\noutage_ms = 5\n', "schedule.name", "unknown key"),
    ('[schedule]\n', "change", "missing required"),
    ('[[change]\n', None, "invalid TOML"),
])
def test_bad_schedules_name_file_and_key(tmp_path, text, key, problem):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_schedule(path)
    assert info.value.key == key and problem in str(info.value) and str(path) in str(info.value)


def test_checks_against_the_topology(tmp_path):
    topo = load_topology(SINGLE)
    cases = [('link = "nowhere"\noutage_ms = 5', "no link 'nowhere'"),
             ('link = "access"\noutage_ms = 5', "has no dropper"),
             ('link = "access"\nowd_ms = 5', "not shaped"),
             ('link = "bottleneck"\nloss_p = 0.1', "uniform")]
    for body, problem in cases:
        s = load_schedule(write(tmp_path, f"[[change]]\nat_s = 1\n{body}\n"))
        with pytest.raises(SpecError, match=problem):
            s.check_topology(topo, "gilbert-elliott")
    load_schedule(write(tmp_path, '[[change]]\nat_s = 1\nlink = "bottleneck"\nloss_p = 0.1\n')).check_topology(
        topo, "uniform")


def test_shipped_handover_schedule():
    s = load_schedule(HANDOVER)
    s.check_topology(load_topology(SINGLE), "gilbert-elliott")
    kinds = {a.kind for a in s.actions(60, 3)}
    assert {"outage-start", "outage-end", "set"} <= kinds


def test_design_with_a_bad_schedule_exits_2(tmp_path):
    bad = write(tmp_path, '[[change]]\nlink = "bottleneck"\nat_s = 1\noutage_ms = "long"\n')
    design = (ROOT / "designs" / "smoke.toml").read_text().replace("[design]\n", f'[design]\nschedule = "{bad}"\n', 1)
    (tmp_path / "d.toml").write_text(design)
    done = subprocess.run([sys.executable, "-m", "fecbench", "run", str(tmp_path / "d.toml"), "--dry-run",
                           "--db", str(tmp_path / "d.sqlite")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{bad}:4: change[0].outage_ms" in done.stderr   # file:line, as an editor wants it


def test_a_topology_can_carry_the_schedule(tmp_path):
    from fecbench.runners.experiment.design import parse_design

    topo = tmp_path / "topo.toml"
    topo.write_text((ROOT / "topologies" / "single.toml").read_text().replace(
        '[topology]\n', f'[topology]\nschedule = "{HANDOVER}"\n', 1))
    design = tmp_path / "d.toml"
    design.write_text((ROOT / "designs" / "smoke.toml").read_text().replace(
        'topology = "topologies/single.toml"', f'topology = "{topo}"', 1))
    parsed = parse_design(design)
    assert parsed.schedule is not None and parsed.schedule.file == str(HANDOVER)
    # the design's own schedule wins; a missing file names the spec and key
    own = write(tmp_path, '[[change]]\nlink = "bottleneck"\nat_s = 1\noutage_ms = 10\n')
    design.write_text(design.read_text().replace("[design]\n", f'[design]\nschedule = "{own}"\n', 1))
    assert parse_design(design).schedule.file == str(own)
    topo.write_text(topo.read_text().replace(str(HANDOVER), "nowhere.toml"))
    with pytest.raises(SpecError, match="topology.schedule"):
        load_topology(topo)


def test_random_phase_shifts_each_run_within_one_period(tmp_path):
    """phase = "random": the first occurrence at start_s + U[0, every_s) per seed, reproducible, the
    outage lengths drawn as without it; a fixed-phase schedule keeps its canonical text."""
    text = '[[change]]\nlink = "bottleneck"\nevery_s = 15\nstart_s = 0\noutage_ms = [100, 300]\n'
    fixed = load_schedule(write(tmp_path, text))
    shifted = load_schedule(write(tmp_path, text + 'phase = "random"\n'))
    firsts = [shifted.actions(60, seed)[0].at_s for seed in range(200)]
    assert all(0 <= t < 15 for t in firsts) and len(set(firsts)) == 200
    assert 5 < np.mean(firsts) < 10  # uniform over the period (mean 7.5; sd of the mean ~0.3)
    assert firsts[:3] == [shifted.actions(60, seed)[0].at_s for seed in range(3)]
    for seed in (1, 2):
        a, b = fixed.actions(60, seed), shifted.actions(60, seed)
        n = min(len(a), len(b))  # the shift may push the last occurrence past the horizon
        assert n >= 6 and [x.params for x in a[:n]] == [y.params for y in b[:n]]  # same lengths
        offset = b[0].at_s - a[0].at_s
        assert all(y.at_s - x.at_s == pytest.approx(offset) for x, y in zip(a, b, strict=False))
    assert "random_phase" not in fixed.canonical() and "random_phase" in shifted.canonical()
    with pytest.raises(SpecError, match="phase"):
        load_schedule(write(tmp_path, '[[change]]\nlink = "bottleneck"\nat_s = 1\noutage_ms = 10\nphase = "random"\n'))


def test_outage_drops_are_counted_like_the_models(tmp_path) -> None:
    """A schedule's outages (index ranges its events recorded) are added to the dropper's `dropped`, in
    `outage_dropped` too: from the verdict log when kept, else from the ranges and the seeded model."""
    import io

    import numpy as np

    from fecbench.dropper.live import drops_with_outages, expected_verdicts
    from fecbench.emulation.schedule_apply import outage_ranges
    from fecbench.runners.experiment.prepare import prepare
    from fecbench.runners.run import link_records
    from fecbench.runners.run.lifecycle import Runner
    from fecbench.runners.run.outcome import Outcome
    from tests.helpers.campaign import fake_design
    from tests.helpers.fake_testbed import FakeTestbed

    def event(seq, kind, direction, before, after):
        return {"seq": seq, "kind": kind, "link": "bottleneck", "direction": direction,
                "params": {"index_before": before, "index_after": after}}
    events = [event(0, "outage-start", "forward", 100, 100), event(1, "outage-start", "reverse", 40, 40),
              event(2, "outage-end", "forward", 130, 130), event(3, "set", "reverse", 50, 50)]
    ranges = outage_ranges(events, {("bottleneck", "forward"): 500, ("bottleneck", "reverse"): 90})
    assert ranges == {("bottleneck", "forward"): [(100, 130)], ("bottleneck", "reverse"): [(40, 90)]}

    prepared = prepare(fake_design(tmp_path / "d.toml", {"q": {}}, points=1))
    run = prepared.runs[0]
    runner = Runner(prepared, FakeTestbed(prepared.topology, run.values, None), tmp_path)
    model = runner.loss_model(run.values, "bottleneck")
    streams = {(link, d): s for link, d, s in runner.streams()}
    plain = {d: int(expected_verdicts(model, run.loss_seed, streams[("bottleneck", d)], n, []).sum())
             for d, n in (("forward", 500), ("reverse", 90))}
    log = np.zeros(90, dtype=[("index", "<u8"), ("verdict", "u1"), ("state", "u1"), ("pad", "<u2"), ("len", "<u4")])
    log["verdict"][40:] = 1
    buffer = io.BytesIO()
    np.save(buffer, log)
    outcome = Outcome(status="ok", link_events=events, verdict_logs=[("bottleneck", "reverse", buffer.getvalue())],
                      link_stats=[{"link": "bottleneck", "direction": d, "matched": n, "dropped": plain[d], "model": {}}
                                  for d, n in (("forward", 500), ("reverse", 90))])
    link_records.count_outage_drops(runner.losses, run, outcome)
    forward, reverse = outcome.link_stats
    want = drops_with_outages(model, run.loss_seed, streams[("bottleneck", "forward")], 500, [(100, 130)])
    assert forward["dropped"] == want and forward["outage_dropped"] == want - plain["forward"] > 0
    assert forward["model"]["outages"] == [(100, 130)]
    assert reverse["dropped"] == 50 and reverse["outage_dropped"] == 50 - plain["reverse"]   # the log's count


def test_changes_compose_and_the_dry_run_shows_each_points_timeline(tmp_path):
    """A rate step keeps a delay step in force, an undo takes away only its own change (the timeline), and
    `fecbench run --dry-run` prints what is in force after each event, once when every run gets the same."""
    from fecbench.emulation.schedule import timeline
    from fecbench.emulation.spec import Shaping

    spec = write(tmp_path, '[[change]]\nlink = "bottleneck"\nat_s = 0.8\ndirection = "forward"\nowd_ms = 35\n'
                           'hold_ms = 1000\n[[change]]\nlink = "bottleneck"\nat_s = 1.2\ndirection = "forward"\n'
                           'bw_scale = 2\nhold_ms = 300\n')
    base = {("bottleneck", "forward"): Shaping(bw=4.0, owd=20.0, queue=20)}
    actions = load_schedule(spec).actions(5, 1)
    steps = [(a.at_s, a.kind, s["owd_ms"], s["bw_mbit"]) for a, _, s in timeline(actions, base)]
    assert steps == [(0.8, "set", 35, 4), (1.2, "set", 35, 8), (1.5, "undo", 35, 4), (1.8, "undo", 20, 4)]
    design = (ROOT / "designs" / "smoke.toml").read_text().replace("[design]\n", f'[design]\nschedule = "{spec}"\n', 1)
    (tmp_path / "d.toml").write_text(design)
    done = subprocess.run([sys.executable, "-m", "fecbench", "run", str(tmp_path / "d.toml"), "--dry-run",
                           "--db", str(tmp_path / "d.sqlite")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the same for every run at this point" in done.stdout
    import re

    # At 1.2 s the rate doubles and the delay step of 0.8 s stays; at 1.8 s the point's own delay is back.
    point = re.search(r"point 0: bw = ([\d.]+), owd = ([\d.]+)", done.stdout)
    bw, owd = float(point.group(1)), float(point.group(2))
    assert f"1.200 s set          bottleneck forward: owd 35 ms, {2 * bw:.4g} Mbit/s, model losses" in done.stdout
    assert f"1.800 s undo         bottleneck forward: owd {owd:.4g} ms, {bw:.4g} Mbit/s" in done.stdout
