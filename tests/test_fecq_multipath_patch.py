"""fecq's multipath schedulers are a patch of noq-proto (quic-impls/fecq/noq-proto/): the build takes
the release pinned in noq-proto/Cargo.lock from crates.io, applies noq-proto-<version>-scheduler.patch
with noq-proto/prepare, and cargo's [patch.crates-io] points at the result. These tests fail when the
patch stops applying to the pinned release (e.g. after a version bump), when the pins disagree, or
when the tree the build uses is not release + patch.

The two that run noq-proto/prepare (which fetches the crate with cargo when it is not cached) are
root-only, like the other tests that need the machine's set-up, and skip when this user cannot run
cargo (e.g. an unprivileged user and root's ~/.cargo); any other problem fails them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
FECQ_DIR = ROOT / "quic-impls" / "fecq"
PIN_DIR = FECQ_DIR / "noq-proto"
PREPARE = PIN_DIR / "prepare"
BUILD_TREE = FECQ_DIR / "build" / "noq-proto"

def root_only(test):
    """Root only (the `require_root` marker), with this file's own reason shown: it runs cargo."""
    reason = "runs cargo, the toolchain `make bootstrap` set up for root: run the tests as root"
    return pytest.mark.require_root(pytest.mark.skipif(os.geteuid() != 0, reason=reason)(test))


def cargo_env() -> dict[str, str]:
    """The environment `make` gives cargo: ~/.cargo/bin on PATH (where rustup installs it)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path.home() / '.cargo' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    """Skip (with the reason) when this user cannot run cargo; a broken toolchain is then not our
    failure to report. Anything after that is."""
    env = cargo_env()
    cargo = shutil.which("cargo", path=env["PATH"])
    if cargo is None:
        pytest.skip("cargo is not on this user's PATH (nor in ~/.cargo/bin): cannot build noq-proto")
    try:
        probe = subprocess.run([cargo, "--version"], env=env, capture_output=True, text=True,
                               timeout=60, check=False)
    except OSError as exc:
        pytest.skip(f"this user cannot execute cargo ({cargo}): {exc}")
    if probe.returncode != 0:
        pytest.skip(f"this user cannot run cargo ({cargo}): {probe.stderr.strip()[:200]}")
    return env


def lock_package(lock: Path, name: str) -> dict:
    found = [p for p in tomllib.loads(lock.read_text())["package"] if p["name"] == name]
    assert len(found) == 1, f"{lock}: {len(found)} entries for {name}"
    return found[0]


def pinned() -> dict:
    """The pinned release: version and checksum, as the pin's lock file records them."""
    package = lock_package(PIN_DIR / "Cargo.lock", "noq-proto")
    assert package["source"] == "registry+https://github.com/rust-lang/crates.io-index", package
    return package


def files(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def test_the_pins_agree() -> None:
    """One version everywhere: the pin's lock, its manifest, fecq's dependency, the build's lock and
    the patch's name; and cargo builds fecq with the tree prepare makes."""
    version = pinned()["version"]
    pin = tomllib.loads((PIN_DIR / "Cargo.toml").read_text())
    assert pin["dependencies"]["noq-proto"]["version"] == f"={version}"
    fecq = tomllib.loads((FECQ_DIR / "crates" / "fecq" / "Cargo.toml").read_text())
    assert fecq["dependencies"]["noq-proto"]["version"] == f"={version}"
    built = lock_package(FECQ_DIR / "Cargo.lock", "noq-proto")
    assert built["version"] == version and "source" not in built, built   # the [patch] path
    workspace = tomllib.loads((FECQ_DIR / "Cargo.toml").read_text())
    assert workspace["patch"]["crates-io"]["noq-proto"] == {"path": "build/noq-proto"}
    assert (PIN_DIR / f"noq-proto-{version}-scheduler.patch").is_file()
    # The patch is the only noq code in the tree: no vendored copy.
    assert not (FECQ_DIR / "vendor").exists()


@root_only
def test_the_patch_applies_to_the_pinned_release(env: dict[str, str], tmp_path: Path) -> None:
    version = pinned()["version"]
    out = tmp_path / "noq-proto"
    run = subprocess.run([str(PREPARE), str(out)], env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, f"noq-proto/prepare failed:\n{run.stdout}{run.stderr}"
    assert not list(out.rglob("*.rej"))
    assert 'name = "noq-proto"' in (out / "Cargo.toml").read_text()
    assert "pub enum PathScheduler" in (out / "src" / "config" / "transport.rs").read_text()
    # Idempotent: a second run changes nothing.
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    again = subprocess.run([str(PREPARE), str(out)], env=env, capture_output=True, text=True,
                           timeout=600, check=True)
    assert again.stderr == "" and {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    # The patch is what the README says it is: the scheduler setting and the path order, nothing else.
    patch = (PIN_DIR / f"noq-proto-{version}-scheduler.patch").read_text()
    touched = sorted(re.findall(r"^\+\+\+ b/(\S+)", patch, flags=re.M))
    assert touched == ["src/config/mod.rs", "src/config/transport.rs", "src/connection/mod.rs", "src/lib.rs"]
    # The tree the build uses (when made) is exactly release + patch.
    if BUILD_TREE.is_dir():
        assert files(BUILD_TREE) == files(out), f"{BUILD_TREE} is not noq-proto {version} + the patch"


@root_only
def test_a_patch_that_does_not_apply_fails_the_build(env: dict[str, str], tmp_path: Path) -> None:
    """What guards a version bump: prepare refuses (exit 1, naming the patch) and leaves no tree."""
    version = pinned()["version"]
    pin = tmp_path / "pin"
    shutil.copytree(PIN_DIR, pin)
    patch = pin / f"noq-proto-{version}-scheduler.patch"
    text = patch.read_text()
    removed = re.search(r"^-(?!--)(.+)$", text, flags=re.M)    # a line the release must have
    assert removed is not None
    patch.write_text(text.replace(removed.group(0), f"-{removed.group(1)} // not in the release", 1))
    out = tmp_path / "noq-proto"
    run = subprocess.run([str(pin / "prepare"), str(out)], env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 1, run
    assert f"noq-proto-{version}-scheduler.patch does not apply to noq-proto {version}" in run.stderr
    assert not out.exists()
