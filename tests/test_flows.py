"""Competing flows: the design's [[flow]] entries (parsed, checked, planned as factors), the runner running
them beside the foreground on a real network, the flows table and the fairness analysis."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench import marks
from fecbench.analysis import stats
from fecbench.analysis.studies import flows as flowsmod
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import (
    FAKE_DIR,
    ROOT,
    TOPOLOGY,
    campaign_processes,
    endpoint_leftovers,
    fecbench,
    rows,
)


def design(tmp_path: Path, flows: str, *, space: str = "", extra: str = "", name: str = "fl") -> Path:
    """A fake-implementation design (foreground: the fake download) with the given flow sections."""
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(f"""
        [design]
        name = "{name}"
        topology = "{TOPOLOGY}"
        repetitions = 1
        seed = 5
        timeout_s = 20
        impl_dirs = ["{FAKE_DIR}"]
        {extra}

        [space]
        method = "factorial"
        [space.factors]
        bw = {{ levels = [10] }}
        owd = {{ levels = [2] }}
        {textwrap.dedent(space)}

        [loss]
        model = "none"

        [workload]
        kind = "download"
        sizes = ["1kB"]

        [[impl]]
        name = "fake"
        label = "fg"
        """) + textwrap.dedent(flows))
    return path


FLOWS = """
[flows]
select = "bg"
copies = "n"
start_s = "offset"

[[flow]]
name = "quic"
impl = "fake"
workload = "download"

[[flow]]
name = "tcp"
tool = "iperf3"
cc = "cubic"
"""
SPACE = """
bg = { levels = ["none", "quic", "tcp", "quic+tcp"] }
n = { levels = [1, 2] }
offset = { levels = [-2, 0.5] }
"""


def test_flows_are_factors_planned_like_any_other(tmp_path: Path) -> None:
    prepared = prepare(design(tmp_path, FLOWS, space=SPACE))
    assert len(prepared.points) == 4 * 2 * 2
    seen = set()
    for values in prepared.points.values():
        instances = prepared.design.flows.instances(values)
        names = {f.spec.name for f in instances}
        assert names == (set() if values["bg"] == "none" else set(values["bg"].split("+")))
        assert len(instances) == len(names) * int(values["n"])
        assert all(f.start_s == values["offset"] for f in instances)
        assert [f.rank for f in instances] == list(range(1, len(instances) + 1))   # each its own port
        assert len({f.id for f in instances}) == len(instances)                    # quic, quic#2, ...
        seen.add((values["bg"], int(values["n"])))
    assert len(seen) == 8
    # The flows are part of what a run is: keys differ from the same design without them.
    plain = prepare(design(tmp_path, "", name="plain"))
    assert not {r.key for r in plain.runs} & {r.key for r in prepared.runs}


@pytest.mark.parametrize("flows, space, key, problem", [
    ('[[flow]]\nname = "x"\nimpl = "nosuch"\nworkload = "bulk"\n', "", "flow[0].impl", "nosuch"),
    ('[[flow]]\nname = "x"\nimpl = "fake"\nworkload = "messages"\n', "", "flow[0].workload", "does not declare"),
    ('[[flow]]\nname = "x"\ntool = "iperf3"\nstart_s = -25\n', "", "flow[0].start_s", "beyond the time limit"),
    ('[[flow]]\nname = "x"\ntool = "iperf3"\nstart_s = "offset"\n', "offset = { levels = [-30, 0] }\n",
     "flow[0].start_s", "beyond the time limit"),
    ('[[flow]]\nname = "x"\ntool = "iperf3"\npath = 2\n', "", "flow[0].path", "the topology has 1 path"),
    ('[flows]\nselect = "bg"\n[[flow]]\nname = "x"\ntool = "iperf3"\n', 'bg = { levels = ["x", "y"] }\n',
     "flows.select", "names no [[flow]]: y"),
    ('[[flow]]\nname = "x"\ntool = "iperf3"\n[[flow]]\nname = "x"\ntool = "iperf3"\n', "", "flow[1].name",
     "duplicate flow name"),
    ('[[flow]]\nname = "x"\ntool = "iperf3"\nimpl = "fake"\n', "", "flow[0].impl", "either impl"),
    ('[[flow]]\nname = "x"\ntool = "iperf3"\nprotocol = "udp"\nrate = "fast"\n', "", "flow[0].rate", "bad rate"),
])
def test_a_bad_flow_is_exit_2_naming_the_key(tmp_path: Path, flows: str, space: str, key: str, problem: str) -> None:
    path = design(tmp_path, flows, space=space)
    out = fecbench("run", str(path), "--dry-run")
    assert out.returncode == 2, out.stdout + out.stderr
    assert key in out.stderr and problem in out.stderr and "Traceback" not in out.stderr
    if key.startswith("flow["):   # and the line of that [[flow]] in the file
        index = int(key[5])
        line = [i + 1 for i, text in enumerate(path.read_text().splitlines()) if text == "[[flow]]"][index]
        assert f"{path}:{line}: {key}" in out.stderr


def _series(*cells: tuple[float, int]) -> list[list[float]]:
    return [[t, down, 0, 0, 0] for t, down in cells]


def test_fairness_window_shares_and_jain() -> None:
    """Two runs: in one, the foreground and one flow share the window equally (Jain 1); in the other the
    competing flow takes three quarters (Jain 0.8)."""
    def row(run: str, flow: str, role: str, started: float, ended: float, series: list) -> dict:
        return {"run_key": run, "flow": flow, "role": role, "label": flow, "background": "bg", "run_label": "fg",
                "point": 0, "repetition": 0, "run_status": "ok", "dct_ms": 1000.0, "started_s": started,
                "ended_s": ended, "bin_s": 0.5, "series": series, "workload": "download", "data": "down"}
    frame = pd.DataFrame([
        row("a", "foreground", "foreground", 0.0, 2.0, _series((0, 125_000), (0.5, 125_000), (1.0, 125_000),
                                                             (1.5, 125_000))),
        row("a", "bg", "competing", -1.0, 2.0, _series((-1, 250_000), (-0.5, 250_000), (0, 125_000), (0.5, 125_000),
                                                       (1.0, 125_000), (1.5, 125_000))),
        row("b", "foreground", "foreground", 0.0, 1.0, _series((0, 62_500), (0.5, 62_500))),
        row("b", "bg", "competing", -1.0, 1.0, _series((0, 187_500), (0.5, 187_500))),
    ])
    windowed = flowsmod.window_throughput(frame)
    assert windowed["window_s"].tolist() == [2.0, 2.0, 1.0, 1.0]
    assert windowed["throughput_mbit"].tolist() == pytest.approx([2.0, 2.0, 1.0, 3.0])
    fair = flowsmod.fairness(frame).set_index("run_key")
    assert fair.loc["a", "jain"] == pytest.approx(1.0) and fair.loc["b", "jain"] == pytest.approx(0.8)
    assert fair.loc["b", "foreground_share"] == pytest.approx(0.25)
    shares = flowsmod.shares_over_time(frame)
    assert set(shares["t_s"]) == {0, 0.5, 1.0, 1.5}            # bins where both flows carried data
    assert shares.groupby(["run_key", "t_s"])["share"].sum().tolist() == pytest.approx([1.0] * 6)
    assert stats.jain_index([1, 1, 1, 1]) == 1.0 and stats.jain_index([1, 0, 0, 0]) == 0.25
    assert np.isnan(stats.jain_index([]))


@pytest.mark.require_root
def test_flows_smoke_runs_every_flow_and_attributes_the_links_drops(flows_db: Path) -> None:
    """designs/flows-smoke.toml for real: each run has its foreground and three competing flows (two fecq
    bulk downloads, one iperf3 TCP download) in the flows table; every packet the droppers dropped is
    attributed to exactly one flow; the report draws the fairness figures."""
    db = flows_db
    runs = rows(db, "SELECT key, status, error FROM runs")
    assert len(runs) == 2 and {r["status"] for r in runs} == {"ok"}, runs
    table = rows(db, "SELECT * FROM flows")
    for run in runs:
        mine = {f["flow"]: f for f in table if f["run_key"] == run["key"]}
        assert set(mine) == {"foreground", "quic-bg", "fec-bg", "tcp"}
        assert all(f["bytes_down"] > 100_000 for f in mine.values())
        assert all(f["status"] == "stopped" for name, f in mine.items() if name != "foreground")
        assert all(f["started_s"] < 0 for name, f in mine.items() if name != "foreground")   # start_s = -1
        metrics = rows(db, "SELECT dct_ms FROM metrics WHERE run_key = ?", run["key"])[0]
        assert mine["foreground"]["dct_ms"] == metrics["dct_ms"]
        dropped = sum(r["dropped"] for r in rows(db, "SELECT dropped FROM link_stats WHERE run_key = ?", run["key"]))
        assert sum(f["dropped_down"] + f["dropped_up"] for f in mine.values()) == dropped
        assert all(json.loads(f["json"])["endpoints"].get("wakeups", 0) > 0 for f in mine.values())
        # The fecq bulk flows, stopped with the foreground, still wrote what their stacks did (SIGTERM:
        # the client fetches its server's counters before it exits).
        for name in ("quic-bg", "fec-bg"):
            stopped = json.loads(mine[name]["json"])["metrics"]
            assert stopped["error"].startswith("stopped by a signal after "), stopped
            assert stopped["bytes_app"] > 0 and stopped["sender"]["packets_sent"] > 0, stopped
        assert json.loads(mine["fec-bg"]["json"])["metrics"]["repair_sent"] > 0
    out = fecbench("report", str(db))
    assert out.returncode == 0, out.stderr
    report = db.parent / f"{db.stem}-report"
    assert {"flows-foreground-dct.png", "flows-jain.png", "flows-shares.png"} <= {p.name for p in report.iterdir()}


@pytest.mark.require_root
def test_a_failing_flow_fails_the_run_naming_it(tmp_path: Path) -> None:
    flows = '[[flow]]\nname = "broken"\nimpl = "fake"\nworkload = "download"\nargs = { behave = "fail" }\n'
    path = design(tmp_path, flows, extra='fidelity = "off"')
    out = fecbench("run", str(path), "--db", str(tmp_path / "f.sqlite"))
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = rows(tmp_path / "f.sqlite", "SELECT status, error FROM runs")
    assert run["status"] == "failed" and run["error"] == "flow broken failed: client exited with status 1"


@pytest.mark.require_root
def test_a_killed_campaign_with_flows_leaves_nothing_after_clean(tmp_path: Path) -> None:
    """kill -9 while a run's competing flows run: `fecbench clean` ends every process (flows' servers and
    clients included), removes the flows' cgroups, the network's and the tracer."""
    flows = '[flows]\nstart_s = -5\n[[flow]]\nname = "slow"\nimpl = "fake"\nworkload = "download"\n' \
            'args = { behave = "hang" }\n[[flow]]\nname = "tcp"\ntool = "iperf3"\n'
    path = design(tmp_path, flows, extra='fidelity = "off"')
    proc = subprocess.Popen([sys.executable, "-m", "fecbench", "run", str(path), "--db", str(tmp_path / "k.sqlite")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    start = marks.start_time(proc.pid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:   # until both flows' clients run (the foreground waits 5 s for them)
        argv = " ".join(a for _, a in campaign_processes(proc.pid, start))   # (command lines cut at 200 chars)
        if "iperf3 -c" in argv and "fake.py client" in argv:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError(f"the flows' clients never started: {proc.communicate()[1][-2000:]}")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = endpoint_leftovers(proc.pid)
    assert any(p.name.startswith("flow-") or "flow-" in str(p) for p in _nested(left)), left
    out = fecbench("clean")
    assert out.returncode == 0, out.stderr
    assert campaign_processes(proc.pid, start) == []
    assert not endpoint_leftovers(proc.pid)


def _nested(paths: set[Path]) -> list[Path]:
    """The cgroups inside the given ones (a flow's cgroup is inside its network's)."""
    return [child for p in paths if p.is_dir() for child in p.iterdir() if child.is_dir()]


@pytest.mark.require_root
@pytest.mark.slow
def test_explain_draws_the_competing_flows_windows(flows_db: Path, tmp_path: Path) -> None:
    """The flows' kept qlog (flow-<id>-… in the run's artifacts folder): each fecq flow's sender's congestion
    window on the run's time axis (iperf3 writes no qlog); the timeline figure is written."""
    from fecbench.analysis import results
    from fecbench.analysis.traces import explain, timeline

    run = results.load(flows_db).iloc[0].to_dict()
    built = timeline.build(flows_db, run)
    names = set(built.flow_windows["flow"])
    assert any(n.startswith("quic-bg") for n in names) and any(n.startswith("fec-bg") for n in names), names
    assert not any(n.startswith("tcp") for n in names)
    assert built.flow_windows["cwnd"].gt(0).all() and built.flow_windows["t_s"].between(-30, 60).all()
    written = explain.explain(flows_db, str(run["key"]), tmp_path)
    assert written.figure.read_bytes()[:4] == b"\x89PNG"
