"""What ran, read back (fecbench.analysis.applied, the report's settings section): the settings recorded
with each run when a campaign plans it (the Recorder), read from a database where nothing ran yet."""

from __future__ import annotations

from pathlib import Path

from fecbench.analysis import applied
from fecbench.records import db as dbmod
from fecbench.runners.experiment.checks import validate
from fecbench.runners.run.recorder import Recorder
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


def test_the_report_links_the_timelines_of_runs_that_kept_qlog(tmp_path: Path) -> None:
    from fecbench.analysis.report import build
    from tests.helpers.qlog_db import make_db, tquic_files, tquic_verdicts

    db = tmp_path / "campaign.sqlite"
    keys = make_db(db, [{"label": "tquic", "impl": "tquic", "args": {"cc": "cubic"}, "qlogs": tquic_files(),
                         "verdicts": tquic_verdicts(), "metrics": {"dct_ms": 19.241, "bytes_app": 120_000}},
                        {"label": "tquic-bbr", "impl": "tquic", "args": {"cc": "bbr"}, "metrics": {"dct_ms": 20.0}}])
    written = build(db, tmp_path / "report")
    table = written.tables["timelines of representative runs"]
    assert list(table["label"]) == ["tquic"] and table["key"].iloc[0] == keys["tquic"]   # the other kept none
    link = f'timelines/{keys["tquic"][:12]}-timeline.png'
    assert (tmp_path / "report" / link).read_bytes()[:4] == b"\x89PNG" and f'href="{link}"' in written.html.read_text()
