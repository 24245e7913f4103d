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
