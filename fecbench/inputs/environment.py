"""Numbers users set through environment variables (bounds, shares, waits): read once the same way, and a value
that is not what the variable takes is the user's error, never silently replaced by the default."""

from __future__ import annotations

import os

from fecbench.inputs.errors import UserError


def env_number(name: str, default: float, *, high: float, expected: str, zero_ok: bool = False) -> float:
    """The number in the environment variable `name` (above 0, or from 0 with `zero_ok`, and below `high`), else
    `default` when it is unset or blank; anything else: UserError naming the variable, what it takes and an example."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not ((0 <= number if zero_ok else 0 < number) and number < high):
        raise UserError(f"{name}={value!r}: expected {expected}, e.g. {name}={default:g}")
    return number
