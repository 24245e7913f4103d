"""Which runs a time budget buys, most informative first, and how long they take.

Durations. A run's duration is the model of ``runners.experiment.runs.estimate_seconds`` (through
``Prepared.estimate``) times a factor measured on runs already done: in the campaign's own database
and in the design's usual one (``results/<design name>.sqlite``), the median of measured ÷ estimated
per label and size (3 runs or more), else per design, else the median factor of the pack's other
campaigns that have measurements, else 1 (the model was fitted on this machine).

What a claim needs, in order. Each claim lists *units*: one (point, repetition, size) run by the
claim's label and baseline (every profile, so that profiles are compared on the same seeds). Its
design points are ordered to cover its factors early (farthest-point order over the factors that
vary, from the point nearest the centre), then:

- a statistic over points (a ratio of medians per point) first gives each point ``min_seeds`` seeds
  (fewer say nothing about a point), point after point, then one more seed to every point in turn;
- a statistic over pairs or runs takes one seed of every point (and size) in turn, then the next.

The budget goes to the claims in turn, always to the one that has used the least time so far
(a run two claims share is paid once), so every claim gets its share early and a claim whose next
unit no longer fits stops there. A claim's first units come as one block, as many as its statistic
needs for an interval (``first_block``): a claim the budget cannot give that much gets nothing, and
its time goes to the others; one whose first block costs more than an equal share of the budget
waits until the other claims are done. ``--full`` takes every unit, then every other run of the designs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import numpy as np

from fecbench import run_records
from fecbench.db import open_readonly
from fecbench.errors import UserError
from fecbench.paths import RESULTS_DIR
from fecbench.reproduce.pack import Claim
from fecbench.reproduce.statistics import FLOWS
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.status import Status

#: Runs needed to trust a measured duration factor.
MIN_MEASURED = 3
#: Share of the time left for runs that the plan fills: what estimates miss is absorbed by the rest.
FILL = 0.9

UnitKey = tuple[int, int, "int | None"]          # point, repetition, size


@dataclass
class Campaign:
    """A design under one profile, prepared, with what its database already holds."""
    profile: str
    alias: str
    db: Path
    prepared: Prepared
    statuses: dict[str, str]
    factors: dict[tuple[str, int | None], float] = field(default_factory=dict)
    factor: float = 1.0
    measured: int = 0                 # runs the factors come from

    def __post_init__(self) -> None:
        self.by_unit = {(r.point, r.repetition, r.size, r.label): r for r in self.prepared.runs}

    def seconds(self, run: Run) -> float:
        return self.prepared.estimate(run) * self.factors.get((run.label, run.size), self.factor)

    def todo(self, run: Run) -> bool:
        return self.statuses.get(run.key, Status.PENDING) in (Status.PENDING, Status.INTERRUPTED)


def measured_durations(campaign: Campaign, dbs: list[Path]) -> None:
    """Set the campaign's duration factors from the ok runs of ``dbs`` (same design points)."""
    ratios: dict[tuple[str, int | None], list[float]] = defaultdict(list)
    for db in dbs:
        try:
            con = open_readonly(db)
        except UserError:  # absent, or not a results database: no measurements from it
            continue
        try:
            rows = run_records.ok_durations(con)
        finally:
            con.close()
        for point, rep, size, label, seconds in rows:
            run = campaign.by_unit.get((point, rep, size, label))
            estimate = campaign.prepared.estimate(run) if run is not None else 0.0
            if estimate > 0:
                ratios[(label, size)].append(float(seconds) / estimate)
    every = [r for values in ratios.values() for r in values]
    campaign.measured = len(every)
    campaign.factor = median(every) if len(every) >= MIN_MEASURED else 1.0
    campaign.factors = {k: median(v) for k, v in ratios.items() if len(v) >= MIN_MEASURED}


def share_factors(campaigns: list[Campaign]) -> None:
    """A campaign with no measured runs of its own takes the median factor of those that have some (the
    same machine, its load and the same implementations): better than the bare model."""
    measured = [c.factor for c in campaigns if c.measured >= MIN_MEASURED]
    for campaign in campaigns:
        if campaign.measured < MIN_MEASURED and measured:
            campaign.factor = median(measured)


def usual_db(prepared: Prepared) -> Path:
    """Where ``fecbench run designs/X.toml`` keeps the design's results (its name without the profile)."""
    return RESULTS_DIR / f"{prepared.design.name.rsplit('.', 1)[0]}.sqlite"


def matches(value: float, wanted: object) -> bool:
    if isinstance(wanted, dict):
        return wanted["min"] - 1e-12 <= value <= wanted["max"] + 1e-12
    return any(math.isclose(value, w, rel_tol=1e-9, abs_tol=1e-12) for w in wanted)  # type: ignore[union-attr]


def claim_points(claim: Claim, prepared: Prepared) -> list[int]:
    """The design points a claim's filters keep."""
    factors = {k: v for k, v in claim.where.items() if k not in ("size", "loss_class", "baseline_class")}
    return [p for p, values in sorted(prepared.points.items())
            if all(k in values and matches(float(values[k]), v) for k, v in factors.items())]


def spread_order(points: list[int], prepared: Prepared) -> list[int]:
    """Farthest-point order over the factors that vary among ``points`` (scaled to [0, 1])."""
    if len(points) <= 2:
        return list(points)
    names = [n for n in prepared.points[points[0]]
             if isinstance(prepared.points[points[0]][n], (int, float))
             and len({prepared.points[p][n] for p in points}) > 1]
    if not names:
        return list(points)
    x = np.array([[float(prepared.points[p][n]) for n in names] for p in points])
    x = (x - x.min(axis=0)) / np.where(np.ptp(x, axis=0) > 0, np.ptp(x, axis=0), 1.0)
    order = [int(np.argmin(((x - 0.5) ** 2).sum(axis=1)))]
    nearest = ((x - x[order[0]]) ** 2).sum(axis=1)
    while len(order) < len(points):
        nxt = int(np.argmax(np.where(np.isin(np.arange(len(points)), order), -1.0, nearest)))
        order.append(nxt)
        nearest = np.minimum(nearest, ((x - x[nxt]) ** 2).sum(axis=1))
    return [points[i] for i in order]


def claim_units(claim: Claim, prepared: Prepared) -> list[UnitKey]:
    """The claim's (point, repetition, size) units, most informative first (see the module)."""
    sizes = claim.sizes() or list(prepared.design.workload.sizes) or [None]
    groups = [(p, s) for p in spread_order(claim_points(claim, prepared), prepared) for s in sizes]
    reps = prepared.design.repetitions
    depth = min(reps, claim.stat.seeds_per_point(claim.params)) if claim.stat.needs_points else 1
    units = [(p, r, s) for p, s in groups for r in range(depth)]
    units += [(p, r, s) for r in range(depth, reps) for p, s in groups]
    return units


def first_block(claim: Claim) -> int:
    """Units a claim needs before its statistic can have an interval (``ClaimStatistic.first_block``: 3
    pairs or runs per side; for a statistic over points, ``min_seeds`` seeds of 3 points, 4 for a trend)."""
    return claim.stat.first_block(claim.params)


def depth_units(claim: Claim, units: list[UnitKey]) -> tuple[int, int]:
    """For a point statistic: how many of its first units give points their first seeds, and how many
    seeds each point gets there (``min_seeds``, or all of a design's repetitions if fewer); (0, 1) else."""
    if not claim.stat.needs_points or not units:
        return 0, 1
    first = (units[0][0], units[0][2])
    step = sum(1 for point, _, size in units[: claim.stat.seeds_per_point(claim.params)] if (point, size) == first)
    seeds: dict[tuple[int, int | None], int] = {}
    count = 0
    for point, _, size in units:
        seeds[(point, size)] = seeds.get((point, size), 0) + 1
        if seeds[(point, size)] > step:
            break
        count += 1
    return count, step


def block_end(claim: Claim, cursor: int, total: int, depth: tuple[int, int]) -> int:
    """Where the block of units starting at ``cursor`` ends: the claim's first block; then, while points
    get their first seeds, a whole point's worth; else one unit."""
    if cursor == 0:
        return min(total, max(1, first_block(claim)))
    count, step = depth
    if cursor < count:
        return min(total, count, (cursor // step + 1) * step)
    return cursor + 1


def labels_of(claim: Claim, campaign: Campaign) -> list[str]:
    """The labels whose runs a claim reads: its label and baseline; every label for a flows claim (the
    compared flows are inside each run)."""
    if claim.stat.reads == FLOWS:
        return [entry.label for entry in campaign.prepared.design.impls]
    return [claim.label, claim.baseline]


@dataclass
class Selection:
    """Runs chosen per campaign (in order), estimated seconds per campaign, per claim."""
    runs: dict[tuple[str, str], list[Run]]
    seconds: dict[tuple[str, str], float]
    claim_seconds: dict[str, float]
    claim_units: dict[str, int]


def select(claims: list[Claim], campaigns: dict[tuple[str, str], Campaign], capacity: float | None,
           *, full: bool = False) -> Selection:
    """The runs ``capacity`` seconds of runs buy (None: no limit), claim by claim in turn."""
    profiles = sorted({profile for profile, _ in campaigns})
    units = {c.id: claim_units(c, campaigns[(profiles[0], c.design)].prepared) for c in claims
             if (profiles[0], c.design) in campaigns}
    chosen: dict[tuple[str, str], dict[str, Run]] = {key: {} for key in campaigns}
    spent = dict.fromkeys(units, 0.0)
    cursor = dict.fromkeys(units, 0)
    taken = dict.fromkeys(units, 0)
    active = {cid for cid, found in units.items() if found}
    share = None if capacity is None or not active else capacity / len(active)
    deferred: list[str] = []
    total = 0.0
    by_id = {c.id: c for c in claims}
    depths = {cid: depth_units(by_id[cid], found) for cid, found in units.items()}
    while active or deferred:
        if not active:  # every other claim is done: the costly ones may have what is left
            active, deferred, share = set(deferred), [], None
        cid = min(sorted(active), key=lambda i: spent[i])
        if cursor[cid] >= len(units[cid]):
            active.discard(cid)
            continue
        claim = by_id[cid]
        # A claim's first units come as one block: fewer than its statistic needs say nothing.
        block = block_end(claim, cursor[cid], len(units[cid]), depths[cid])
        new: list[tuple[tuple[str, str], Run]] = []
        for point, rep, size in units[cid][cursor[cid]:block]:
            for profile in profiles:
                campaign = campaigns.get((profile, claim.design))
                if campaign is None:
                    continue
                key = (profile, claim.design)
                for label in labels_of(claim, campaign):
                    run = campaign.by_unit.get((point, rep, size, label))
                    if run is not None and campaign.todo(run) and run.key not in chosen[key] \
                            and (key, run) not in new:
                        new.append((key, run))
        taken_now = block - cursor[cid]
        cost = sum(campaigns[key].seconds(run) for key, run in new)
        if share is not None and cursor[cid] == 0 and cost > share:
            active.discard(cid)  # its first block alone is more than its share: after the others
            deferred.append(cid)
            continue
        if capacity is not None and total + cost > capacity:
            active.discard(cid)  # its next unit does not fit: the claim stops here
            continue
        cursor[cid] += taken_now
        for key, run in new:
            chosen[key][run.key] = run
        total += cost
        spent[cid] += cost
        taken[cid] += taken_now
    if full:
        for key, campaign in campaigns.items():
            for run in campaign.prepared.runs:
                if campaign.todo(run) and run.key not in chosen[key]:
                    chosen[key][run.key] = run
    runs = {key: list(found.values()) for key, found in chosen.items()}
    seconds = {key: sum(campaigns[key].seconds(r) for r in found) for key, found in runs.items()}
    return Selection(runs=runs, seconds=seconds, claim_seconds=spent, claim_units=taken)


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
