"""Adaptive allocation: the next batch of runs goes to the undecided claims, most progress per second first.

A claim decided in every profile (holds, fails, at the threshold; not runnable; no sequential test)
takes no more runs; its runs still count for claims whose draws share them. For each undecided claim, the
observations it may still need (``sequential.runs_to_decide``: its interval's half-width against the
widest one the verdict rule decides, shrinking as 1/√n) are draws (``draws``: one observation each), and
each draw costs the measured duration model's seconds of its runs (``Campaign.seconds``, every profile,
both labels). The batch is filled greedily: always the next draw of the claim with the most expected
progress per second, 1 / (draws still needed × seconds per draw); the most promising draw goes in even when
it alone is more than a batch, if the time left allows it. A claim never needs fewer observations than the
fewest that could decide it (``fewest_observations``: every one agreeing), and one with nothing measured yet
needs that many (at least its first block, ``budgeting.first_block``), so it competes like the others: a cheap
start goes early, a costly one waits behind claims a few runs from their verdicts. Within a claim, its
draws in their order (``draws``: beyond the design's repetitions they take the extra seeds of ``seeds``),
so no budget is left unused while a claim is undecided; a run that was flagged is run once more
before its draw counts (``Campaign.todo``). A census (``statistics.points``) skips the cells its own intervals
have settled. While some claim is undecided, a share of each batch (``AUDIT_SHARE``) goes on drawing for the
decided ones, least audited first: their audit (``evaluate.audit``), which re-opens a verdict the later data
contradict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fecbench.runners.experiment.runs import Run
from fecbench.verdicts import seeds
from fecbench.verdicts import sequential as sq
from fecbench.verdicts.budgeting import Selection, draw_runs, first_block
from fecbench.verdicts.campaign import Campaign
from fecbench.verdicts.draws import Draw
from fecbench.verdicts.evaluate import Verdict
from fecbench.verdicts.pack import Claim

#: The smallest batch of machine time, and the share of what is left a batch takes.
BATCH_MIN_S = 120.0
BATCH_SHARE = 6.0
#: A claim whose value sits on a decision boundary has no finite need: it is treated as needing this many
#: times its observations (at least ``MIN_UNKNOWN`` draws), last in line but never left without runs.
UNKNOWN_FACTOR = 10.0
MIN_UNKNOWN = 50.0
#: The share of a batch that goes on drawing for claims already decided (their audit: ``evaluate.audit``), while
#: some claim is still undecided.
AUDIT_SHARE = 0.1
#: Verdicts whose claims take audit draws.
AUDITED = ("holds", "fails", "at the threshold")


def observations_to_decide(claim: Claim, v: Verdict) -> tuple[float, bool]:
    """Observations a claim may still need in one profile, and whether that is only a lower bound: as its
    interval narrows (``sq.runs_to_decide``), but never fewer than the fewest that could decide it
    (``fewest_observations``, the lower bound: every observation agreeing; a median at networking2019's
    per-claim level has no bound before 12 blocks); inf when it cannot say (on a boundary; nothing
    measured and no sequence)."""
    s = v.sequence
    fewest = claim.stat.fewest_observations(claim.params, claim.compare, claim.threshold, claim.tolerance, v.alpha)
    if s is None or s.n == 0:
        return fewest, True
    more = sq.runs_to_decide(s.value, s.low, s.high, s.n, claim.compare, claim.threshold, claim.tolerance)
    if math.isinf(more) or math.isinf(fewest) or more >= fewest - s.n:
        return more, False
    return fewest - s.n, True


def need_draws(claim: Claim, verdicts: list[Verdict]) -> float:
    """Draws the claim may still need: the most any of its undecided profiles needs."""
    need = 0.0
    for v in verdicts:
        if v.decided:
            continue
        more, _ = observations_to_decide(claim, v)
        if v.sequence is None or v.sequence.n == 0:
            first = float(first_block(claim))
            need = max(need, first if math.isinf(more) else max(first, more))
            continue
        if math.isinf(more):
            more = max(MIN_UNKNOWN, UNKNOWN_FACTOR * v.sequence.n)
        need = max(need, more)
    return need


@dataclass
class ClaimState:
    claim: Claim
    draws: list[Draw]
    profiles: list[str]       # the profiles in which it is still undecided (the others take no runs)
    need: float
    cursor: int = 0
    first_need: float = 0.0

    def took_one(self) -> None:
        """One draw more: one less needed; once the estimate is met, as many again (the estimate was short)."""
        self.need -= 1
        if self.need < 1:
            self.need = self.first_need = max(1.0, 2 * self.first_need)


def next_batch(claims: list[Claim], campaigns: dict[tuple[str, str], Campaign], verdicts: list[Verdict],
               capacity: float, ceiling: float | None = None, taken: dict[str, int] | None = None
               ) -> tuple[Selection, dict[str, str]]:
    """The runs of the next batch (about ``capacity`` estimated seconds), and why each claim took none
    ("decided", "at threshold", "not runnable", "no sequential test", "no units left", "runs under way").
    ``taken``: draws each claim took since ``verdicts`` were evaluated (idle networks filled before the next look):
    they count against what it needs, and a claim they cover takes none.

    The most promising claim's next unit always goes in if it fits ``ceiling`` (the machine time left;
    default ``capacity``), even when it alone is more than ``capacity``: a claim whose unit costs more than
    a batch (networking2019's fig9 competing transfers: 2.2 min a unit, batches 2 min near the end of a 2 h
    budget) was otherwise left without runs while four units from its verdict."""
    ceiling = capacity if ceiling is None else ceiling
    profiles = sorted({profile for profile, _ in campaigns})
    by_claim: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by_claim.setdefault(v.claim.id, []).append(v)
    idle: dict[str, str] = {}
    states: dict[str, ClaimState] = {}
    audited: dict[str, ClaimState] = {}
    for claim in claims:
        mine = by_claim.get(claim.id, [])
        campaign = campaigns.get((profiles[0], claim.design)) if profiles else None
        if mine and all(v.decided for v in mine):
            idle[claim.id] = mine[0].stopped if len({v.stopped for v in mine}) == 1 else "decided"
            audit = [v.profile for v in mine if v.verdict in AUDITED]
            if campaign is not None and audit:
                audited[claim.id] = ClaimState(claim, campaign.draws(claim), audit, 1.0, first_need=1.0)
            continue
        if campaign is None:
            idle[claim.id] = "not runnable"
            continue
        undecided = [p for p in profiles if not any(v.profile == p and v.decided for v in mine)]
        under_way = (taken or {}).get(claim.id, 0)
        need = need_draws(claim, mine) - under_way
        if under_way and need < 1:
            idle[claim.id] = "runs under way"
            continue
        states[claim.id] = ClaimState(claim, _needed(campaign.draws(claim), mine, undecided), undecided, need,
                                      first_need=need)
    chosen: dict[tuple[str, str], dict[str, Run]] = {key: {} for key in campaigns}
    spent = dict.fromkeys(list(states) + list(audited), 0.0)
    taken = dict.fromkeys(list(states) + list(audited), 0)
    share = AUDIT_SHARE if audited and states else 0.0
    total = _fill(states, campaigns, chosen, capacity * (1 - share), ceiling * (1 - share), spent, taken, idle)
    if total > 0 and audited:   # the decided claims' audit: least audited first, within its share
        _fill(audited, campaigns, chosen, total * share / (1 - share), total * share / (1 - share), spent, taken,
              {}, key=lambda state, cost: -spent[state.claim.id])
    for key, found in chosen.items():
        seeds.adopt(campaigns[key], [run for run in found.values() if run.index < 0])
    runs_by = {key: list(found.values()) for key, found in chosen.items()}
    seconds = {key: sum(campaigns[key].seconds(r) for r in found) for key, found in runs_by.items()}
    return Selection(runs=runs_by, seconds=seconds, claim_seconds=spent, claim_draws=taken), idle


def _needed(draws: list[Draw], verdicts: list[Verdict], profiles: list[str]) -> list[Draw]:
    """A claim's draws still worth running: a census's cells settled in every undecided profile take no more."""
    mine = [v for v in verdicts if v.profile in profiles]
    if not mine or not all(v.settled for v in mine):
        return draws
    done = frozenset.intersection(*(v.settled for v in mine))
    return [draw for draw in draws if draw.group not in done]


def _fill(states: dict[str, ClaimState], campaigns: dict[tuple[str, str], Campaign],
          chosen: dict[tuple[str, str], dict[str, Run]], capacity: float, ceiling: float, spent: dict[str, float],
          taken: dict[str, int], idle: dict[str, str], key=None) -> float:
    """Greedy filling of one batch (see ``next_batch``): the seconds chosen."""
    key = key or _progress
    states = dict(states)
    total = 0.0
    while states:
        costs = {cid: _next(state, campaigns, chosen) for cid, state in states.items()}
        for cid in [cid for cid, (runs, _) in costs.items() if runs is None]:
            idle.setdefault(cid, "no units left")
            del states[cid]
        if not states:
            break
        cid = max(sorted(states), key=lambda i: key(states[i], costs[i][1]))
        runs, cost = costs[cid]
        assert runs is not None
        state = states[cid]
        if total + cost > (capacity if total else ceiling):
            del states[cid]  # its next unit does not fit this batch
            continue
        state.cursor += 1
        state.took_one()
        for campaign_key, run in runs:
            chosen[campaign_key][run.key] = run
        total += cost
        spent[cid] += cost
        taken[cid] += 1
    return total


def _progress(state: ClaimState, cost: float) -> float:
    """The expected progress toward a verdict per second of the claim's next unit."""
    return 1.0 / (max(state.need, 1.0) * max(cost, 1e-3))


def _next(state: ClaimState, campaigns: dict[tuple[str, str], Campaign],
          chosen: dict[tuple[str, str], dict[str, Run]]) -> tuple[list | None, float]:
    """The runs of the claim's next draw still to do (skipping draws already done), and their cost; None when
    the claim has no draw left. A draw whose runs are all done (or chosen) costs nothing."""
    while state.cursor < len(state.draws):
        new: list[tuple[tuple[str, str], Run]] = []
        for profile in state.profiles:
            key = (profile, state.claim.design)
            campaign = campaigns.get(key)
            if campaign is None:
                continue
            new += [(key, run) for run in draw_runs(state.claim, campaign, state.draws[state.cursor])
                    if campaign.todo(run) and run.key not in chosen[key]]
        if new:
            return new, sum(campaigns[key].seconds(run) for key, run in new)
        state.cursor += 1  # done already (an earlier batch, or a claim sharing it)
    return None, 0.0


def projection(claim: Claim, verdicts: list[Verdict], campaigns: dict[tuple[str, str], Campaign]
               ) -> tuple[float, float, bool] | None:
    """What an undecided claim would still take: (draws, seconds of machine time at the measured durations and
    flag rate, whether that is only a lower bound), from its interval's rate of narrowing, or, with nothing
    measured yet, the fewest observations that could decide it; None when it cannot say (on a boundary), or when
    no verdict of ``verdicts`` is undecided. Machine time: one network at a time; its profiles' runs of a draw
    added up. The one definition of the number: an undecided verdict's note (``explain_undecided``) and
    ``--dry-run``'s per-claim table (``fecbench.cli.reproduce``) both show it."""
    mine = [v for v in verdicts if v.claim.id == claim.id and not v.decided]
    if not mine:
        return None
    draws, at_least = 0.0, False
    for v in mine:
        more, bound = observations_to_decide(claim, v)
        if math.isinf(more):
            return None
        at_least = at_least or bound
        draws = max(draws, more)
    cost = 0.0
    for v in mine:
        campaign = campaigns.get((v.profile, claim.design))
        if campaign is None:
            return None
        sample = campaign.draws(claim)[:50]
        runs = [run for draw in sample for run in draw_runs(claim, campaign, draw)]
        if not runs:
            return None
        cost += sum(campaign.seconds(r) for r in runs) / len(sample) * campaign.rerun_factor()
    return draws, draws * cost, at_least


def explain_undecided(verdicts: list[Verdict], campaigns: dict[tuple[str, str], Campaign], idle: dict[str, str],
                      why: str) -> None:
    """Each undecided claim's verdict says why it stopped (``why``: the budget ended first, or the designs were
    run whole, or nothing was run; or the last batch found no units left to run) and, in its note, what a
    verdict would still take: from its interval's narrowing, or at least the fewest observations that could
    decide it while it has fewer (``projection``)."""
    for v in verdicts:
        if v.stopped == "budget":
            v.stopped = "no units left" if idle.get(v.claim.id) == "no units left" else why
        if v.decided:
            continue
        need = projection(v.claim, [v], campaigns)
        if need is None:
            s, c = v.sequence, v.claim
            if s is not None and math.isfinite(s.value) \
                    and sq.decisive_half_width(s.value, c.compare, c.threshold, c.tolerance) == 0:
                v.reason = "; ".join(filter(None, [v.reason, "no projection of what a verdict would take: its "
                                                   "value sits on a verdict's boundary"]))
        else:
            draws, seconds, at_least = need
            about = "at least (every observation agreeing)" if at_least else "about"
            v.reason = "; ".join(filter(None, [v.reason, f"a verdict would take {about} {draws:.0f} more draw(s), "
                                               f"{_hours(seconds)} of machine time at the measured durations and "
                                               f"re-run rate ({_on_hosts(seconds)})"]))


def _on_hosts(seconds: float) -> str:
    """Machine time as wall time on hosts like this one, one run at a time each (`--dask`: designs/README.md,
    "Many hosts"); the coordinator's own cost per run (tens of milliseconds) left out."""
    return "; ".join(f"with {h} host{'s' if h > 1 else ''} like this one: {_hours(seconds / h)}" for h in (2, 10))


def _hours(seconds: float) -> str:
    """Machine time in words that never round a need to nothing."""
    if seconds < 60:
        return "under a minute"
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"
