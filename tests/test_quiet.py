"""Waiting for a quieter machine before fidelity-flagged runs run again (fecbench.runners.executors.quiet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fecbench.inputs.errors import UserError
from fecbench.runners.executors import quiet


def test_pressure_is_read_from_the_kernels_psi_file(tmp_path: Path) -> None:
    psi = tmp_path / "cpu"
    psi.write_text("some avg10=12.50 avg60=4.45 avg300=11.57 total=660637089\nfull avg10=0.00 avg60=0.00\n")
    assert quiet.cpu_pressure(psi) == pytest.approx(0.125)
    assert quiet.cpu_pressure(tmp_path / "missing") is None
    (tmp_path / "odd").write_text("some nothing\n")
    assert quiet.cpu_pressure(tmp_path / "odd") is None


def test_waits_until_quiet_or_the_longest_wait() -> None:
    now = {"t": 0.0}
    readings = iter([0.5, 0.4, 0.08])
    got = quiet.wait_for_quiet(limit=0.1, max_wait=60, read=lambda: next(readings),
                               sleep=lambda s: now.__setitem__("t", now["t"] + s), clock=lambda: now["t"])
    assert got.quiet and got.pressure == 0.08 and got.waited_s == 2 * quiet.POLL_S
    now["t"] = 0.0
    busy = quiet.wait_for_quiet(limit=0.1, max_wait=5, read=lambda: 0.9,
                                sleep=lambda s: now.__setitem__("t", now["t"] + s), clock=lambda: now["t"])
    assert not busy.quiet and busy.waited_s == 5 and "still busy after 5 s" in busy.text()
    assert quiet.wait_for_quiet(read=lambda: None, max_wait=5).text().startswith("no CPU pressure information")


def test_the_longest_wait_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(quiet.QUIET_WAIT_ENV, "12")
    assert quiet.max_wait_s() == 12
    monkeypatch.delenv(quiet.QUIET_WAIT_ENV)
    assert quiet.max_wait_s() == quiet.QUIET_WAIT_S
    monkeypatch.setenv(quiet.QUIET_WAIT_ENV, "soon")
    with pytest.raises(UserError, match="FECBENCH_QUIET_WAIT_S='soon'"):
        quiet.max_wait_s()
