"""`fecbench bench backends` without a campaign: how two runs' verdict logs are compared (identical, same
losses, agreeing by index), the per-point table, the design copy (fecbench.analysis.studies.backends) and bad
input (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

from fecbench.analysis.studies import backends as cb
from fecbench.dropper.dropper import RECORD_DTYPE

ROOT = Path(__file__).resolve().parent.parent

DATA, ACK = 1242, 60


def log(lengths: list[int], dropped: set[int]) -> np.ndarray:
    out = np.zeros(len(lengths), dtype=RECORD_DTYPE)
    out["index"] = np.arange(len(lengths))
    out["len"] = lengths
    out["verdict"] = [i in dropped for i in range(len(lengths))]
    return out


def test_identical_logs() -> None:
    a = log([DATA] * 10, {3})
    s = cb.compare_stream(a, a.copy())
    assert (s.identical, s.same_losses, s.agree) == (True, True, True)
    assert s.packets == (10, 10) and s.drops == (1, 1) and s.common == 10


def test_an_extra_ack_after_the_last_drop_keeps_the_same_losses() -> None:
    """The dropper decides by index: one more ACK in run b shifts every later packet by one index, so the
    losses are the same packets only while they fall before that point."""
    a = log([DATA] * 6 + [DATA] * 4, {2})
    b = log([DATA] * 6 + [ACK] + [DATA] * 4, {2})
    s = cb.compare_stream(a, b)
    assert (s.identical, s.same_losses, s.agree) == (False, True, True)
    assert s.common == 6 and s.packets == (10, 11)


def test_a_drop_after_the_divergence_is_not_the_same_loss() -> None:
    a = log([DATA] * 10, {8})
    b = log([DATA] * 6 + [ACK] + [DATA] * 4, {8})
    s = cb.compare_stream(a, b)
    assert (s.identical, s.same_losses, s.agree) == (False, False, True)


def test_different_verdicts_at_one_index_do_not_agree() -> None:
    s = cb.compare_stream(log([DATA] * 10, {3}), log([DATA] * 10, {4}))
    assert (s.identical, s.same_losses, s.agree) == (False, False, False)


def test_a_shorter_run_that_saw_the_same_prefix_is_not_identical() -> None:
    s = cb.compare_stream(log([DATA] * 10, {1}), log([DATA] * 8, {1}))
    assert (s.identical, s.same_losses, s.agree, s.common) == (False, True, True, 8)


def run(status: str, dct: float | None, logs: dict, late: float | None = None) -> dict:
    return {"status": status, "dct_ms": dct, "logs": logs, "lateness_p50_us": late}


def test_table_per_point_and_overall() -> None:
    same = {("bottleneck", "forward"): log([ACK] * 5, {1}), ("bottleneck", "reverse"): log([DATA] * 8, {2})}
    shifted = {("bottleneck", "forward"): log([ACK] * 5 + [ACK], {1}),
               ("bottleneck", "reverse"): log([DATA] * 8, {2})}
    late_drop = {("bottleneck", "forward"): log([ACK] * 5, {1}),
                 ("bottleneck", "reverse"): log([DATA] * 3 + [ACK] + [DATA] * 4, {2, 6})}
    a = {(0, "quic", 1000, 0): run("ok", 100.0, same), (0, "quic", 50000, 0): run("ok", 200.0, same),
         (1, "quic", 1000, 0): run("ok", 90.0, same), (1, "quic", 50000, 0): run("failed", None, {})}
    b = {(0, "quic", 1000, 0): run("ok", 100.0, same, 2000), (0, "quic", 50000, 0): run("ok", 250.0, shifted, 3000),
         (1, "quic", 1000, 0): run("ok", 100.0, late_drop, 1000), (1, "quic", 50000, 0): run("ok", 80.0, same, 1000)}
    lines, data = cb.table(a, b, ("netem", "delayline"))
    assert data["pairs"] == 3 and data["not_ok"] == 1
    assert (data["identical"], data["same_losses"], data["agree"]) == (1, 2, 2)
    assert data["points"][0]["median_dct_ratio"] == pytest.approx((1.0 + 0.8) / 2)
    assert data["points"][1]["median_dct_ratio"] == pytest.approx(0.9)
    assert data["median_dct_ratio"] == pytest.approx(0.9) and not data["within_goal"]
    assert data["packet_gap_max"] == 1
    assert data["lateness_p50_ms"] == {"delayline": pytest.approx(1.5)}
    assert any("not ok: point 1 quic size 50000" in line for line in lines)


def test_table_of_one_backend_twice_names_both_sides() -> None:
    same = {("bottleneck", "reverse"): log([DATA] * 4, {1})}
    a = {(0, "quic", 1000, 0): run("ok", 100.0, same, 1000)}
    b = {(0, "quic", 1000, 0): run("ok", 104.0, same, 3000)}
    _, data = cb.table(a, b, ("delayline", "delayline"))
    assert set(data["lateness_p50_ms"]) == {"delayline (a)", "delayline (b)"} and data["within_goal"]


def test_design_copy_turns_verdict_logs_on(tmp_path: Path) -> None:
    dst = tmp_path / "d.toml"
    cb.design_copy(ROOT / "designs" / "smoke.toml", dst, 3)
    design = tomllib.loads(dst.read_text())["design"]
    assert design["verdict_log"] is True and design["repetitions"] == 3
    assert Path(design["topology"]).is_absolute() and Path(design["topology"]).is_file()


@pytest.mark.parametrize(("argv", "message"), [
    (["--backends", "netem"], "two of netem, delayline"),
    (["--backends", "netem,tbf"], "two of netem, delayline"),
    (["no-such-design.toml"], "no such design file"),
    (["--repetitions", "0"], "at least 1"),
])
def test_bad_input_exits_2(argv: list[str], message: str, tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "fecbench", "bench", "backends", *argv, "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()
