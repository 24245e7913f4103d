"""`fecbench dropper` commands: pure ones without root, the kernel ones as root."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from fecbench.dropper import Uniform, reference_verdicts
from fecbench.dropper import testrun as testrun_mod

FB = [sys.executable, "-m", "fecbench", "dropper"]


def fb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*FB, *args], capture_output=True, text=True)


def test_model_conversions():
    out = json.loads(fb("model", "--loss", "0.05", "--burst", "3", "--json").stdout)
    assert out["k"] == 1.0 and out["h"] == 0.0
    assert abs(out["r"] - 1 / 3) < 1e-12 and abs(out["loss_rate"] - 0.05) < 1e-12
    assert abs(out["mean_burst"] - 3) < 1e-9
    out = json.loads(fb("model", "--p", "0.05", "--r", "0.3", "--k", "0.99", "--h", "0.2", "--json").stdout)
    assert abs(out["loss_rate"] - (0.3 * 0.01 + 0.05 * 0.8) / 0.35) < 1e-12


@pytest.mark.parametrize("args", [
    ["verify", "--model", "uniform", "--p", "1.5"],
    ["verify", "--model", "gilbert-elliott", "--p", "0.1", "--r", "0"],
    ["verify", "--model", "gilbert-elliott", "--p", "0.1"],
    ["verify", "--model", "trace", "--file", "/nonexistent/trace.txt"],
    ["model", "--loss", "0.5"],
])
def test_bad_input_exits_2_with_one_line(args):
    run = fb(*args)
    assert run.returncode == 2
    assert run.stderr.startswith("fecbench: error:") and len(run.stderr.strip().splitlines()) == 1


def test_verify_reports_the_first_mismatch(monkeypatch):
    model = Uniform(0.3)

    def flipped(model, seed, stream, packets, threads=1, ge_table_len=None):
        got = reference_verdicts(model, seed, stream, packets).astype(np.uint8)
        got[1234] ^= 1
        info = {"index": packets, "missing": 0, "duplicates": 0, "out_of_range": 0}
        return got, info

    monkeypatch.setattr(testrun_mod, "kernel_verdicts", flipped)
    result = testrun_mod.verify(model, 1, 0, 5000)
    assert not result.ok and result.first_mismatch == 1234 and "1234" in result.summary()


@pytest.mark.require_root
def test_verify_and_bench_commands(tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text("\n".join(str(i) for i in range(0, 5000, 7)) + "\n")
    for args in (["--model", "gilbert-elliott", "--p", "0.05", "--r", "0.3", "--k", "0.99", "--h", "0.2",
                  "--seed", "7", "--packets", "200000", "--threads", "2"],
                 ["--model", "uniform", "--p", "0.02", "--seed", "0"],
                 ["--model", "trace", "--file", str(trace), "--packets", "10000"]):
        run = fb("verify", *args)
        assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(fb("bench", "--json", "--repeat", "100000").stdout)
    assert {"empty_ns", "uniform_ns", "gilbert_elliott_ns", "trace_ns"} <= set(out)


@pytest.mark.require_root
def test_not_root_is_a_clear_error():
    """As an unprivileged user (nobody), attach and verify refuse with exit 2 and one line."""
    drop_root = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    for args in (["verify", "--model", "uniform", "--p", "0.1"], ["attach", "--dev", "lo", "--model", "none"]):
        run = subprocess.run([*drop_root, *FB, *args], capture_output=True, text=True)
        assert run.returncode == 2 and "needs root" in run.stderr, run.stderr


@pytest.mark.require_root
def test_hook_choice_explicit_then_environment_then_probe(monkeypatch):
    from fecbench.dropper.dropper import HOOK_ENV, fecdrop_binary, resolve_hook, tcx_available
    from fecbench.inputs.errors import UserError

    probed = tcx_available()
    assert probed is not None  # as root the probe answers
    assert probed == (json.loads(subprocess.run([str(fecdrop_binary()), "probe"], capture_output=True, text=True,
                                                check=True).stdout)["tcx"])  # Python and the loader agree
    monkeypatch.delenv(HOOK_ENV, raising=False)
    assert resolve_hook(None) == ("tcx" if probed else "clsact")
    monkeypatch.setenv(HOOK_ENV, "clsact")
    assert resolve_hook(None) == "clsact" and resolve_hook("tcx") == "tcx"  # an explicit choice wins
    monkeypatch.setenv(HOOK_ENV, "tc")
    with pytest.raises(UserError, match=HOOK_ENV):
        resolve_hook(None)
