"""fecq's build shared between checkouts (quic-impls/fecq/build-cache, issue 53): a checkout without target/ starts
from the cache's copy of a build from the same inputs, modification times kept (cargo compares them with its
outputs); a checkout with target/ is never touched; other inputs are another key; BUILD_CACHE=off does nothing.
Run on a copy of the script in a scratch tree shaped like quic-impls/fecq (no cargo build here)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fecbench.host.paths import REPO_ROOT

# The cache's key includes `rustc -vV` and `cargo -V`: without a toolchain the script does nothing (by design).
pytestmark = pytest.mark.skipif(shutil.which("rustc") is None or shutil.which("cargo") is None,
                                reason="no Rust toolchain on PATH (rustup, as for make fecq): build-cache keys on it")

SCRIPT = REPO_ROOT / "quic-impls" / "fecq" / "build-cache"
OLD = 946_684_800   # 2000-01-01: the sources' time, older than the outputs'


def _tree(root: Path) -> Path:
    fecq = root / "fecq"
    (fecq / "noq-proto").mkdir(parents=True)
    shutil.copy(SCRIPT, fecq / "build-cache")
    (fecq / "Cargo.lock").write_text("lock 1\n")
    (fecq / "noq-proto" / "Cargo.lock").write_text("noq lock\n")
    (fecq / "noq-proto" / "noq-proto-1.0-scheduler.patch").write_text("patch 1\n")
    return fecq


def _built(fecq: Path) -> None:
    (fecq / "target" / "release").mkdir(parents=True)
    (fecq / "target" / "release" / "fecq").write_text("binary\n")
    source = fecq / "build" / "noq-proto" / "src.rs"
    source.parent.mkdir(parents=True)
    source.write_text("fn main() {}\n")
    os.utime(source, (OLD, OLD))


def _run(fecq: Path, cache: Path | str, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([str(fecq / "build-cache"), *args], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "BUILD_CACHE": str(cache)})
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_a_fresh_checkout_starts_from_the_kept_build_with_its_times(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _tree(tmp_path / "first")
    _built(first)
    assert "kept" in _run(first, cache, "save", "build").stdout
    (entry,) = cache.glob("fecq-*")
    assert "kept" not in _run(first, cache, "save", "build").stdout       # once per key and level
    assert "kept" in _run(first, cache, "save", "test").stdout            # the test targets: once more

    fresh = _tree(tmp_path / "fresh")
    assert "started from" in _run(fresh, cache, "restore").stdout
    assert (fresh / "target" / "release" / "fecq").read_text() == "binary\n"
    assert (fresh / "build" / "noq-proto" / "src.rs").stat().st_mtime == OLD   # cargo sees its outputs as newer
    assert not list(fresh.glob("*.part")) and not list((fresh / "build").glob("*.part"))

    # A checkout with a build of its own is never touched.
    (fresh / "target" / "release" / "fecq").write_text("mine\n")
    _run(fresh, cache, "restore")
    assert (fresh / "target" / "release" / "fecq").read_text() == "mine\n"
    assert entry.exists()


def test_other_inputs_are_another_key_and_off_is_off(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _tree(tmp_path / "first")
    _built(first)
    _run(first, cache, "save", "build")
    (old,) = cache.glob("fecq-*")

    changed = _tree(tmp_path / "changed")
    (changed / "noq-proto" / "noq-proto-1.0-scheduler.patch").write_text("patch 2\n")
    assert "started from" not in _run(changed, cache, "restore").stdout
    assert not (changed / "target").exists()
    _built(changed)
    _run(changed, cache, "save", "build")
    (new,) = cache.glob("fecq-*")                  # one entry: the older key's build is removed
    assert new != old

    off = _tree(tmp_path / "off")
    _run(off, "off", "restore")
    assert not (off / "target").exists()
    _built(off)
    _run(off, "off", "save", "build")
    assert list(cache.glob("fecq-*")) == [new]
