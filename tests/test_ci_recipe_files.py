"""The CI recipe's files themselves (ci-recipes/, issue 68 item 4): both job files pass their format's schema (the
linter, check-jsonschema with the GitHub-workflow and GitLab-CI schemas it ships, offline) and a broken copy does
not; they pin fecbench by a full commit fetched by its SHA, cache the image per commit, give the container the
privileges a campaign needs and self-test them first. The self-test (ci-recipes/selftest) runs for real: it
passes on this machine, and with a capability taken out of its bounding set, or /proc/sys read-only as Docker
mounts it, it names what is missing and the flag that gives it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fecbench.runners.experiment.argv_template import render
from fecbench.runners.experiment.descriptor import load_descriptor
from fecbench.runners.experiment.design import parse_design
from tests.helpers.campaign import ROOT

RECIPES = ROOT / "ci-recipes"
SELFTEST = RECIPES / "selftest"
SCHEMAS = {"github-actions.yml": "vendor.github-workflows", "gitlab-ci.yml": "vendor.gitlab-ci"}
PRIVILEGES = ("--cap-drop ALL --cap-add NET_ADMIN,SYS_ADMIN,NET_RAW,SYS_CHROOT "
              "--security-opt systempaths=unconfined --security-opt apparmor=unconfined")


#: One mistake a hand edit makes in each file, and what the linter says about it.
BROKEN = {
    "github-actions.yml": [
        ("    runs-on: ubuntu-24.04", "    runs_on: ubuntu-24.04", "'runs-on' is a required property"),
        ("    timeout-minutes: 60", "    timeout-minutes: sixty", "'sixty' is not of type 'number'")],
    "gitlab-ci.yml": [("  script:\n    - /root", "  scripts:\n    - /root", "'scripts' was unexpected"),
                      ("    when: always", "    when: sometimes", "'sometimes'")],
}


@pytest.fixture(scope="module", params=sorted(SCHEMAS))
def linted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, list]:
    """One run of the linter (about a second) on the recipe file and on a broken copy per mistake in BROKEN: the
    recipe's name, each file's error messages (best matches included), the copies' expected words."""
    name = request.param
    tool = Path(sys.executable).parent / "check-jsonschema"
    assert tool.exists(), f"{tool}: not installed (make venv installs the dev extra's check-jsonschema)"
    text = (RECIPES / name).read_text()
    folder = tmp_path_factory.mktemp("lint")
    copies = []
    for i, (old, new, said) in enumerate(BROKEN[name]):
        assert old in text
        broken = folder / f"broken{i}-{name}"
        broken.write_text(text.replace(old, new, 1))
        yaml.safe_load(broken.read_text())       # still YAML: the schema, not the parser, catches it
        copies.append((str(broken), said))
    out = subprocess.run([str(tool), "-o", "json", "--builtin-schema", SCHEMAS[name], str(RECIPES / name),
                          *(c for c, _ in copies)], capture_output=True, text=True, timeout=60, check=False)
    report = json.loads(out.stdout)
    assert not report["parse_errors"], report
    messages: dict[str, list[str]] = {}
    for error in report["errors"]:
        said = [error["message"], *((error.get(k) or {}).get("message", "") for k in ("best_match", "best_deep_match"))]
        messages.setdefault(error["filename"], []).extend(said)
    return name, messages, copies


def test_the_job_files_pass_their_formats_linter(linted: tuple[str, dict, list]) -> None:
    name, messages, _ = linted
    assert str(RECIPES / name) not in messages, messages.get(str(RECIPES / name))


def test_the_linter_fails_a_broken_copy_naming_the_mistake(linted: tuple[str, dict, list]) -> None:
    """The same run on copies with one mistake each: each fails, named (so the test above can fail)."""
    _, messages, copies = linted
    for copy, said in copies:
        assert any(said in m for m in messages.get(copy, [])), (copy, messages.get(copy))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_jobs_pin_fecbench_by_commit_and_cache_its_image(name: str) -> None:
    data = yaml.safe_load((RECIPES / name).read_text())
    variables = data["env"] if name.startswith("github") else data["variables"]
    assert re.fullmatch(r"[0-9a-f]{40}", variables["FECBENCH_SHA"]), variables
    text = (RECIPES / name).read_text()
    assert "--branch" not in text and "FECBENCH_REF" not in text
    assert 'fetch -q --depth 1 "$FECBENCH_REPO" "$FECBENCH_SHA"' in text and "checkout -q --detach FETCH_HEAD" in text
    assert "{40}" in text                        # a SHA that is not a full one is refused before anything runs
    if name.startswith("github"):
        cache = next(s for s in data["jobs"]["fecbench"]["steps"] if s.get("uses", "").startswith("actions/cache"))
        assert cache["with"]["key"] == "fecbench-image-${{ env.FECBENCH_SHA }}"
    else:
        assert variables["FECBENCH_IMAGE"].endswith(":$FECBENCH_SHA") and "docker push" in text


def _job_lines(job: dict) -> list[str]:
    return job["script"] if "script" in job else [s.get("run", s.get("uses", "")) for s in job["steps"]]


@pytest.mark.parametrize("name, job", [("github-actions.yml", "fecbench"), ("gitlab-ci.yml", "fecbench"),
                                       ("gitlab-ci.yml", ".fecbench-shell")])
def test_each_job_self_tests_the_privileges_before_the_campaign(name: str, job: str) -> None:
    data = yaml.safe_load((RECIPES / name).read_text())
    spec = data["jobs"][job] if name.startswith("github") else data[job]
    lines = _job_lines(spec)
    selftest = next(i for i, line in enumerate(lines) if "fecbench-ci selftest" in line)
    campaign = next(i for i, line in enumerate(lines) if "fecbench-ci --margin" in line)
    assert selftest < campaign
    if "docker run" in lines[campaign]:          # the job starts the container itself: exactly these flags
        flags = (data.get("env") or spec["variables"])["FECBENCH_DOCKER"]
        assert flags == PRIVILEGES and '"${flags[@]}"' in lines[selftest] and '"${flags[@]}"' in lines[campaign]


def test_the_gitlab_recipe_asks_no_runner_for_what_the_docker_api_refuses() -> None:
    """`systempaths=unconfined` is the docker CLI's own (it becomes empty masked/read-only path lists); a runner's
    security_opt goes to the API, whose daemon refuses it: the recipe asks for a privileged or a shell runner."""
    text = (RECIPES / "gitlab-ci.yml").read_text()
    assert "security_opt = [" not in text and "privileged = true" in text and "shell-executor" in text


def test_the_readmes_own_stack_is_a_valid_descriptor_and_design(tmp_path: Path) -> None:
    """ci-recipes/README.md, "Your own stack, end to end": its descriptor, written where it says
    (.fecbench/impls/mystack/impl.toml), loads; its doubled braces reach mystack's argv as single ones; the design
    of step 2 (example/ci.toml naming mystack) finds it through impl_dirs and validates its FEC argument."""
    readme = (RECIPES / "README.md").read_text()
    block = re.search(r"```toml\n(# \.fecbench/impls/mystack/impl\.toml .*?)```", readme, re.S)
    assert block, "the README's descriptor block"
    folder = tmp_path / ".fecbench" / "impls" / "mystack"
    folder.mkdir(parents=True)
    (folder / "impl.toml").write_text(block.group(1))
    d = load_descriptor(folder / "impl.toml")
    argv = render(d.server_argv, {"binary": "/b", "server_address": "10.0.0.2", "port": 4433, "run_dir": "/r",
                                  "www_dir": "/w"}, d.arg_lists({"fec": "rs:10,3"}))
    assert argv[argv.index("--stats-format") + 1] == "lost={lost} recovered={recovered}" and argv[-2:] == [
        "--fec", "rs:10,3"]
    assert d.missing_binaries() is not None           # not built yet: the build step makes them
    (tmp_path / "build").mkdir()
    for name in ("mystack-server", "mystack-client"):     # what ./build.sh leaves in the repository's build/
        (tmp_path / "build" / name).write_text("#!/bin/sh\n")
        (tmp_path / "build" / name).chmod(0o755)
    assert {k: p.resolve() for k, p in d.binaries().items() if p} == {
        "binary": (tmp_path / "build" / "mystack-server").resolve(),
        "client_binary": (tmp_path / "build" / "mystack-client").resolve()}
    example = (RECIPES / "example" / "ci.toml").read_text()
    assert example.count('name = "fecq"') == 2 and example.count('args = { fec = "rlc:4,3,12" }') == 1
    design = example.replace('name = "fecq"', 'name = "mystack"').replace('"rlc:4,3,12"', '"rs:10,3"')
    (tmp_path / ".fecbench" / "ci.toml").write_text(design)
    parsed = parse_design(tmp_path / ".fecbench" / "ci.toml")
    assert [(e.name, e.label) for e in parsed.impls] == [("mystack", "quic"), ("mystack", "quic-fec")]


def _selftest(*prefix: str) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, str(SELFTEST)], capture_output=True, text=True, timeout=60, check=False)


def _netns() -> set[str]:
    return {line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                                        check=False).stdout.splitlines() if line.startswith("fbst")}


@pytest.mark.require_root
def test_the_self_test_passes_here_and_leaves_nothing() -> None:
    before = _netns()
    out = subprocess.run([str(RECIPES / "fecbench-ci"), "selftest"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("\n  ok  ") == 10 and "MISSING" not in out.stdout, out.stdout
    assert out.stdout.rstrip().endswith("everything a campaign needs works here")
    assert _netns() == before


@pytest.mark.require_root
@pytest.mark.parametrize("cap, probe", [
    ("net_admin", "veth pair"),
    ("sys_admin", "network namespace (ip netns add)"),
    ("net_raw", "AF_PACKET socket"),
    ("sys_chroot", "setns into a mount namespace"),
])
def test_the_self_test_names_a_missing_capability_and_its_flag(cap: str, probe: str) -> None:
    """The capability left out of the bounding set (as `--cap-drop` leaves it out of a container's): the probe
    that needs it fails, and the last line names it with `--cap-add`."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    before = _netns()
    out = _selftest("setpriv", f"--bounding-set=-{cap}", "--")
    name = cap.upper()
    assert out.returncode == 1, out.stdout + out.stderr
    assert re.search(rf"MISSING  {re.escape(probe)}.*\n +-> CAP_{name}: docker run --cap-add {name}\n", out.stdout), \
        out.stdout
    assert out.stdout.splitlines()[-2] == f"fecbench selftest: missing: CAP_{name} (--cap-add {name})", out.stdout
    assert _netns() == before


@pytest.mark.require_root
def test_the_self_test_names_a_read_only_proc_sys() -> None:
    """/proc/sys bound read-only over itself, as Docker mounts it without systempaths=unconfined."""
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                          'mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec "$0"',
                          str(SELFTEST)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "MISSING  writable /proc/sys: sysctl: permission denied" in out.stdout, out.stdout
    assert out.stdout.splitlines()[-2] == ("fecbench selftest: missing: writable /proc/sys "
                                           "(--security-opt systempaths=unconfined)"), out.stdout


def test_the_self_test_refuses_arguments() -> None:
    out = subprocess.run([str(SELFTEST), "--cap", "x"], capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 2 and out.stderr.strip() == "usage: fecbench-ci selftest"
