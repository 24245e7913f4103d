"""Checks before the first run, without root (issue 15, item 3a and 3b): the implementations' own
argument checks (the fake implementation's `check`, fecq's `check-args`) and the design's timeout_s
against each run's minimum duration. Refused designs are exit 2 and leave nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from fecbench.inputs.errors import UserError
from fecbench.runners.experiment.checks import (
    CUT_OFF_SHARE,
    SAFE_MULTIPLE,
    check_timeouts,
    cut_off_share,
    limit_for,
    min_duration_s,
    short_timeouts,
    validate,
)
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import FECQ, fake_design, fecbench
from tests.helpers.designs import FAKE_DIR, REPO_ROOT, UNIFORM_P, design_file


def test_min_duration_download_and_messages() -> None:
    # 20 MB at 2 Mbit/s: 80 s of transfer, plus handshake, request and a queue's delay (3 RTTs).
    assert min_duration_s("download", 20_000_000, 100.0, 2.0) == pytest.approx(80.3)
    # No rate limit: only the RTTs.
    assert min_duration_s("download", 10**9, 40.0, None) == pytest.approx(0.12)
    # Messages last their duration after the handshake and the request.
    assert min_duration_s("messages", None, 100.0, 2.0, duration_s=25.0) == pytest.approx(25.2)


def _slow_design(path: Path, timeout_s: float) -> Path:
    """20 MB downloads over 5 to 20 Mbit/s: the 5 Mbit/s end needs at least 32 s."""
    return fake_design(path, {"ok": {}}, points=3, sizes='["1kB", "20MB"]', timeout_s=timeout_s)


def test_short_timeout_names_points_and_can_be_accepted(tmp_path: Path) -> None:
    prepared = prepare(_slow_design(tmp_path / "slow.toml", timeout_s=30))
    short = short_timeouts(prepared)
    assert short and all(row["size"] == 20_000_000 for row in short)
    assert all(30 < SAFE_MULTIPLE * row["min_s"] <= row["needs_s"] for row in short)
    with pytest.raises(UserError) as refused:
        check_timeouts(prepared)
    text = str(refused.value)
    assert "timeout_s = 30 s" in text and "--accept-short-timeout" in text
    assert all(f"point {row['point']} (" in text for row in short)
    warnings: list[str] = []
    check_timeouts(prepared, accept=True, warn=warnings.append)
    assert len(warnings) == 1 and "point" in warnings[0]
    # Long enough for every point: no complaint.
    check_timeouts(prepare(_slow_design(tmp_path / "ok.toml", timeout_s=300)))



def test_a_limit_cuts_off_the_share_its_spread_says() -> None:
    # At the expectation, half the runs; at limit_for(), CUT_OFF_SHARE of them; twice as long, almost none.
    assert cut_off_share(100, 100) == pytest.approx(0.5)
    assert cut_off_share(limit_for(100), 100) == pytest.approx(CUT_OFF_SHARE)
    assert limit_for(100) == pytest.approx(163.8, abs=0.1)
    assert cut_off_share(200, 100) < 0.02


def _cellular(path: Path, timeout_s: float, p: float) -> Path:
    """rquic2021's cellular link (10 Mbit/s, 50 ms one way) at a uniform loss rate, 20 MiB downloads."""
    (path.parent / f"{path.stem}.csv").write_text(f"bw,owd,p\n10,50,{p}\n")
    return design_file(path, seed=2021, timeout_s=timeout_s, method="list", file=f"{path.stem}.csv",
                       factors={"bw": (1, 20), "owd": (10, 200), "p": (0.0, 0.1)}, loss=UNIFORM_P,
                       workload={"kind": "download", "sizes": ["20MiB"]}, impls=[("fake", "ok")],
                       settings={"impl_dirs": [str(FAKE_DIR)]})


def test_a_limit_the_baseline_cannot_meet_at_its_loss_rate_is_refused(tmp_path: Path) -> None:
    # rquic2021's 240 s at cellular 5 %: without FEC a 20 MiB download is expected to take ~261 s there (the
    # duration model; rQUIC's own baseline measured within 3 % of it at Wi-Fi), so the limit cut off most runs.
    # The lossless check alone (1.5 × 17 s) let it through.
    with pytest.raises(UserError) as refused:
        validate(_cellular(tmp_path / "cellular.toml", 240, 0.05), dry_run=True)
    text = str(refused.value)
    assert "p=0.05" in text and "without FEC about 26" in text and "% of those runs would reach the limit" in text
    (row,) = short_timeouts(prepare(_cellular(tmp_path / "again.toml", 240, 0.05), require_built=False))
    assert row["cut_off"] > 0.5 and row["needs_s"] == pytest.approx(limit_for(row["expected_s"]))
    # The same link without loss, or with a limit that leaves room for the baseline's spread, passes.
    validate(_cellular(tmp_path / "lossless.toml", 240, 0.0), dry_run=True)
    validate(_cellular(tmp_path / "room.toml", 450, 0.05), dry_run=True)


def test_rquic2021s_limit_is_one_its_baseline_meets() -> None:
    prepared = validate(REPO_ROOT / "designs" / "rquic2021.toml", dry_run=True)
    assert not short_timeouts(prepared) and prepared.design.timeout_s == 1800

def test_short_timeout_refused_by_run_nothing_written(tmp_path: Path) -> None:
    design, db = _slow_design(tmp_path / "slow.toml", timeout_s=30), tmp_path / "slow.sqlite"
    out = fecbench("run", str(design), "--db", str(db), "--dry-run")
    assert out.returncode == 2 and "below 1.5× the minimum duration" in out.stderr + out.stdout
    assert not db.exists()
    out = fecbench("run", str(design), "--db", str(db), "--dry-run", "--accept-short-timeout")
    assert out.returncode == 0, out.stderr
    assert "accept-short-timeout" in out.stdout and not db.exists()


def test_one_rejected_argument_set_refuses_the_design(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "args.toml", {"good": {"level": "3"}, "bad": {"level": "12"},
                                                  "default": {}})
    db = tmp_path / "args.sqlite"
    for extra in ((), ("--dry-run",)):
        out = fecbench("run", str(design), "--db", str(db), *extra)
        text = out.stderr + out.stdout
        assert out.returncode == 2, text
        line = next(i + 1 for i, row in enumerate(design.read_text().splitlines()) if '"12"' in row)
        assert f"args.toml:{line}" in text and "'bad'" in text and "'fake'" in text and "level = '12'" in text
        assert "'good'" not in text and "nothing was run or written" in text
        assert not db.exists()


@pytest.mark.skipif(not FECQ.exists(), reason="fecq is not built (make native)")
def test_fecq_rejects_rs_20_30_before_any_run(tmp_path: Path) -> None:
    impls = [("fecq", "quic"), ("fecq", "quic-rs", {"fec": "rs:30,20"}),
             ("fecq", "quic-rs-bad", {"fec": "rs:20,30", "cc": "bbr"})]
    design = design_file(tmp_path / "fecq.toml", "fecqargs", repetitions=None, seed=1, timeout_s=60, points=2,
                         factors={"bw": (5, 20), "owd": (5, 15), "p": (0.01, 0.05)}, loss=UNIFORM_P,
                         workload={"kind": "download", "sizes": ["100kB"]}, impls=impls)
    db = tmp_path / "fecq.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    text = out.stderr + out.stdout
    assert out.returncode == 2, text
    line = next(i + 1 for i, row in enumerate(design.read_text().splitlines()) if "rs:20,30" in row)
    assert f"fecq.toml:{line}" in text and "'quic-rs-bad'" in text and "fec = 'rs:20,30'" in text, text
    assert "cc" not in text.split("rejects")[1].split(":")[0]
    assert "'quic-rs'" not in text and not db.exists()
