"""Where the checkout's parts are: the one place that computes project paths.

fecbench runs from a checkout (`make bootstrap` builds the native parts in place), so every path
here is relative to the repository root, the folder above this package.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES_DIR = REPO_ROOT / "topologies"
DESIGNS_DIR = REPO_ROOT / "designs"
IMPLS_DIR = REPO_ROOT / "quic-impls"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
DROPPER_DIR = REPO_ROOT / "dropper"
DELAYLINE_DIR = REPO_ROOT / "delayline"
RESULTS_DIR = REPO_ROOT / "results"


def slug(text: str) -> str:
    """A file-name-safe form of a label (figure and file names)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "label"


def check_output_file(path: Path, option: str) -> Path:
    """A file fecbench will create or write (a database, a report): refused (UserError, exit 2) when it is a
    folder or a special file, lies under /proc, /sys or /dev, or its folder cannot be made or written.
    Creates nothing."""
    from fecbench.errors import UserError

    path = Path(path)
    resolved = path.resolve()
    if resolved.parts[1:2] and resolved.parts[1] in ("proc", "sys", "dev"):
        raise UserError(f"{option} {path}: under /{resolved.parts[1]}, a kernel file system: choose a file "
                        "under your results folder")
    if resolved.exists() and not resolved.is_file():
        kind = "a folder" if resolved.is_dir() else "not a regular file"
        raise UserError(f"{option} {path}: {kind}; give a file path (e.g. results/NAME.sqlite)")
    folder = resolved.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    import os

    if not folder.is_dir():
        raise UserError(f"{option} {path}: {folder} is a file, so no folder can be made there")
    if not os.access(folder, os.W_OK | os.X_OK) or (resolved.exists() and not os.access(resolved, os.W_OK)):
        raise UserError(f"{option} {path}: {folder if not resolved.exists() else resolved} is not writable")
    return path
