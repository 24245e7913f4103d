"""The foundation: spec validation, CLI error behaviour, version, doctor, cleanup of dead owners."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fecbench.host import cleanup, marks
from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section, load_toml

ROOT = Path(__file__).resolve().parent.parent
FECBENCH = [sys.executable, "-m", "fecbench"]


def run_cli(*args: str, user: str | None = None, **kw) -> subprocess.CompletedProcess[str]:
    argv = [*FECBENCH, *args]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120, **kw)


# --- spec loading -------------------------------------------------------------------------------

def test_invalid_toml_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[design]\nname = \n")
    with pytest.raises(SpecError) as info:
        load_toml(bad)
    assert str(bad) in str(info.value) and "line 2" in str(info.value)


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="file not found"):
        load_toml(tmp_path / "nope.toml")


def test_section_checks_type_range_choices_and_unknown_keys() -> None:
    s = Section({"design": {"name": "x", "repetitions": 0, "order": "zigzag", "typo": 1}}, "d.toml")
    design = s.section("design")
    assert design.get("name", str) == "x"
    with pytest.raises(SpecError, match=r"d.toml: design.repetitions: must be ≥ 1"):
        design.get("repetitions", int, min=1)
    with pytest.raises(SpecError, match=r"design.order: unknown value 'zigzag' \(allowed: random, sequential\)"):
        design.get("order", str, choices=["random", "sequential"])
    with pytest.raises(SpecError, match=r"design.seed: must be an integer"):
        Section({"seed": "7"}, "d.toml", "design").get("seed", int)
    with pytest.raises(SpecError, match=r"design.typo: unknown key 'typo': nothing reads it "
                                        r"\(allowed: name, order, repetitions\)"):
        design.done()


def test_section_booleans_are_not_numbers() -> None:
    with pytest.raises(SpecError, match="must be a number"):
        Section({"bw": True}, "t.toml").get("bw", float)
    assert Section({"bw": 3}, "t.toml").get("bw", float) == 3


def test_array_of_tables() -> None:
    s = Section({"impl": [{"name": "fecq"}, {"name": "x", "bad": 1}]}, "d.toml")
    items = s.sections("impl")
    assert [i.get("name", str) for i in items] == ["fecq", "x"]
    with pytest.raises(SpecError, match=r"impl\[1\].bad: unknown key"):
        items[1].done()


# --- CLI ----------------------------------------------------------------------------------------

def test_version_prints_version_and_git_sha() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    out = proc.stdout.strip()
    assert out.startswith("fecbench 0.") and "(" in out and "unknown" not in out


def test_unknown_command_is_a_usage_error() -> None:
    proc = run_cli("frobnicate")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


# Run as nobody when the tests run as root (setpriv drops the privileges), else as ourselves.
NON_ROOT = "65534" if os.geteuid() == 0 else None
needs_setpriv = pytest.mark.skipif(NON_ROOT is not None and shutil.which("setpriv") is None,
                                   reason="as root, needs setpriv to drop privileges")


@needs_setpriv
def test_non_root_gets_a_clear_error_not_a_traceback() -> None:
    proc = run_cli("clean", user=NON_ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "needs root" in proc.stderr and "Traceback" not in proc.stderr


@needs_setpriv
def test_doctor_as_non_root_reports_root_missing() -> None:
    proc = run_cli("doctor", "--json", user=NON_ROOT)
    assert proc.returncode == 1
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["root"]["status"] == "missing" and checks["root"]["fix"]


@pytest.mark.require_root
def test_doctor_probes_this_kernel() -> None:
    proc = run_cli("doctor", "--json")
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("root", "bpf syscall", "BTF", "bpffs", "clsact", "cls_bpf", "tbf", "veth", "mininet",
                 "clang (bpf target)", "bpftool", "sqlite"):
        assert checks[name]["status"] == "ok", checks[name]
    # netem and OVS are optional: their absence never fails doctor.
    assert checks["netem"]["required"] is False and checks["netem"]["status"] in ("ok", "optional")
    assert checks["openvswitch"]["required"] is False
    # doctor says which link backend and dropper hook fecbench takes here
    assert checks["link backend"]["detail"].split()[0] in ("netem", "delayline"), checks["link backend"]
    assert checks["dropper hook"]["detail"].split()[0] in ("tcx", "clsact"), checks["dropper hook"]
    assert proc.returncode == (0 if report["ok"] else 1)


def test_doctor_shows_xquic_built_or_how_to_build_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """XQUIC is not part of bootstrap: doctor shows whether it is built, and its absence (with the
    command that builds it) never fails doctor."""
    from fecbench.cli import doctor

    monkeypatch.setattr(doctor, "ROOT", tmp_path)
    checks = {c.name: c for c in doctor.check_artefacts()}
    assert checks["built: xquic"].status == "optional" and checks["built: xquic"].fix == "make xquic"
    assert checks["built: xquic"].required is False and checks["built: fecq"].status == "missing"
    client = tmp_path / "quic-impls" / "xquic" / "build" / "bin" / "test_client"
    client.parent.mkdir(parents=True)
    client.write_text("")
    assert {c.name: c for c in doctor.check_artefacts()}["built: xquic"].status == "ok"


# --- cleanup of a killed process's resources ------------------------------------------------------

@pytest.mark.require_root
def test_clean_removes_a_killed_owners_resources_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "FECBENCH_STATE_DIR": str(state)}
    owner_code = (
        "import subprocess, time\n"
        "from fecbench.host import cleanup\n"
        "ns = cleanup.prefix() + 'tclean'\n"
        "subprocess.run(['ip', 'netns', 'add', ns], check=True)\n"
        "cleanup.record('netns', ns)\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        "cleanup.record('pid', str(child.pid))\n"
        "print(ns, child.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", owner_code], env=env, stdout=subprocess.PIPE, text=True)
    bystander = subprocess.Popen(["sleep", "300"])  # not recorded: must survive
    try:
        ns, child_pid = owner.stdout.readline().split()
        child_start = marks.start_time(int(child_pid)) or 0
        owner.kill()
        owner.wait()
        monkeypatch.setattr(cleanup, "STATE_DIR", state)
        removed = cleanup.clean()
        mine = {("netns", ns), ("pid", child_pid)}
        assert mine <= {(e["kind"], e["name"]) for e in removed}
        # clean() is host-wide: it also ends processes that other dead fecbench processes marked (a
        # campaign killed by a test running beside this one); nothing else, never the bystander.
        others = [e for e in removed if (e["kind"], e["name"]) not in mine]
        assert all(e["kind"] == "process" and e["owner"] != owner.pid for e in others), others
        assert str(bystander.pid) not in {e["name"] for e in others}
        assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for _ in range(100):
            if not marks.running((int(child_pid), child_start)):   # gone, a zombie, or its PID another's
                break
            time.sleep(0.02)
        else:
            pytest.fail("recorded child still running")
        assert bystander.poll() is None
        assert not list(state.glob("*.json"))
    finally:
        bystander.kill()
        bystander.wait()
        subprocess.run(["ip", "netns", "delete", cleanup.prefix(owner.pid) + "tclean"], capture_output=True)
