"""A/B on one runner (issue 68 item 3): `fecbench-ci ab BASE_REF HEAD_REF` in a stack's repository builds both
refs, runs their runs interleaved (ABBA chunks, the same keys and loss seeds) and compares them. Here the stack is
fecq behind a wrapper its repository's build.sh writes: the head commit's wrapper makes the client drop the repairs
it receives (a deliberate FEC regression: FEC stopped recovering, its repairs still sent), which the compare must
call worse (exit 1) in its lossy runs. (Turning FEC off altogether is no regression
to test with: ci-recipes/README.md, "A/B on one runner".)"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.helpers.campaign import FECQ, ROOT
from tests.helpers.designs import design_text

SCRIPT = ROOT / "ci-recipes" / "fecbench-ci"

#: The recipe's example design reduced to its FEC label at one lossy point where FEC's rebuilding pays (10 %
#: uniform loss, 120 ms RTT, 20 kB), short frames out of the loss index (`min_bytes`: twins repeat), 32 runs a
#: side. Measured: all runs 1.33 [1.05, 1.46], the lossy classes 1.41 [1.16, 1.72] and 1.37 [1.15, 1.64] worse.
#: (Without min_bytes it took 48 runs a side for the classes' lower bounds to reach 1.13-1.15.)
DESIGN = design_text(
    "ci-ab", seed=60, topology="topologies/single.toml", repetitions=32, timeout_s=30,
    settings='order = "random"\nimpl_dirs = ["impls"]', method="factorial",
    factors={"bw": {"levels": [10], "unit": "Mbit/s"}, "owd": {"levels": [60], "unit": "ms"}, "p": {"levels": [0.1]}},
    loss={"model": "uniform", "p": "p", "min_bytes": 200}, workload='kind = "download"\nsizes = ["20kB"]',
    impls=[("fecq", "quic-fec", {"fec": "rlc:4,3,12"})])

BUILD_BASE = f"""#!/bin/sh
mkdir -p bin
printf '#!/bin/sh\\nexec {FECQ} "$@"\\n' > bin/fecq
chmod +x bin/fecq
"""

# The regression: the client drops the repairs it receives (fecq's TEST ONLY --test-ignore-repairs): FEC still
# costs its repairs and rebuilds nothing.
BUILD_HEAD = f"""#!/bin/sh
mkdir -p bin
cat > bin/fecq <<'END'
#!/bin/sh
case "$1" in server|client) role=$1; shift; exec {FECQ} "$role" --test-ignore-repairs "$@" ;; esac
exec {FECQ} "$@"
END
chmod +x bin/fecq
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def _stack_repository(repo: Path) -> None:
    """A stack's repository with two commits: `base` (fecq as it is) and `head` (its FEC no longer recovers)."""
    (repo / ".fecbench" / "impls" / "fecq").mkdir(parents=True)
    (repo / ".fecbench" / "ci.toml").write_text(DESIGN)
    text = (ROOT / "quic-impls" / "fecq" / "impl.toml").read_text()
    text = re.sub(r'(?m)^binary = .*$', 'binary = "../../../bin/fecq"', text)
    (repo / ".fecbench" / "impls" / "fecq" / "impl.toml").write_text(re.sub(r'(?m)^build = .*$', "", text))
    (repo / ".gitignore").write_text("bin/\nfecbench-ci-out/\n")
    (repo / "build.sh").write_text(BUILD_BASE)
    (repo / "build.sh").chmod(0o755)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "tag", "base")
    (repo / "build.sh").write_text(BUILD_HEAD)
    _git(repo, "commit", "-qam", "head: FEC stopped recovering")


def _repository(tmp_path: Path) -> Path:
    if not FECQ.exists():
        pytest.skip(f"{FECQ} is not built (make bootstrap)")
    repo = tmp_path / "stack"
    repo.mkdir()
    _stack_repository(repo)
    return repo


def _starts(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT key, started_at FROM runs"))


@pytest.mark.require_root
@pytest.mark.slow
@pytest.mark.recipes
def test_ab_catches_an_fec_regression_between_two_refs_run_interleaved(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    out = subprocess.run([str(SCRIPT), "ab", "--margin", "5%", "base", "HEAD"], cwd=repo, capture_output=True,
                         text=True, timeout=900, check=False, env={**os.environ, "COLUMNS": "200"})
    log = out.stdout[-5000:] + out.stderr[-3000:]
    assert out.returncode == 1, log
    result = json.loads((repo / "fecbench-ci-out" / "compare.json").read_text())
    verdicts = {g["group"]: g["verdict"] for g in result["metric_comparison"]["groups"]}
    assert verdicts["quic-fec 20 kB"] == "worse", log
    # Interleaved: the same keys on both sides, chunk by chunk, base first in the first chunk, head first in the next.
    base, head = (_starts(repo / "fecbench-ci-out" / f"{s}.sqlite") for s in ("base", "head"))
    assert set(base) == set(head) and len(base) == 32
    first = min(base.values())
    assert first < min(head.values())
    assert max(base.values()) > min(head.values()), "the two sides ran one after the other, not interleaved"
    refs = (repo / "fecbench-ci-out" / "refs.txt").read_text().split()
    assert refs[0:3] == ["base", "base", _git(repo, "rev-parse", "base").strip()], refs
    assert not _git(repo, "worktree", "list").strip().count("\n"), "worktrees left behind"


@pytest.mark.require_root
def test_ab_refuses_refs_whose_designs_plan_other_runs(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    (repo / ".fecbench" / "ci.toml").write_text(DESIGN.replace("repetitions = 32", "repetitions = 33"))
    _git(repo, "commit", "-qam", "more repetitions")
    out = subprocess.run([str(SCRIPT), "ab", "base", "HEAD"], cwd=repo, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "do not plan the same runs" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([str(SCRIPT), "ab", "base", "no-such-ref"], cwd=repo, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 2 and "no-such-ref: no such commit" in out.stderr, out.stderr
