"""The noq-proto that fecq builds with (quic-impls/fecq/vendor/noq-proto, through cargo [patch]) is
exactly the crates.io source of the version pinned in Cargo.lock with
vendor/noq-proto-<version>-scheduler.patch applied. Fails when the patch stops applying (e.g. after a
version bump) or when someone edits the vendored tree without regenerating the patch."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FECQ_DIR = ROOT / "quic-impls" / "fecq"
VENDOR = FECQ_DIR / "vendor" / "noq-proto"
# Parts of the published crate not carried in the repository (noq-proto's own tests and lock file).
NOT_CARRIED = {"src/tests", "Cargo.lock", "proptest-regressions", ".cargo_vcs_info.json"}


def pinned_version() -> str:
    lock = (FECQ_DIR / "Cargo.lock").read_text()
    versions = re.findall(r'\[\[package\]\]\nname = "noq-proto"\nversion = "([^"]+)"', lock)
    assert len(versions) == 1, versions
    return versions[0]


def pristine_crate(version: str, tmp: Path) -> Path:
    """The published .crate of noq-proto `version`: from cargo's cache, else fetched by cargo itself
    (a throwaway manifest that depends on that exact version; fecq's own build never downloads it,
    the [patch] replaces it)."""
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob(f"registry/cache/*/noq-proto-{version}.crate"))
    if not found:
        probe = tmp / "probe"
        (probe / "src").mkdir(parents=True)
        (probe / "src" / "lib.rs").write_text("")
        (probe / "Cargo.toml").write_text(textwrap.dedent(f"""
            [package]
            name = "probe"
            version = "0.0.0"
            edition = "2021"
            [dependencies]
            noq-proto = {{ version = "={version}", default-features = false }}
            """))
        subprocess.run(["cargo", "fetch", "--manifest-path", str(probe / "Cargo.toml")], check=True,
                       capture_output=True)
        found = sorted(home.glob(f"registry/cache/*/noq-proto-{version}.crate"))
    assert found, f"noq-proto {version} is not in cargo's cache and could not be fetched"
    return found[0]


def files(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def test_vendored_noq_proto_is_the_pinned_release_plus_the_patch(tmp_path: Path) -> None:
    version = pinned_version()
    patch = FECQ_DIR / "vendor" / f"noq-proto-{version}-scheduler.patch"
    assert patch.exists(), f"no patch for the pinned noq-proto {version}: {patch}"
    assert 'noq-proto = { path = "vendor/noq-proto" }' in (FECQ_DIR / "Cargo.toml").read_text()
    with tarfile.open(pristine_crate(version, tmp_path)) as crate:
        members = crate.getmembers()
        assert all(m.name.startswith(f"noq-proto-{version}/") and ".." not in m.name
                   and (m.isfile() or m.isdir()) for m in members)
        crate.extractall(tmp_path, members=members)
    tree = tmp_path / f"noq-proto-{version}"
    for part in NOT_CARRIED:
        target = tree / part
        if target.is_dir():
            subprocess.run(["rm", "-rf", str(target)], check=True)
        elif target.exists():
            target.unlink()
    applied = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch",
                              "-i", str(patch)], cwd=tree, capture_output=True, text=True, check=False)
    assert applied.returncode == 0, f"the patch no longer applies:\n{applied.stdout}{applied.stderr}"
    assert not list(tree.rglob("*.rej"))
    expected, vendored = files(tree), files(VENDOR)
    assert sorted(vendored) == sorted(expected), set(vendored) ^ set(expected)
    changed = [name for name in expected if expected[name] != vendored[name]]
    assert changed == [], f"vendor/noq-proto differs from release + patch in {changed}"
    # The patch is what the README says it is: the scheduler setting and the path order, nothing else.
    touched = sorted(re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), flags=re.M))
    assert touched == ["src/config/mod.rs", "src/config/transport.rs", "src/connection/mod.rs", "src/lib.rs"]
