"""``fecbench reproduce PACK``, start to end: profiles → campaigns → plan → runs → verdicts → page.

1. Each (profile, design) of the pack becomes a design file and database (``profiles.write``), checked by
   ``fecbench run``'s first step (``pipeline.check_inputs``: every mistake reported before anything runs,
   its implementations' own argument checks included; as a dry run when nothing is to run).
2. With a budget, batch after batch, four steps: evaluate (the verdicts so far, a look: ``evaluate``,
   anytime-valid) → allocate (the next batch for the undecided claims: ``allocate.next_batch``, most
   progress per second, extra seeds beyond the design's) → execute (its runs through ``fecbench run``'s
   steps: ``execute.run_all``; networks idle in a campaign's tail take more of its runs, ``TailFill``) → record
   (each outcome in its campaign as the engine reports it: ``campaign.record``), until
   every claim has stopped or the time is spent. A batch is a sixth of the machine time left (at least
   ``allocate.BATCH_MIN_S``). The time the verdicts and the page need is kept aside (``EVALUATION_S``
   plus a little per claim and profile). ``--full`` runs everything the designs list (``budgeting.select``);
   ``run = False`` runs nothing; ``first_batch``: what ``--dry-run`` shows.
3. A verdict per claim and profile (``evaluate``; each evaluation counted as a look in
   ``looks.json``), and the page (``page.write``).

A subset of the pack's claims (``--claims``: ``Pack.subset``) is a pack of its own here: only the designs its claims
are on are prepared, only its claims take runs and verdicts, and the page's α is split over them alone (and says so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench.runners.executors import Machine
from fecbench.runners.executors.engine import Tail
from fecbench.runners.executors.progress import Reporter
from fecbench.runners.executors.selection import continue_recorded
from fecbench.runners.experiment.runs import Run
from fecbench.verdicts import allocate, budgeting, execute, page, profiles, seeds
from fecbench.verdicts import campaign as cp
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts.pack import Pack
from fecbench.verdicts.statistics.error_control import FAMILY_WISE

#: Seconds kept for the verdicts and the page, plus per claim and profile (a bootstrap and a figure).
EVALUATION_S = 20.0
EVALUATION_PER_CLAIM_S = 2.0
#: A batch whose runs would not even start in this much time is not begun.
MIN_LEFT_S = 5.0


@dataclass
class Reproduction:
    pack: Pack
    profiles: list[str]
    targets: dict[tuple[str, str], profiles.Target]
    selection: budgeting.Selection | None
    ran: list[execute.Ran]
    verdicts: list[ev.Verdict]
    html: Path | None
    seconds: float
    budget: float | None
    planned: dict[str, Any] = field(default_factory=dict)
    idle: dict[str, str] = field(default_factory=dict)     # why claims took no run in the last batch


@dataclass
class ReproductionRuns:
    """What the runs of a reproduction did: each campaign's batches (one row per campaign: one count of runs left
    pending), the last selection, why claims took no run in
    the last batch, and what was planned."""
    ran: list[execute.Ran] = field(default_factory=list)
    selection: budgeting.Selection | None = None
    idle: dict[str, str] = field(default_factory=dict)
    planned: dict[str, Any] = field(default_factory=dict)

    def add_batch(self, selection: budgeting.Selection) -> None:
        """One batch more: its runs and their estimated seconds."""
        self.planned["batches"] += 1
        self.planned["runs"] += sum(len(r) for r in selection.runs.values())
        self.planned["estimated_s"] += sum(selection.seconds.values())


def prepare_campaigns(pack: Pack, names: list[str], root: Path, *, checks: bool = True
                      ) -> tuple[dict[tuple[str, str], profiles.Target], dict[tuple[str, str], cp.Campaign]]:
    """Every (profile, design) of the pack that exists here (a subset's: those its claims are on), written, prepared
    and measured."""
    from fecbench.runners.commands.pipeline import check_inputs

    targets, campaigns = {}, {}
    for name in names:
        profile = pack.profile(name)
        for alias, ref in pack.campaign_designs().items():
            if not ref.present:
                continue
            target = profiles.write(pack, profile, ref, root)
            prepared = check_inputs(target.design, dry_run=not checks)
            continue_recorded(prepared, target.db)   # a database `fecbench run` extended: its runs' own keys
            campaign = cp.Campaign(profile=name, alias=alias, db=target.db, prepared=prepared, statuses={},
                                   label_map=profile.label_map)
            seeds.recorded(campaign)  # extra seeds an earlier budget drew: part of the campaign again
            cp.read(campaign)
            targets[(name, alias)] = target
            campaigns[(name, alias)] = campaign
    cp.share_factors(list(campaigns.values()))
    return targets, campaigns


def reserve_s(pack: Pack, names: list[str]) -> float:
    return EVALUATION_S + EVALUATION_PER_CLAIM_S * len(pack.claims) * len(names)


def batch_seconds(left: float) -> float:
    """Seconds of runs one batch holds when ``left`` seconds of machine time are left: a sixth of them, at least
    ``allocate.BATCH_MIN_S``, never more than the budget can fill."""
    return min(left * budgeting.FILL, max(allocate.BATCH_MIN_S, left / allocate.BATCH_SHARE))


@dataclass
class FirstBatch:
    """What ``--dry-run`` shows: the runs a budget's first batch starts (the next ones depend on the verdicts its
    runs give), or with no budget every run of the designs; why claims take none; ``capacity``: the batch's
    seconds of runs (None: no budget); ``verdicts``: the look before it (what each claim would still take:
    ``allocate.projection``)."""
    campaigns: dict[tuple[str, str], cp.Campaign]
    selection: budgeting.Selection
    idle: dict[str, str]
    capacity: float | None
    verdicts: list[ev.Verdict] = field(default_factory=list)


def first_batch(pack: Pack, names: list[str], budget: float | None, full: bool, root: Path,
                rule: str = FAMILY_WISE) -> FirstBatch:
    """The first batch the budget buys (``reproduce``'s first evaluate → allocate, the verdicts at the page's
    ``rule``), running and recording nothing."""
    targets, campaigns = prepare_campaigns(pack, names, root, checks=False)
    verdicts = ev.evaluate(pack, _dbs(targets), names, _prepared(campaigns), bootstrap=False, rule=rule)
    if budget is None:
        return FirstBatch(campaigns, budgeting.select(pack.claims, campaigns, None, full=full), {}, None, verdicts)
    capacity = batch_seconds(max(0.0, budget - reserve_s(pack, names)))
    selection, idle = allocate.next_batch(pack.claims, campaigns, verdicts, capacity)
    return FirstBatch(campaigns, selection, idle, capacity, verdicts)


def reproduce(pack: Pack, names: list[str], *, budget: float | None, full: bool, machine: Machine,
              root: Path, reporter: Reporter, run: bool = True, started: float | None = None,
              rule: str = FAMILY_WISE) -> Reproduction:
    """The whole command (see the module). ``budget`` in seconds from ``started`` (time.monotonic()),
    None with ``full``; ``machine``: where the runs run (`fecbench run`'s ``Machine``); ``rule``: how the page's
    verdicts share its α."""
    started = time.monotonic() if started is None else started
    targets, campaigns = prepare_campaigns(pack, names, root, checks=run)
    looks = root / pack.name / "looks.json"
    runs = ReproductionRuns()
    if run and budget is None:
        runs = _full(pack, targets, campaigns, full, machine, reporter)
    elif run:
        assert budget is not None
        deadline = started + budget - reserve_s(pack, names)
        runs = _batches(pack, names, targets, campaigns, deadline, machine, reporter, looks, rule)
    verdicts = ev.evaluate(pack, _dbs(targets), names, _prepared(campaigns), rule=rule)
    ev.count_looks(looks, verdicts)
    allocate.explain_undecided(verdicts, campaigns, runs.idle, "budget" if run and budget is not None else
                               "full designs run" if run else "not run (evaluation only)")
    html = page.write(pack, names, verdicts, targets, root / pack.name, ran=runs.ran, budget=budget,
                      full=full, rule=rule)
    return Reproduction(pack=pack, profiles=names, targets=targets, selection=runs.selection, ran=runs.ran,
                        verdicts=verdicts, html=html, seconds=time.monotonic() - started, budget=budget,
                        planned=runs.planned, idle=runs.idle)


def _full(pack: Pack, targets: dict, campaigns: dict, full: bool, machine: Machine,
          reporter: Reporter) -> ReproductionRuns:
    """``--full``: every run the designs list, in one go (no look before the verdicts)."""
    selection = budgeting.select(pack.claims, campaigns, None, full=full)
    planned = {"runs": sum(len(r) for r in selection.runs.values()), "estimated_s": sum(selection.seconds.values())}
    ran = execute.run_all(_items(targets, campaigns, selection), machine=machine, deadline=None, reporter=reporter)
    return ReproductionRuns(ran, selection=selection, planned=planned)


@dataclass
class TailFill:
    """Runs for a campaign's networks left idle while its last runs of a batch finish (``Engine(fill_tail=...)``):
    the next draws of its claims by the last look's verdicts, the draws taken since that look counted against what
    each claim needs (``allocate.next_batch``'s ``taken``), for each idle network until the batch's time is up
    (``until``, time.monotonic(); for the batch's last campaign) or, later, the longest run in flight is expected to
    end: the networks stay busy until the next look. No look in between: evaluating claims would take the CPU the
    runs in flight keep time with."""
    pack: Pack
    runs: ReproductionRuns
    verdicts: list[ev.Verdict] = field(default_factory=list)
    taken: dict[str, int] = field(default_factory=dict)
    until: float = 0.0

    def look(self, verdicts: list[ev.Verdict], selection: budgeting.Selection, seconds: float) -> None:
        """A new look, the batch chosen from it and its wall time."""
        self.verdicts, self.taken = verdicts, dict(selection.claim_draws)
        self.until = time.monotonic() + seconds

    def __call__(self, campaign: cp.Campaign, tail: Tail, last: bool = True) -> list[Run]:
        """``last``: the batch's last campaign (an earlier one fills only its own tail: the next campaign waits)."""
        by_key = {run.key: run for run in campaign.prepared.runs}
        longest = max((campaign.seconds(by_key[key]) - elapsed for key, elapsed in tail.running.items()
                       if key in by_key), default=0.0)
        left = max(self.until - time.monotonic(), longest) if last else longest
        if tail.idle < 1 or left <= 0:
            return []
        campaign.held = tail.held
        try:
            selection, _ = allocate.next_batch(self.pack.claims, {(campaign.profile, campaign.alias): campaign},
                                               self.verdicts, tail.idle * left, taken=self.taken)
        finally:
            campaign.held = set()
        for claim, draws in selection.claim_draws.items():
            self.taken[claim] = self.taken.get(claim, 0) + draws
        more = [run for found in selection.runs.values() for run in found]
        self.runs.planned["runs"] += len(more)
        self.runs.planned["estimated_s"] += sum(selection.seconds.values())
        return more


def _batches(pack: Pack, names: list[str], targets: dict, campaigns: dict, deadline: float, machine: Machine,
             reporter: Reporter, looks: Path, rule: str) -> ReproductionRuns:
    """Batch after batch until every claim stopped or the time is spent: evaluate (a look) → allocate the next
    batch → execute it (networks idle in a campaign's tail take more of its runs: ``TailFill``), each outcome
    recorded in its campaign as it ends."""
    dbs = _dbs(targets)
    runs = ReproductionRuns(planned={"batches": 0, "runs": 0, "estimated_s": 0.0})
    fill = TailFill(pack, runs)
    while True:
        verdicts = _evaluate(pack, names, dbs, campaigns, looks, rule)
        left = deadline - time.monotonic() - len(campaigns) * execute.CAMPAIGN_START_S
        if left < MIN_LEFT_S:
            break
        runs.selection, runs.idle = _allocate(pack, campaigns, verdicts, left, machine)
        if not any(runs.selection.runs.values()):
            break
        if machine.jobs is None:   # --jobs auto, not calibrated yet (with --dask, jobs is 1)
            if not execute.calibrate(_items(targets, campaigns, runs.selection), machine, deadline, reporter):
                break
            cp.share_factors(list(campaigns.values()))
            continue   # the batch planned again for the networks chosen
        runs.add_batch(runs.selection)
        fill.look(verdicts, runs.selection, batch_seconds(left))
        done = execute.run_all(_items(targets, campaigns, runs.selection), machine=machine, deadline=deadline,
                               reporter=reporter, fill=fill)
        runs.ran = execute.merge(runs.ran + done)   # one row per campaign over its batches
        cp.share_factors(list(campaigns.values()))
        if any(r.stopped for r in done) or not any(r.counts for r in done):
            break
    return runs


def _evaluate(pack: Pack, names: list[str], dbs: dict, campaigns: dict, looks: Path, rule: str) -> list[ev.Verdict]:
    """A look: the verdicts so far (anytime-valid, no bootstrap), counted in ``looks.json``."""
    verdicts = ev.evaluate(pack, dbs, names, _prepared(campaigns), bootstrap=False, rule=rule)
    ev.count_looks(looks, verdicts)
    return verdicts


def _allocate(pack: Pack, campaigns: dict, verdicts: list[ev.Verdict], left: float, machine: Machine) -> tuple:
    """The next batch: a sixth of the machine time left (at least ``allocate.BATCH_MIN_S``), within what is left."""
    parallel = execute.parallel(machine)
    return allocate.next_batch(pack.claims, campaigns, verdicts, batch_seconds(left) * parallel,
                               left * budgeting.FILL * parallel)


def _items(targets: dict, campaigns: dict, selection: budgeting.Selection) -> list:
    """Each campaign with its target and the runs chosen for it."""
    return [(targets[key], campaigns[key], selection.runs.get(key, [])) for key in campaigns]


def _dbs(targets: dict) -> dict:
    return {key: target.db for key, target in targets.items()}


def _prepared(campaigns: dict) -> dict:
    """Each campaign's design space (``draws.DrawSpace``), for the claims' draws."""
    return {key: campaign.space for key, campaign in campaigns.items()}
