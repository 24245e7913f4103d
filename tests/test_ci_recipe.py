"""The CI recipe for users (ci-recipes/, issue 60 item 3): its jobs (GitHub Actions, GitLab CI) run
ci-recipes/fecbench-ci on the user's design and baseline; here the same script runs with fecq in the user's
stack's place: a baseline recorded, an unchanged build "same within margin" (exit 0), a build slowed by fecq's
TEST ONLY `--test-send-delay-us` "worse" (exit 1). The verdict is the compare's, never a wall-clock time."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers.campaign import FECQ, ROOT

RECIPES = ROOT / "ci-recipes"
SCRIPT = RECIPES / "fecbench-ci"
#: The slowed build: a sleep of 5 ms before each datagram either end sends (at 3 ms the smallest change measured
#: here was 1.08, with the FEC label's lower bound 1.081 against the 5 % margin's 1.05).
SLOW_US = "5000"


def _commands(path: Path) -> list[str]:
    """Every shell line a job of the recipe's YAML runs."""
    data = yaml.safe_load(path.read_text())
    lines: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("run", "script") and isinstance(value, str):
                    lines.extend(value.splitlines())
                elif key == "script" and isinstance(value, list):
                    lines.extend(str(v) for v in value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    return lines


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_the_jobs_run_the_recipes_script(name: str) -> None:
    """Both jobs run the script this file tests, on the design and baseline in the user's repository, with a
    margin, and keep its output folder."""
    lines = " ".join(_commands(RECIPES / name))
    assert re.search(r"/root/fecbench/ci-recipes/fecbench-ci --margin \S+ --out fecbench-ci-out "
                     r"\.fecbench/ci\.toml \.fecbench/baseline\.sqlite", lines), lines
    assert "fecbench-ci-out" in (RECIPES / name).read_text().split("fecbench-ci --margin")[-1]   # the artifact


def test_the_readme_shows_the_recipe_first_in_its_ci_section() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## CI\n", 1)[1]
    first = " ".join(section.strip().split("\n\n", 1)[0].split())
    assert "ci-recipes/" in first and "fecbench compare" in first, first


def _user_repository(root: Path, slow: bool) -> Path:
    """A stack's repository as the recipe asks for it: .fecbench/ci.toml (the example design) and the stack's
    descriptor (here fecq's, its binary where this checkout built it; slowed: its argv with the test option)."""
    folder = root / ".fecbench"
    (folder / "impls" / "fecq").mkdir(parents=True, exist_ok=True)
    shutil.copy(RECIPES / "example" / "ci.toml", folder / "ci.toml")
    text = (ROOT / "quic-impls" / "fecq" / "impl.toml").read_text()
    text = re.sub(r'(?m)^binary = .*$', f'binary = "{FECQ}"', text)
    text = re.sub(r'(?m)^build = .*$', "", text)
    if slow:
        server = '"{server_address}:{port}", "{server_args}"]'
        client = '"--out", "{metrics_path}", "{client_args}"]'
        assert server in text and client in text
        text = text.replace(server, server.replace('"{server_args}"', f'"--test-send-delay-us", "{SLOW_US}", '
                                                                     '"{server_args}"'))
        text = text.replace(client, client.replace('"{client_args}"', f'"--test-send-delay-us", "{SLOW_US}", '
                                                                     '"{client_args}"'))
    (folder / "impls" / "fecq" / "impl.toml").write_text(text)
    return root


def _recipe(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], cwd=repo, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.require_root
@pytest.mark.slow
@pytest.mark.recipes
def test_the_recipe_passes_an_unchanged_build_and_catches_a_slowed_one(tmp_path: Path) -> None:
    if not FECQ.exists():
        pytest.skip(f"{FECQ} is not built (make bootstrap)")
    repo = _user_repository(tmp_path / "stack", slow=False)
    design, baseline = ".fecbench/ci.toml", ".fecbench/baseline.sqlite"
    out = _recipe(repo, "--record", design, baseline)
    assert out.returncode == 0 and (repo / baseline).is_file(), out.stdout[-3000:] + out.stderr[-3000:]

    out = _recipe(repo, "--margin", "5%", "--out", "same", design, baseline)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    result = json.loads((repo / "same" / "compare.json").read_text())
    groups = result["metric_comparison"]["groups"]
    assert {g["group"] for g in groups} == {"quic 20 kB", "quic-fec 20 kB"}
    assert {g["verdict"] for g in groups} == {"same within margin"} and "impl fecq" not in result["changed"]
    assert "equivalent: every group the same within 5 %" in (repo / "same" / "compare.txt").read_text()
    assert (repo / "same" / "report" / "versions-change-ecdf.png").is_file()

    _user_repository(repo, slow=True)          # the stack's next commit: a slower build
    out = _recipe(repo, "--margin", "5%", "--out", "slow", design, baseline)
    assert out.returncode == 1, out.stdout[-4000:] + out.stderr[-3000:]
    result = json.loads((repo / "slow" / "compare.json").read_text())
    assert {g["verdict"] for g in result["metric_comparison"]["groups"]} == {"worse"}, out.stdout[-4000:]
    # What changed, said first: the stack's descriptor (its build). fecbench's own commit may differ too: the
    # suite shares its checkout with other commits.
    assert "impl fecq" in result["changed"], result["changed"]
    text = (repo / "slow" / "compare.txt").read_text()
    assert text.startswith("what changed: ") and "impl fecq" in text.splitlines()[0] and "differs: " in text
