"""The campaign's fidelity check: RTT per point, and with fidelity_rate the rate of each path, stored per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fecbench.emulation import fidelity
from fecbench.emulation.fidelity import RATE_BOUND
from fecbench.inputs.errors import SpecError
from fecbench.runners.experiment.design import parse_design
from tests.helpers.campaign import fake_design, fecbench, rows


def scripted_checks(monkeypatch: pytest.MonkeyPatch, readings: list[list[float]]) -> list[int]:
    """Replace the network measurement by scripted RTT readings (one list of paths per measurement,
    configured RTT 10 ms); returns the list that counts the measurements taken."""
    taken: list[int] = []

    def once(net: object, rate_probe: bool, probes: int) -> list[dict]:
        rtts = readings[taken.count(1)]
        taken.append(1)
        return [{"path": i + 1, "rtt_configured_ms": 10.0, "rtt_measured_ms": rtt, "probes_received": 40,
                 "ok": fidelity.rtt_ok(10.0, rtt)} for i, rtt in enumerate(rtts)]

    monkeypatch.setattr(fidelity, "measure_once", once)
    monkeypatch.setattr(fidelity.time, "sleep", lambda s: taken.append(-s))   # waits between checks, not slept
    return taken


def test_a_passing_disturbance_is_measured_again_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = scripted_checks(monkeypatch, [[10.2, 17.0], [10.3, 10.2]])
    rows_ = fidelity.measure(object())
    assert taken == [1, -1.0, 1] and all(row["ok"] and row["checks"] == 2 for row in rows_)
    # Only path 2's first measurement failed; it stays on record.
    assert rows_[0]["failed_checks"] == [] and rows_[1]["failed_checks"] == [
        {"rtt_measured_ms": 17.0, "probes_received": 40}]


def test_a_wrong_delay_fails_every_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = scripted_checks(monkeypatch, [[12.1], [12.0], [12.2], [10.0]])
    (row,) = fidelity.measure(object())
    # three measurements, spaced so that a passing disturbance of a second or two is outlasted
    assert taken == [1, -1.0, 1, -2.0, 1] and fidelity.CHECKS == 3 and not row["ok"] and row["checks"] == 3
    assert [r["rtt_measured_ms"] for r in row["failed_checks"]] == [12.1, 12.0]


def test_a_passing_check_is_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = scripted_checks(monkeypatch, [[10.4]])
    assert fidelity.measure(object())[0]["checks"] == 1 and len(taken) == 1


def test_rate_probe_needs_the_fidelity_check(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "d.toml", {"a": {"behave": "ok"}}, extra='fidelity = "off"\nfidelity_rate = true')
    with pytest.raises(SpecError, match="fidelity_rate: a rate probe needs the fidelity check"):
        parse_design(design)


def test_rate_probe_does_not_change_run_keys(tmp_path: Path) -> None:
    plain = parse_design(fake_design(tmp_path / "a.toml", {"a": {"behave": "ok"}}))
    probed = parse_design(fake_design(tmp_path / "b.toml", {"a": {"behave": "ok"}}, extra="fidelity_rate = true"))
    assert probed.fidelity_rate and not plain.fidelity_rate
    assert plain.experiment_hash("t") == probed.experiment_hash("t")


@pytest.mark.require_root
def test_campaign_records_measured_rtt_and_rate_per_path(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "fid.toml", {"a": {"behave": "ok"}}, points=2, name="fidcamp",
                         extra="fidelity_rate = true")
    db = tmp_path / "fid.sqlite"
    done = fecbench("run", str(design), "--db", str(db))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    found = rows(db, "SELECT r.status, f.*, p.bw, p.owd FROM runs r JOIN fidelity f ON f.run_key = r.key "
                     "JOIN points p ON p.campaign_id = r.campaign_id AND p.point = r.point")
    assert len(found) == 2 and all(row["status"] == "ok" and row["ok"] == 1 for row in found), found
    for row in found:
        assert 1 <= row["checks"] <= fidelity.CHECKS and json.loads(row["json"])["ok"] is True
        assert row["rtt_configured_ms"] == pytest.approx(2 * row["owd"], rel=0.05)
        assert row["rtt_measured_ms"] >= row["rtt_configured_ms"]
        assert row["rate_configured_mbit"] == pytest.approx(row["bw"])
        assert row["rate_measured_mbit"] >= RATE_BOUND * row["rate_configured_mbit"]
