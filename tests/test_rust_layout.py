"""The 15-module rule of fecbench/ (tests/test_architecture.py) applied to fecq's Rust sources: no folder of
quic-impls/fecq/crates/*/src holds more than 15 .rs files; a crate groups its modules into folders by
concept (fecq: app/, options/, link/, layer/, quinn_stack/, noq_stack/)."""

from __future__ import annotations

from pathlib import Path

from fecbench.host.paths import REPO_ROOT

CRATES = REPO_ROOT / "quic-impls" / "fecq" / "crates"
MAX_RS_FILES = 15


def crowded_folders(crates: Path, limit: int = MAX_RS_FILES) -> dict[str, int]:
    """Folders under any crate's src/ holding more than `limit` .rs files (its own files, not its subfolders')."""
    folders = [d for src in crates.glob("*/src") for d in [src, *src.rglob("*")] if d.is_dir()]
    return {str(d.relative_to(crates)): n for d in folders if (n := len(list(d.glob("*.rs")))) > limit}


def test_no_rust_source_folder_holds_more_than_15_files() -> None:
    assert {"fecq", "fec-core"} <= {p.parent.name for p in CRATES.glob("*/src")}, "the check sees no crate"
    crowded = crowded_folders(CRATES)
    assert not crowded, f"Rust source folders over {MAX_RS_FILES} .rs files (group them by concept): {crowded}"


def test_the_check_counts_each_folder_alone(tmp_path: Path) -> None:
    src = tmp_path / "demo" / "src"
    (src / "group").mkdir(parents=True)
    for i in range(3):
        (src / f"m{i}.rs").write_text("")
        (src / "group" / f"n{i}.rs").write_text("")
    (src / "notes.md").write_text("")
    assert crowded_folders(tmp_path, 3) == {}
    (src / "m3.rs").write_text("")
    assert crowded_folders(tmp_path, 3) == {"demo/src": 4}
