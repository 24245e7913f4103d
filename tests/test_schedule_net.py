"""Time-varying links on a real network (root): an outage cuts the bottleneck for 200 ms at t = 1 s,
the verdicts show it, the recorded change times are close to the schedule, two runs with the same
seed give the same verdicts; a delay step reaches the packets; everything is undone at stop()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fecbench.dropper import Uniform
from fecbench.dropper.live import expected_verdicts
from fecbench.emulation import Network, load_topology
from fecbench.emulation.schedule import load_schedule
from fecbench.emulation.schedule_apply import ScheduleApplier

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "topologies" / "single.toml"
BACKEND = os.environ.get("FECBENCH_LINK_BACKEND") or "delayline"
# A loaded 2-core machine (several test suites, builds) wakes the schedule's clock late now and then;
# the bound says "a few ms" (measured here: under 0.1 ms), each run prints what it measured. An emulated
# guest (vm/, QEMU TCG: timing good to about a millisecond, 14 ms seen once) widens it with
# $FECBENCH_SCHEDULE_TOLERANCE_MS.
TIMING_BOUND_MS = float(os.environ.get("FECBENCH_SCHEDULE_TOLERANCE_MS") or 5.0)
PPS, COUNT, PHASE_S = 50, 150, 0.010   # packets 10 ms off the window's edges: 50..59 fall in [1.0, 1.2)

pytestmark = pytest.mark.require_root


def probe(net: Network, applier: ScheduleApplier, port: int) -> tuple[dict, list[dict]]:
    """COUNT datagrams at PPS from the client, the first PHASE_S after the schedule's clock starts: the
    receiver and the sender start (and say ready) first, then the applier, then the sender is told t0.
    Returns the receiver's view and the applier's events."""
    cmd = [sys.executable, "-m", "fecbench.emulation.probe"]
    recv = net.server.popen([*cmd, "recv", "--bind", net.server_address, "--port", str(port), "--count",
                             str(COUNT), "--timeout", "600", "--idle", "5"], text=True)
    assert recv.stdout.readline().strip() == "ready"
    sender = net.client.popen([*cmd, "send", "--dst", net.server_address, "--port", str(port), "--count",
                               str(COUNT), "--pps", str(PPS), "--start-at", "stdin"], text=True,
                              stdin=subprocess.PIPE)
    assert sender.stdout.readline().strip() == "ready"
    try:
        applier.start(net)
        sender.stdin.write(f"{applier.t0 + PHASE_S!r}\n")
        sender.stdin.flush()
        sender.communicate(timeout=120)
        out, _ = recv.communicate(timeout=600)
    finally:
        events = applier.stop()
    return json.loads(out.strip().splitlines()[-1]), events


def run_once(net: Network, schedule, seed: int, port: int) -> tuple[np.ndarray, list[dict], dict]:
    dropper = net.droppers[("bottleneck", "forward")]
    net.set_loss("bottleneck", "forward", Uniform(0.05), seed=seed, stream=0)
    received, events = probe(net, ScheduleApplier(schedule, seed=seed, horizon_s=10), port)
    log = dropper.verdict_log()
    return log["verdict"].astype(np.uint8), events, received


def test_outage_verdicts_times_and_determinism(tmp_path):
    spec = tmp_path / "cut.toml"
    spec.write_text('[schedule]\ndescription = "cut"\n[[change]]\nlink = "bottleneck"\nat_s = 1.0\n'
                    'direction = "forward"\noutage_ms = 200\n')
    schedule = load_schedule(spec)
    schedule.check_topology(load_topology(SINGLE), "uniform")
    with Network(load_topology(SINGLE), {"bw": 10, "owd": 5}, backend=BACKEND) as net:
        net.attach_dropper("bottleneck", "forward", log=True)
        runs = [run_once(net, schedule, seed=42, port=9400 + i) for i in range(2)]
        # The schedule undid itself: a third pass without schedule sees the model alone.
        assert net.droppers[("bottleneck", "forward")].stats()["model"] == "uniform"
    errors = []
    for verdicts, events, received in runs:
        assert len(verdicts) == COUNT, "every probe packet crossed the dropper once"
        kinds = [e["kind"] for e in events]
        assert kinds == ["outage-start", "outage-end"], events
        start, end = events
        # The switch took effect between packets 49 (0.990 s) and 50 (1.010 s), back between 59 and 60.
        assert start["params"]["index_before"] == start["params"]["index_after"] == 50
        assert end["params"]["index_before"] == end["params"]["index_after"] == 60
        expected = expected_verdicts(Uniform(0.05), 42, 0, COUNT, [(50, 60)])
        assert np.array_equal(verdicts, expected)
        assert verdicts[50:60].all()
        assert set(range(50, 60)).isdisjoint(received["seq"]), "packets in the window were delivered"
        errors += [abs(e["applied_s"] - e["scheduled_s"]) * 1e3 for e in events]
    assert np.array_equal(runs[0][0], runs[1][0]), "same seed and schedule, different verdicts"
    print(f"schedule timing error (ms): {', '.join(f'{e:.3f}' for e in errors)}")
    assert max(errors) <= TIMING_BOUND_MS


def test_delay_step_and_restore(tmp_path):
    spec = tmp_path / "step.toml"
    spec.write_text('[[change]]\nlink = "bottleneck"\nat_s = 1.0\ndirection = "forward"\nowd_delta_ms = 30\n'
                    'bw_scale = 0.5\n')
    schedule = load_schedule(spec)
    with Network(load_topology(SINGLE), {"bw": 10, "owd": 5}, backend=BACKEND) as net:
        received, events = probe(net, ScheduleApplier(schedule, seed=1, horizon_s=10), 9500)
        assert [e["kind"] for e in events] == ["set", "restore"], events
        assert events[0]["params"]["owd_applied_ms"] == 35 and events[0]["params"]["bw_applied_mbit"] == 5
        owd = dict(zip(received["seq"], received["owd_ms"], strict=True))
        before = [owd[i] for i in range(10, 45) if i in owd]
        after = [owd[i] for i in range(55, COUNT) if i in owd]
        assert np.median(after) - np.median(before) == pytest.approx(30, abs=2), received["owd_ms"]
        assert net.fidelity()[0]["ok"], "the delay was not restored"


def test_campaign_records_the_applied_changes(tmp_path):
    """A campaign with a schedule: every run (ok and timed out) records its applied changes in
    link_events, at the scheduled times, and the verdict logs show the outage's drops."""
    from fecbench.analysis import results, tables
    from tests.helpers.campaign import fake_design, fecbench

    spec = tmp_path / "blip.toml"
    spec.write_text('[[change]]\nlink = "bottleneck"\nat_s = 0.1\noutage_ms = 100\n'
                    '[[change]]\nlink = "bottleneck"\nat_s = 0.3\ndirection = "reverse"\nowd_delta_ms = 5\n')
    design = fake_design(tmp_path / "d.toml", {"slow": {"behave": "slow"}, "hang": {"behave": "hang"}},
                         points=1, timeout_s=4, name="sched", extra=f'schedule = "{spec}"\nverdict_log = true')
    db = tmp_path / "sched.sqlite"
    done = fecbench("run", str(design), "--db", str(db))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    runs = results.load(db).set_index("label")
    assert dict(runs["status"]) == {"slow": "ok", "hang": "timeout"}
    events = tables.link_events(db)
    for label in ("slow", "hang"):
        mine = events[events["run_key"] == runs.loc[label, "key"]]
        assert list(mine["kind"]) == ["outage-start"] * 2 + ["outage-end"] * 2 + ["set", "restore"], mine
        timed = mine[mine["scheduled_s"].notna()]
        assert (timed["error_ms"].abs() < 50).all(), timed  # a loose bound: this test is about recording
