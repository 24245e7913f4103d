"""The campaign's fidelity check: RTT per point, and with fidelity_rate the rate of each path, stored per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from fecbench.errors import SpecError
from fecbench.runners.design import parse_design
from tests.helpers.campaign import fake_design, fecbench, rows


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
    assert len(found) == 2 and all(row["status"] == "ok" and row["ok"] == 1 for row in found)
    for row in found:
        assert row["rtt_configured_ms"] == pytest.approx(2 * row["owd"], rel=0.05)
        assert row["rtt_measured_ms"] >= row["rtt_configured_ms"]
        assert row["rate_configured_mbit"] == pytest.approx(row["bw"])
        assert row["rate_measured_mbit"] >= 0.9 * row["rate_configured_mbit"]
