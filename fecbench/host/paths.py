"""Where the checkout's parts are: the one place that computes project paths.

fecbench runs from a checkout (`make bootstrap` builds the native parts in place), so every path
here is relative to the repository root, the folder above the `fecbench` package.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]   # fecbench/host/paths.py
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


def _check_place(path: Path, option: str, want_dir: bool) -> Path:
    """A file or folder fecbench will create or write: refused (UserError, exit 2) under /proc, /sys or /dev,
    where something of the other kind (or a special file) is, or where it cannot be made or written."""
    import os

    from fecbench.inputs.errors import UserError

    path = Path(path)
    resolved = path.resolve()
    if resolved.parts[1:2] and resolved.parts[1] in ("proc", "sys", "dev"):
        raise UserError(f"{option} {path}: under /{resolved.parts[1]}, a kernel file system: choose a place "
                        "under your results folder")
    if resolved.exists():
        if want_dir and not resolved.is_dir():
            raise UserError(f"{option} {path}: a file, not a folder; give a folder (it is made if missing)")
        if not want_dir and not resolved.is_file():
            kind = "a folder" if resolved.is_dir() else "not a regular file"
            raise UserError(f"{option} {path}: {kind}; give a file path (e.g. results/NAME.sqlite)")
    folder = resolved if want_dir else resolved.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"{option} {path}: {folder} is a file, so no folder can be made there")
    target = resolved if resolved.exists() else folder
    if not os.access(target, os.W_OK | (os.X_OK if target.is_dir() else 0)):
        raise UserError(f"{option} {path}: {target} is not writable")
    return path


def check_output_file(path: Path, option: str) -> Path:
    """A file fecbench will create or write (a database, an export): checked before anything is written."""
    return _check_place(path, option, want_dir=False)


def check_output_dir(path: Path, option: str) -> Path:
    """A folder fecbench will fill (a report, a plan, a reproduction's results): checked before anything."""
    return _check_place(path, option, want_dir=True)


def user_cache_file(env: str, name: str) -> Path:
    """A file of this machine's fecbench cache: the environment variable `env` if set, else
    $XDG_CACHE_HOME/fecbench/`name` (~/.cache by default)."""
    if os.environ.get(env):
        return Path(os.environ[env])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fecbench" / name
