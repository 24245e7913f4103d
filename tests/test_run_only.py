"""`fecbench run --only KEY`: one run again with its key and loss seed (issue 62 item 5: `explain`'s advice could
not re-run one finished run with its qlog kept)."""

from __future__ import annotations

from pathlib import Path

from fecbench.host.paths import REPO_ROOT
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fecbench


def test_only_one_key_of_the_smoke_design_into_a_new_database(tmp_path: Path) -> None:
    smoke = REPO_ROOT / "designs" / "smoke.toml"
    runs = prepare(smoke, require_built=False).runs
    key = runs[5].key
    db = tmp_path / "again.sqlite"
    out = fecbench("run", str(smoke), "--db", str(db), "--only", key[:16], "--dry-run", columns=250)
    assert out.returncode == 0, out.stderr
    assert f"smoke: 1 of {len(runs)} run(s) to do" in out.stdout, out.stdout
    two = fecbench("run", str(smoke), "--db", str(db), "--only", f"{key[:16]},{runs[0].key[:16]}", "--dry-run",
                   columns=250)
    assert f"smoke: 2 of {len(runs)} run(s) to do" in two.stdout, two.stdout
    bad = fecbench("run", str(smoke), "--db", str(db), "--only", "zzzz", "--dry-run")
    assert bad.returncode == 2 and "--only 'zzzz': no run of smoke.toml" in bad.stderr and "Traceback" not in bad.stderr
    assert not db.exists()   # a dry run writes nothing
