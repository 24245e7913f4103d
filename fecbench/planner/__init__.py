"""The planner: design points from the `[space]` table of a design file (WSP, LHS, Sobol, factorial, list).

    space = parse_space(section, paths=2)   # SpecError on bad input
    plan = make_plan(space, seed=2019)      # plan.points (DataFrame), plan.manifest (dict)
    plan.write("results/x-plan")            # points.csv + manifest.json
"""

from __future__ import annotations

from typing import Any

# Loaded on first use: numpy/scipy/pandas take half a second to import, and `fecbench --help` (which
# imports this package's CLI) should not pay for them. Plain imports inside the function, so every check
# of the imports sees them.
__all__ = ["Factor", "Plan", "Space", "make_plan", "parse_space"]


def __getattr__(name: str) -> Any:
    if name in ("Plan", "make_plan"):
        from fecbench.planner import plan

        return getattr(plan, name)
    if name in ("Factor", "Space", "parse_space"):
        from fecbench.planner import space

        return getattr(space, name)
    raise AttributeError(f"module 'fecbench.planner' has no attribute {name!r}")
