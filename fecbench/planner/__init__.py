"""The planner: design points from the `[space]` table of a design file (WSP, LHS, Sobol, factorial, list).

    space = parse_space(section, paths=2)   # SpecError on bad input
    plan = make_plan(space, seed=2019)      # plan.points (DataFrame), plan.manifest (dict)
    plan.write("results/x-plan")            # points.csv + manifest.json
"""

from __future__ import annotations

import importlib
from typing import Any

# Loaded on first use: numpy/scipy/pandas take half a second to import, and `fecbench --help` (which
# imports this package's CLI) should not pay for them.
_EXPORTS = {"Plan": "plan", "make_plan": "plan", "Factor": "space", "Space": "space", "parse_space": "space"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fecbench.planner' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fecbench.planner.{_EXPORTS[name]}"), name)
