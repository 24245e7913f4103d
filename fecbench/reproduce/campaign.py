"""A design under one profile, as a reproduction sees it: prepared, what its database holds, what its runs
take.

Durations. A run's duration is the model of ``runners.experiment.runs.estimate_seconds`` (through
``Prepared.estimate``) times a factor measured on runs already done: in the campaign's own database
and in the design's usual one (``results/<design name>.sqlite``), the median of measured ÷ estimated
per label and size (3 runs or more), else per design, else the median factor of the pack's other
campaigns that have measurements, else 1 (the model was fitted on this machine).

A run that failed or was flagged is to do once more (same key and seed; ``Campaign.todo``): the claims
whose draws read it wait for that second outcome (``samples``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from fecbench.host.paths import RESULTS_DIR
from fecbench.inputs.errors import UserError
from fecbench.records import run_records
from fecbench.records.db import open_readonly
from fecbench.records.status import Status
from fecbench.reproduce.draws import Draw, Space, draws, space_of
from fecbench.reproduce.pack import Claim
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run

#: Runs needed to trust a measured duration factor.
MIN_MEASURED = 3

#: Statuses of a finished run that a reproduction runs once more (same key and seed) before its claims read it.
RUN_AGAIN = (Status.FAILED, Status.FIDELITY)


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
    retried: set[str] = field(default_factory=set)   # runs already run again (RUN_AGAIN)
    label_map: dict[str, str] = field(default_factory=dict)   # the profile's claim label → design label

    def __post_init__(self) -> None:
        self.by_unit = {(r.point, r.repetition, r.size, r.label): r for r in self.prepared.runs}

    def seconds(self, run: Run) -> float:
        return self.prepared.estimate(run) * self.factors.get((run.label, run.size), self.factor)

    def todo(self, run: Run) -> bool:
        """Not run yet, or failed or flagged and not run again yet."""
        status = self.statuses.get(run.key, Status.PENDING)
        return status in (Status.PENDING, Status.INTERRUPTED) or (status in RUN_AGAIN and run.key not in self.retried)

    def rerun_factor(self) -> float:
        """Runs started per run needed: each failed or flagged run runs once more (measured in this campaign)."""
        finished = {key for key, status in self.statuses.items() if status not in (Status.PENDING, Status.INTERRUPTED)}
        again = {key for key in finished if self.statuses[key] in RUN_AGAIN} | (self.retried & finished)
        return 1.0 + len(again) / max(1, len(finished))

    @property
    def space(self) -> Space:
        return space_of(self.prepared)

    def draws(self, claim: Claim) -> list[Draw]:
        return draws(claim, self.space)


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
