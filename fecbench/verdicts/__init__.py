"""Reproduction packs: re-run a seed paper's experiments and say, claim by claim, whether they hold.

Above the campaigns and the analysis (it runs the one and reads with the other), from the data up:

- ``pack``: a pack's files (designs, stack profiles, claims) loaded and checked;
- ``profiles``: a design under a profile, as an ordinary design file and database;
- ``budgeting``: measured durations, each claim's most informative runs, what a budget buys;
- ``statistics``: the claim statistics, one object each (estimate, bootstrap and anytime-valid intervals,
  what it needs from the plan, its words), registered once (pure);
- ``execute``: the chosen runs, campaign by campaign, within the deadline;
- ``evaluate``: every claim's verdict per profile, from the databases;
- ``page``: the HTML page (verdict table, a figure per claim) and verdicts.json/csv;
- ``session``: the command from start to end; ``cli``: ``fecbench reproduce``.
"""
