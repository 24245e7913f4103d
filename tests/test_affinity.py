"""Where a campaign's processes run (fecbench.host.affinity): its own processes off the CPU left to the delay
elements, which may use every CPU; recorded with the campaign."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fecbench.host import affinity
from fecbench.inputs.errors import UserError


def test_cpu_lists_and_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    assert affinity.parse_list("0-3,6") == {0, 1, 2, 3, 6} and affinity.parse_list("1") == {1}
    monkeypatch.delenv(affinity.ENV, raising=False)
    assert affinity.cpu_sets({0, 1}) == {"harness": [0], "delay": [0, 1], "endpoints": [0, 1], "reserved": 1}
    assert affinity.cpu_sets({0, 2, 5}) == {"harness": [0, 2], "delay": [0, 2, 5], "endpoints": [0, 2, 5],
                                            "reserved": 5}
    assert affinity.cpu_sets({3}) is None  # one CPU: nothing to leave to the delay elements
    monkeypatch.setenv(affinity.ENV, "strict")   # the former policy: endpoints with the harness
    assert affinity.cpu_sets({0, 1}) == {"harness": [0], "delay": [0, 1], "endpoints": [0], "reserved": 1}
    monkeypatch.setenv(affinity.ENV, "off")
    assert affinity.cpu_sets({0, 1}) is None and affinity.endpoint_cpus() is None
    monkeypatch.setenv(affinity.ENV, "sometimes")   # not a policy: refused, never read as the default
    with pytest.raises(UserError, match="FECBENCH_CPU_AFFINITY='sometimes': not a placement; use on"):
        affinity.policy()
    monkeypatch.setenv(affinity.ENV, "")
    assert affinity.policy() == "on"
    assert affinity.preemption_model()  # a name, or "unknown": never raises


def test_autogroup_is_read_from_the_kernel_setting(tmp_path) -> None:
    setting = tmp_path / "sched_autogroup_enabled"
    for text, said in (("1\n", "on"), ("0\n", "off")):
        setting.write_text(text)
        assert affinity.autogroup(setting) == said
    assert affinity.autogroup(tmp_path / "absent") == "absent"   # a kernel built without it
    assert affinity.describe()["autogroup"] in ("on", "off", "absent")


def test_confining_keeps_children_off_the_reserved_cpu_and_describe_says_so() -> None:
    """In a child process (the test's own affinity stays): confine, then a process it starts inherits it."""
    cpus = affinity.all_cpus()
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to confine")
    script = ("import json, os, subprocess, sys\n"
              "from fecbench.host import affinity\n"
              "assert affinity.confine_harness() is None\n"
              "child = subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'],"
              " capture_output=True, text=True, check=True).stdout\n"
              "print(json.dumps({'child': json.loads(child), 'describe': affinity.describe()}))\n")
    env = {k: v for k, v in os.environ.items() if k != affinity.ENV}
    out = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                                    env=env).stdout)
    assert out["child"] == sorted(cpus - {max(cpus)})
    described = out["describe"]
    assert described["harness_cpus"] == out["child"] and described["delay_cpus"] == sorted(cpus)
    assert described["endpoint_cpus"] == sorted(cpus) and described["preemption"]
    assert described["policy"] == "the harness off the last CPU; endpoints and delay elements on every CPU"


@pytest.mark.require_root
def test_a_delay_element_gets_the_cpus_it_is_given() -> None:
    from fecbench.timekeeping.delayline import DelayLine, binary_path
    from tests.helpers.delayline_line import line

    binary_path()
    cpus = sorted(affinity.all_cpus())
    with line("af") as net, DelayLine.start(net.if_a, net.if_b, 1.0, 1.0, run_in=net.run_in("D"),
                                            cpus={cpus[0]}) as dl:
        status = open(f"/proc/{dl.pid}/status").read()
        allowed = next(line.split(":", 1)[1].strip() for line in status.splitlines()
                       if line.startswith("Cpus_allowed_list"))
        assert affinity.parse_list(allowed) == {cpus[0]} and not dl.warnings


@pytest.mark.require_root
@pytest.mark.parametrize("policy", ["on", "strict"])
def test_endpoints_run_on_the_cpus_their_policy_gives_them(tmp_path, policy: str) -> None:
    """Real Mininet, the fake implementation reporting the CPUs its client was started on: by default every CPU
    (also the one the harness keeps off), with ``strict`` the harness's; the campaign's record says so."""
    from tests.helpers.campaign import fake_design, fecbench, rows

    cpus = sorted(affinity.all_cpus())
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to place")
    design = fake_design(tmp_path / "placed.toml", {"ok": {"behave": "ok"}}, points=1, timeout_s=30, name="placed")
    db = tmp_path / "placed.sqlite"
    out = fecbench("run", str(design), "--db", str(db), env={affinity.ENV: policy})
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = rows(db, "SELECT m.json FROM runs r JOIN metrics m ON m.run_key = r.key")
    placed = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])["cpu_affinity"]
    harness = sorted(set(cpus) - {max(cpus)})
    assert placed["harness_cpus"] == harness
    expected = cpus if policy == "on" else harness
    assert json.loads(run["json"])["cpus"] == expected == placed["endpoint_cpus"], (run, placed)


def test_an_unknown_placement_is_refused_before_anything_runs(tmp_path) -> None:
    """FECBENCH_CPU_AFFINITY=sometimes: exit 2 naming the placements, no database written (it was read as the
    default until 2026-11-28)."""
    from tests.helpers.campaign import fake_design, fecbench

    design = fake_design(tmp_path / "placed.toml", {"ok": {"behave": "ok"}}, points=1, timeout_s=30, name="placed")
    out = fecbench("run", str(design), "--db", str(tmp_path / "placed.sqlite"), env={affinity.ENV: "sometimes"})
    assert out.returncode == 2, out.stdout + out.stderr
    assert "FECBENCH_CPU_AFFINITY='sometimes': not a placement; use on" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "placed.sqlite").exists()
