"""Replays of a pack's verdict procedure on recorded runs: allocators compared, A/A false verdicts, power.

A *world* answers a run with a recorded one: a run (point, repetition r, size, label) of a campaign
gets the recorded run of the same point, size and label at a recorded repetition. ``resample = False``
keeps r's own recording while there is one (the same recorded runs for every allocator) and draws
beyond; ``resample = True`` draws every (point, r) anew (with replacement among the point's recorded
repetitions; both labels of a unit from the same repetition: the common random numbers stay). For an
A/A pack (two labels, identical stacks) ``swap`` exchanges the two labels' recordings of a unit at
random, which makes the world exactly symmetric: every ratio a ÷ b is 1 in distribution, whatever
the recordings, so the truth of each claim is known. ``effect`` multiplies one label's metric (a true
effect of that size, for power). A design point with no recording at all (a budgeted run reaches a
few of a large design's points) is answered by the recorded point nearest to it in the design's
factors, each scaled by its recorded range, as the design point (its number and factor values): without
it, a claim whose units went there got runs that cost nothing and told nothing, took every batch and
never progressed (networking2019's Fig. 8 claims: 12 of 130 points recorded). A run takes its
recording's ``duration_s`` of machine time; each campaign in a batch costs ``execute.CAMPAIGN_START_S``
more.

Allocators: ``new`` is ``fecbench reproduce``'s (look, ``allocate.next_batch``, run the batch, again);
``old`` is the earlier one (``budgeting.select`` on the whole budget, claims in turn by least time used,
the design's repetitions only), looked at on the same schedule. Both are judged by the same
anytime-valid verdicts (``evaluate``), so the difference is the allocation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fecbench.analysis import results
from fecbench.analysis.studies import flows
from fecbench.analysis.traces import data_loss
from fecbench.runners.experiment.runs import Run
from fecbench.verdicts import allocate, budgeting, execute, seeds
from fecbench.verdicts import campaign as cp
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts.pack import Pack
from fecbench.verdicts.statistics import error_control as ec

DECIDED = ("holds", "fails", ev.AT_THRESHOLD)


@dataclass
class RecordedWorld:
    """Recorded runs of one campaign (see the module)."""
    frame: pd.DataFrame
    rng: np.random.Generator
    resample: bool = False
    swap: tuple[str, str] | None = None
    effect: dict[str, float] = field(default_factory=dict)
    metrics: tuple[str, ...] = ("dct_ms",)
    db: Path | None = None    # where it was recorded: its verdict logs (loss classes) and per-flow table

    def __post_init__(self) -> None:
        kept = self.frame[self.frame["status"].isin(["ok", "timeout", "failed"])]
        self.rows = {(int(r.point), int(r.repetition), None if pd.isna(r.size) else int(r.size), str(r.label)): i
                     for i, r in zip(kept.index, kept.itertuples(), strict=True)}
        self.records = kept.to_dict("index")     # each row as answered (a replay asks thousands)
        reps: dict[int, set[int]] = {}
        for point, rep, _, _ in self.rows:
            reps.setdefault(point, set()).add(rep)
        self.reps = {p: sorted(r) for p, r in reps.items()}
        self.drawn: dict[tuple[int, int], tuple[int, bool]] = {}
        self.stand_ins: dict[int, int | None] = {}     # design point → the recorded point answering for it

    @functools.cached_property
    def classes(self) -> pd.DataFrame:
        """The recorded runs' loss classes by data (by ``run_key``, as a live campaign's: ``data_loss``), read once
        from the recording's verdict logs and qlogs."""
        return data_loss.wide(data_loss.classify_data(self.db)) if self.db else pd.DataFrame(columns=["run_key"])

    @functools.cached_property
    def flows(self) -> pd.DataFrame:
        """The recording's per-flow table (competing flows), read once."""
        return flows.flows(self.db) if self.db else pd.DataFrame(columns=["run_key"])

    @functools.cached_property
    def recorded_points(self) -> pd.DataFrame:
        """One row per recorded point (its factor values among the columns)."""
        return self.frame.drop_duplicates("point").set_index("point")

    def stand_in(self, point: int, values: dict) -> int | None:
        """The recorded point answering for a design point: itself if recorded, else the nearest in the
        factors (None without factors to compare)."""
        if point in self.reps:
            return point
        if point not in self.stand_ins:
            recorded = self.recorded_points.loc[sorted(self.reps)]
            names = [name for name in values if name in recorded.columns]
            pick = None
            if names:
                coords = recorded[names].to_numpy(float)
                span = np.ptp(coords, axis=0)
                distance = (((coords - np.array([float(values[n]) for n in names])) / np.where(span > 0, span, 1))
                            ** 2).sum(axis=1)
                pick = int(recorded.index[int(np.argmin(distance))])
            self.stand_ins[point] = pick
        return self.stand_ins[point]

    def _draw(self, point: int, recorded: int, rep: int) -> tuple[int, bool]:
        if (point, rep) not in self.drawn:
            own = rep in self.reps[recorded] and not self.resample and recorded == point
            pick = rep if own else int(self.rng.choice(self.reps[recorded]))
            self.drawn[(point, rep)] = (pick, bool(self.swap) and bool(self.rng.random() < 0.5))
        return self.drawn[(point, rep)]

    def answer(self, run: Run, order: int, again: bool = False) -> dict | None:
        """The recorded row standing for ``run`` (None when no recorded point can stand for its point); ``again``:
        a second run of a flagged one (a recording answers it as it did the first)."""
        values = getattr(run, "values", None) or {}
        recorded = self.stand_in(run.point, values)
        if recorded is None:
            return None
        rep, swapped = self._draw(run.point, recorded, run.repetition)
        label = run.label
        if swapped and self.swap and label in self.swap:
            label = self.swap[1] if label == self.swap[0] else self.swap[0]
        index = self.rows.get((recorded, rep, run.size, label))
        if index is None:
            return None
        row = dict(self.records[index])
        row.update(key=run.key, recorded_key=row["key"], label=run.label, repetition=run.repetition,
                   started_at=f"{order:012d}", point=run.point)
        row.update({name: value for name, value in values.items() if name in row})   # a stand-in: the design's
        for metric in self.metrics:
            if metric in row and run.label in self.effect and row[metric] is not None:
                row[metric] = row[metric] * self.effect[run.label]
        return row


@dataclass
class Look:
    machine_s: float
    verdicts: list[ev.Verdict]


def fresh(campaign: cp.Campaign) -> cp.Campaign:
    """A campaign with nothing done (its own copy of the runs: extra seeds are adopted into it)."""
    out = cp.Campaign(campaign.profile, campaign.alias, campaign.db,
                      dataclasses.replace(campaign.prepared, runs=list(campaign.prepared.runs)), {})
    out.factors, out.factor, out.measured = dict(campaign.factors), campaign.factor, campaign.measured
    out.label_map = dict(campaign.label_map)
    return out


def simulate(pack: Pack, profile: str, campaigns: dict[tuple[str, str], cp.Campaign],
             worlds: dict[str, RecordedWorld], budget_s: float, allocator: str = "new",
             look_every_s: float | None = None, rule: str = ec.FAMILY_WISE) -> list[Look]:
    """Machine time and verdicts at each look until the budget is spent (or no claim takes runs); ``rule``: how the
    page's verdicts share its α (``error_control``)."""
    campaigns = {key: fresh(c) for key, c in campaigns.items()}
    frames: dict[str, list[dict]] = {alias: [] for alias in worlds}
    alpha = ev.page_alpha(pack, [profile])
    spent, order, looks = 0.0, 0, []
    queue: list[tuple[tuple[str, str], Run]] = []
    if allocator == "old":
        chosen = budgeting.select(pack.claims, campaigns, budget_s)
        for key in campaigns:
            queue += [(key, run) for run in chosen.runs.get(key, [])]
    while True:
        verdicts = _judge(pack, profile, campaigns, worlds, frames, alpha, rule)
        looks.append(Look(spent, verdicts))
        left = budget_s - spent - len(campaigns) * execute.CAMPAIGN_START_S
        if left <= 0:
            break
        capacity = look_every_s or min(left, max(allocate.BATCH_MIN_S, left / allocate.BATCH_SHARE))
        if allocator == "new":
            selection, _ = allocate.next_batch(pack.claims, campaigns, verdicts, capacity, left)
            batch = [(key, run) for key, runs in selection.runs.items() for run in runs]
        else:
            batch, total = [], 0.0
            while queue and total + campaigns[queue[0][0]].seconds(queue[0][1]) <= capacity:
                total += campaigns[queue[0][0]].seconds(queue[0][1])
                batch.append(queue.pop(0))
            if not batch and queue:
                batch.append(queue.pop(0))
        if not batch:
            break
        spent += execute.CAMPAIGN_START_S * len({key for key, _ in batch})
        for key, run in batch:
            order += 1
            campaign = campaigns[key]
            again = campaign.statuses.get(run.key) in cp.RUN_AGAIN   # a flagged run, run once more
            row = worlds[key[1]].answer(run, order, again) if key[1] in worlds else None
            if again:
                campaign.retried.add(run.key)
            campaign.statuses[run.key] = "ok" if row is None else str(row["status"])
            if row is not None:
                frames[key[1]].append({**row, "retried": again})
                spent += float(row.get("duration_s") or 0.0)
            if spent >= budget_s:
                break
        if spent >= budget_s:
            looks.append(Look(spent, _judge(pack, profile, campaigns, worlds, frames, alpha, rule)))
            break
    return looks


def _judge(pack: Pack, profile: str, campaigns: dict, worlds: dict[str, RecordedWorld], frames: dict[str, list[dict]],
           alpha: float, rule: str) -> list[ev.Verdict]:
    out = []
    data = {}
    for alias, rows in frames.items():
        frame = pd.DataFrame(rows) if rows else worlds[alias].frame.iloc[0:0]
        frame.attrs.update(worlds[alias].frame.attrs)
        data[alias] = ev.Data.replayed(frame, worlds[alias])   # loss classes and flows: those of the runs drawn
    if rule == ec.FALSE_DISCOVERY:   # as ``evaluate``: the Benjamini–Yekutieli level of the claims' p-values
        alpha = ev.discovery_alpha([(pack.profiles[profile].judged(c) if profile in pack.profiles else c,
                                     data[c.design], campaigns[(profile, c.design)].space)
                                    for c in pack.claims if not c.needs and c.design in data], pack.judgeable)
    for claim in pack.claims:
        if claim.needs or claim.design not in data:
            out.append(ev.Verdict(claim, profile, ev.NOT_RUNNABLE, None, claim.needs or "no recorded runs"))
            continue
        space = campaigns[(profile, claim.design)].space
        judged = pack.profiles[profile].judged(claim) if profile in pack.profiles else claim
        verdict = ev.evaluate_claim(judged, profile, data[claim.design], space, 0, alpha=alpha, bootstrap=False)
        verdict.claim = claim
        out.append(verdict)
    return out


def load_world(db: Path, rng: np.random.Generator, **kw) -> RecordedWorld:
    frame = results.load(db)
    if frame.empty:
        raise ValueError(f"{db}: no runs recorded")
    return RecordedWorld(frame, rng, db=db, **kw)


def decided_at(looks: list[Look], times: list[float]) -> list[int]:
    """Claims decided (holds, fails, at the threshold) by each machine time."""
    out = []
    for t in times:
        seen = [look for look in looks if look.machine_s <= t]
        last = seen[-1].verdicts if seen else []
        out.append(sum(1 for v in last if v.verdict in DECIDED))
    return out


def false_verdicts(verdicts: list[ev.Verdict]) -> list[str]:
    """Claims of an A/A pack whose verdict contradicts the truth by construction: a claim on the truth's
    own threshold (``<``, ``>``) holds or fails; an ``approx`` claim around the truth fails."""
    wrong = []
    for v in verdicts:
        on_threshold = v.claim.compare in ("<", ">")
        if (on_threshold and v.verdict in ("holds", "fails")) or (not on_threshold and v.verdict == "fails"):
            wrong.append(v.claim.id)
    return wrong


def wilson(k: int, n: int) -> tuple[float, float]:
    """A 95 % interval for a rate of k in n (scipy's Wilson score interval)."""
    from scipy.stats import binomtest

    if n == 0:
        return math.nan, math.nan
    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def seeds_used(campaigns: dict[tuple[str, str], cp.Campaign]) -> int:
    return sum(seeds.extra_count(c) for c in campaigns.values())
