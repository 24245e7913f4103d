"""Which runs a time budget buys, claim by claim (``--full`` and the budget's first plan; a reproduction with a
budget allocates batch by batch: ``allocate``).

What a claim needs, in order: its own draws (``draws``: uniformly random cells of the claim on fresh seeds,
in a seeded order), each draw the runs of the claim's label and baseline at its units (every profile, so
that profiles are compared on the same seeds). The budget goes to the claims in turn, always to the one
that has used the least time so far (a run two claims share is paid once), so every claim gets its share
early and a claim whose next draw no longer fits stops there. A claim's first draws come as one block, as
many as its statistic needs for an interval (``first_block``): a claim the budget cannot give that much
gets nothing, and its time goes to the others; one whose first block costs more than an equal share of the
budget waits until the other claims are done. ``--full`` takes every draw within the designs' repetitions,
then every other run of the designs.
"""

from __future__ import annotations

from dataclasses import dataclass

from fecbench.inputs.errors import UserError
from fecbench.runners.experiment.runs import Run
from fecbench.verdicts.campaign import Campaign
from fecbench.verdicts.draws import Draw
from fecbench.verdicts.pack import Claim
from fecbench.verdicts.seeds import extension_run

#: Share of the time left for runs that the plan fills: what estimates miss is absorbed by the rest.
FILL = 0.9


def first_block(claim: Claim) -> int:
    """Draws a claim needs before its statistic can have an interval (``ClaimStatistic.first_block``)."""
    return claim.stat.first_block(claim.params)


def draw_runs(claim: Claim, campaign: Campaign, draw: Draw) -> list[Run]:
    """The campaign's runs of one draw (the design's own, or extra seeds beyond its repetitions)."""
    found = {}
    for point, rep, size, label in draw.runs():
        run = extension_run(campaign, point, rep, size, campaign.label_map.get(label, label))
        if run is not None:
            found.setdefault(run.key, run)
    return list(found.values())


@dataclass
class Selection:
    """Runs chosen per campaign (in order), estimated seconds per campaign, per claim (and its draws)."""
    runs: dict[tuple[str, str], list[Run]]
    seconds: dict[tuple[str, str], float]
    claim_seconds: dict[str, float]
    claim_draws: dict[str, int]


def select(claims: list[Claim], campaigns: dict[tuple[str, str], Campaign], capacity: float | None,
           *, full: bool = False) -> Selection:
    """The runs ``capacity`` seconds of runs buy (None: no limit), claim by claim in turn, each claim's draws
    within its design's repetitions in their order."""
    profiles = sorted({profile for profile, _ in campaigns})
    plans: dict[str, list[Draw]] = {}
    for c in claims:
        campaign = campaigns.get((profiles[0], c.design)) if profiles else None
        if campaign is not None:
            reps = campaign.prepared.design.repetitions
            plans[c.id] = [d for d in campaign.draws(c) if all(rep < reps for _, rep, _, _ in d.runs())]
    chosen: dict[tuple[str, str], dict[str, Run]] = {key: {} for key in campaigns}
    spent = dict.fromkeys(plans, 0.0)
    cursor = dict.fromkeys(plans, 0)
    active = {cid for cid, found in plans.items() if found}
    share = None if capacity is None or not active else capacity / len(active)
    deferred: list[str] = []
    total = 0.0
    by_id = {c.id: c for c in claims}
    while active or deferred:
        if not active:  # every other claim is done: the costly ones may have what is left
            active, deferred, share = set(deferred), [], None
        cid = min(sorted(active), key=lambda i: spent[i])
        if cursor[cid] >= len(plans[cid]):
            active.discard(cid)
            continue
        claim = by_id[cid]
        # A claim's first draws come as one block: fewer than its statistic needs say nothing.
        block = min(len(plans[cid]), max(1, first_block(claim))) if cursor[cid] == 0 else cursor[cid] + 1
        new: list[tuple[tuple[str, str], Run]] = []
        for draw in plans[cid][cursor[cid]:block]:
            for profile in profiles:
                key = (profile, claim.design)
                campaign = campaigns.get(key)
                if campaign is None:
                    continue
                new += [(key, run) for run in draw_runs(claim, campaign, draw)
                        if campaign.todo(run) and run.key not in chosen[key] and (key, run) not in new]
        cost = sum(campaigns[key].seconds(run) for key, run in new)
        if share is not None and cursor[cid] == 0 and cost > share:
            active.discard(cid)  # its first block alone is more than its share: after the others
            deferred.append(cid)
            continue
        if capacity is not None and total + cost > capacity:
            active.discard(cid)  # its next draw does not fit: the claim stops here
            continue
        cursor[cid] = block
        for key, run in new:
            chosen[key][run.key] = run
        total += cost
        spent[cid] += cost
    if full:
        for key, campaign in campaigns.items():
            for run in campaign.prepared.runs:
                if campaign.todo(run) and run.key not in chosen[key]:
                    chosen[key][run.key] = run
    runs = {key: list(found.values()) for key, found in chosen.items()}
    seconds = {key: sum(campaigns[key].seconds(r) for r in found) for key, found in runs.items()}
    return Selection(runs=runs, seconds=seconds, claim_seconds=spent, claim_draws=dict(cursor))


def parse_budget(text: str) -> float:
    """'30m', '90s', '1h', '1h30m', '45' (minutes) → seconds; a UserError otherwise."""
    import re

    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value) * 60
    parts = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", value)
    if not value or parts is None or not any(parts.groups()):
        raise UserError(f"--budget {text!r}: expected a duration such as 30m, 90s, 2h or 1h30m")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in parts.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise UserError(f"--budget {text!r}: must be more than nothing")
    return total
