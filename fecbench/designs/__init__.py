"""The planner: design points from the `[space]` table of a design file (WSP, LHS, Sobol, factorial, list).

    space = parse_space(section, paths=2)   # SpecError on bad input
    plan = make_plan(space, seed=2019)      # plan.points (DataFrame), plan.manifest (dict)
    plan.write("results/x-plan")            # points.csv + manifest.json
"""

from fecbench.designs.plan import Plan, make_plan
from fecbench.designs.space import Factor, Space, parse_space

__all__ = ["Factor", "Plan", "Space", "make_plan", "parse_space"]
