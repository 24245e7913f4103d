"""User-facing errors: every one is printed as a single clear message and exits with status 2."""

from __future__ import annotations

import os
from typing import Any


class UserError(Exception):
    """Bad input or an unmet requirement the user can fix. The CLI prints it and exits 2."""


class SpecError(UserError):
    """A problem in a spec file (topology, design, implementation descriptor), naming file and key."""

    def __init__(self, file: str | os.PathLike | None, key: str | None, problem: str,
                 allowed: Any = None, line: int | None = None) -> None:
        if line is None and key and file and str(file).endswith(".toml"):
            from fecbench.inputs.spec_lines import locate

            line = locate(file, key)   # file:line in the message, as a user's editor wants it
        self.file, self.key, self.problem, self.allowed, self.line = file, key, problem, allowed, line
        place = f"{file}:{line}" if file and line else file
        where = ": ".join(str(part) for part in (place, key) if part)
        text = f"{where}: {problem}" if where else problem
        if allowed is not None:
            if isinstance(allowed, (list, tuple, set, frozenset)):
                allowed = ", ".join(str(a) for a in sorted(allowed, key=str))
            text += f" (allowed: {allowed})"
        super().__init__(text)


def did_you_mean(name: str, candidates: object) -> str:
    """'; did you mean 'owd'?' for the nearest of `candidates` to a mistyped name ('' when none is near)."""
    import difflib

    names = [str(c) for c in candidates] if isinstance(candidates, (list, tuple, set, frozenset, dict)) else []
    close = difflib.get_close_matches(str(name), names, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def require_root(what: str) -> None:
    """Raise a UserError unless running as root."""
    if os.geteuid() != 0:
        raise UserError(f"{what} needs root (network namespaces, BPF, Mininet): run it as root, e.g. with sudo")
