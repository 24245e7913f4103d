"""What ran, read back (fecbench.analysis.applied, the report's settings section): the settings recorded
with each run when a campaign plans it (the Recorder), read from a database where nothing ran yet."""

from __future__ import annotations

from pathlib import Path

from fecbench import db as dbmod
from fecbench.analysis import applied
from fecbench.runners.checks import validate
from fecbench.runners.recorder import Recorder
from tests.helpers.campaign import fake_design


def test_applied_settings_recorded_at_planning_are_read_back(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "d.toml", {"a": {}, "b": {"level": "3"}}, points=2)
    design.write_text(design.read_text().replace("owd = { low = 2, high = 5 }",
                                                 'owd = { levels = [0.003], unit = "s" }'))
    prepared = validate(design)
    db = tmp_path / "d.sqlite"
    Recorder.open(db, prepared, "delayline", {}, {}).close()   # plans: points and pending runs, nothing run
    links = applied.links(db)
    assert set(links["owd_ms"]) == {3.0}                      # written in s, applied in ms
    assert len(links) == 2 * 2 and set(links["link"]) == {"bottleneck"}   # per point, both directions
    impls = applied.implementations(db).set_index("label")
    assert "--level 3" in impls.loc["b", "client argv"] and "--level" not in impls.loc["a", "client argv"]
    loss = applied.losses(db)
    assert set(loss["model"]) == {"uniform"} and loss["long_run_loss"].between(0.01, 0.05).all()
    assert dbmod.schema_version(dbmod.connect(db)) == dbmod.SCHEMA_VERSION
