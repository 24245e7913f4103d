"""`fecbench run --only KEY`: one run again with its key and loss seed (issue 62 item 5: `explain`'s advice could
not re-run one finished run with its qlog kept)."""

from __future__ import annotations

from pathlib import Path

from fecbench.host.paths import REPO_ROOT
from fecbench.runners.executors.selection import only_keys
from fecbench.runners.experiment.prepare import prepare
from tests.helpers.campaign import fecbench
from tests.helpers.designs import design_file


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


def test_only_finds_a_key_made_before_the_design_was_given_more_repetitions(tmp_path: Path) -> None:
    """Issue 72 item 7: a run recorded while the design wrote 2 repetitions, asked for after it was raised to 4, into
    a new database: found under the keying its campaign used, with the same key and loss seed."""
    fields = dict(seed=3, method="factorial", factors={"bw": {"levels": [5, 10]}},
                  impls=[("fecq", "quic", {"fec": "none"})])
    before = prepare(design_file(tmp_path / "grown.toml", "grown", repetitions=2, **fields), require_built=False)
    run = before.runs[3]
    design = design_file(tmp_path / "grown.toml", "grown", repetitions=4, **fields)
    assert run.key not in {r.key for r in prepare(design, require_built=False).runs}   # the design's own keys moved
    db = tmp_path / "again.sqlite"
    out = fecbench("run", str(design), "--db", str(db), "--only", run.key[:16], "--dry-run", columns=250)
    assert out.returncode == 0 and "grown: 1 of 8 run(s) to do" in out.stdout, out.stdout + out.stderr
    found = prepare(design, require_built=False)
    (again,) = only_keys(found, run.key[:16])
    assert (again.key, again.loss_seed, again.repetition) == (run.key, run.loss_seed, run.repetition)
    bad = fecbench("run", str(design), "--db", str(db), "--only", "zzzz", "--dry-run")
    assert bad.returncode == 2 and "any of 0-100" in bad.stderr and "Traceback" not in bad.stderr
