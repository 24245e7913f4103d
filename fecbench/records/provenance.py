"""What a result records about the software that made it: fecbench's version and git commit.

Both the CLI (`--version`) and the campaign engine (each campaign row) use it, so it lives below both.
"""

from __future__ import annotations

import subprocess

from fecbench import __version__
from fecbench.host.paths import REPO_ROOT


def git_sha() -> str:
    """The git commit of this checkout, with '-dirty' when it has local changes; 'unknown' outside git
    (or when git refuses the repository, e.g. one owned by another user)."""
    # safe.directory: a non-root user reading root's checkout (git refuses other owners' repositories).
    git = ["git", "-c", f"safe.directory={REPO_ROOT}", "-C", str(REPO_ROOT)]
    try:
        sha = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def version_text() -> str:
    return f"fecbench {__version__} ({git_sha()})"
