"""``fecbench reproduce PACK``, start to end: profiles → campaigns → plan → runs → verdicts → page.

1. Each (profile, design) of the pack becomes a design file and database (``profiles.write``), is
   prepared (every mistake reported before anything runs) and its implementations' own argument
   checks are run.
2. The plan (``plan.select``) chooses the runs the budget buys, from measured durations; the time the
   verdicts and the page need is kept aside (``EVALUATION_S`` plus a little per claim and profile).
3. The runs (``execute.run_all``), unless ``run = False`` (evaluate what the databases hold).
4. A verdict per claim and profile (``evaluate``), and the page (``page.write``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench.reproduce import evaluate as ev
from fecbench.reproduce import execute, page, plan, profiles
from fecbench.reproduce.pack import Pack
from fecbench.runners.prepare import prepare
from fecbench.runners.recorder import read_statuses

#: Seconds kept for the verdicts and the page, plus per claim and profile (a bootstrap and a figure).
EVALUATION_S = 20.0
EVALUATION_PER_CLAIM_S = 2.0


@dataclass
class Outcome:
    pack: Pack
    profiles: list[str]
    targets: dict[tuple[str, str], profiles.Target]
    selection: plan.Selection | None
    ran: list[execute.Ran]
    verdicts: list[ev.Verdict]
    html: Path | None
    seconds: float
    budget: float | None
    planned: dict[str, Any] = field(default_factory=dict)


def prepare_campaigns(pack: Pack, names: list[str], root: Path, *, checks: bool = True
                      ) -> tuple[dict[tuple[str, str], profiles.Target], dict[tuple[str, str], plan.Campaign]]:
    """Every (profile, design) of the pack that exists here, written, prepared and measured."""
    from fecbench.runners.checks import check_impl_args, check_timeouts

    targets, campaigns = {}, {}
    for name in names:
        profile = pack.profile(name)
        for alias, ref in pack.designs.items():
            if not ref.present:
                continue
            target = profiles.write(pack, profile, ref, root)
            prepared = prepare(target.design)
            if checks:
                check_timeouts(prepared, accept=False, warn=lambda *_: None)
                check_impl_args(prepared)
            campaign = plan.Campaign(profile=name, alias=alias, db=target.db, prepared=prepared,
                                     statuses=read_statuses(target.db))
            plan.measured_durations(campaign, [target.db, plan.usual_db(prepared)])
            targets[(name, alias)] = target
            campaigns[(name, alias)] = campaign
    plan.share_factors(list(campaigns.values()))
    return targets, campaigns


def reserve_s(pack: Pack, names: list[str]) -> float:
    return EVALUATION_S + EVALUATION_PER_CLAIM_S * len(pack.claims) * len(names)


def reproduce(pack: Pack, names: list[str], *, budget: float | None, full: bool, jobs: int | None,
              root: Path, console: Any, run: bool = True, link_backend: str | None = None,
              started: float | None = None) -> Outcome:
    """The whole command (see the module). ``budget`` in seconds from ``started`` (time.monotonic()),
    None with ``full``; ``jobs`` None means auto."""
    started = time.monotonic() if started is None else started
    targets, campaigns = prepare_campaigns(pack, names, root, checks=run)
    selection = None
    ran: list[execute.Ran] = []
    planned: dict[str, Any] = {}
    if run:
        deadline = None if budget is None else started + budget - reserve_s(pack, names)
        capacity = None
        if deadline is not None:
            with_runs = len(campaigns)
            left = deadline - time.monotonic() - with_runs * execute.CAMPAIGN_START_S
            parallel = 1 if jobs is None or jobs == 1 else jobs * 0.8
            capacity = max(0.0, left * plan.FILL * parallel)
        selection = plan.select(pack.claims, campaigns, capacity, full=full)
        planned = {"capacity_s": capacity, "estimated_s": sum(selection.seconds.values()),
                   "runs": sum(len(r) for r in selection.runs.values())}
        items = [(targets[key], campaigns[key], selection.runs.get(key, [])) for key in campaigns]
        ran = execute.run_all(items, jobs=jobs, link_backend=link_backend, deadline=deadline, console=console)
    dbs = {key: target.db for key, target in targets.items()}
    verdicts = ev.evaluate(pack, dbs, names)
    html = page.write(pack, names, verdicts, targets, root / pack.name, ran=ran, budget=budget, full=full)
    return Outcome(pack=pack, profiles=names, targets=targets, selection=selection, ran=ran, verdicts=verdicts,
                   html=html, seconds=time.monotonic() - started, budget=budget, planned=planned)
