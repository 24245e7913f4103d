"""A design under one profile, as a reproduction sees it: prepared, what its database holds, what its runs
take.

Durations. A run's duration is the model of ``runners.experiment.runs.estimate_seconds`` (through
``Prepared.estimate``) times a factor measured on runs already done: in the campaign's own database
and in the design's usual one (``results/<design name>.sqlite``), the median of measured ÷ estimated
per label and size (3 runs or more), else per design, else the median factor of the pack's other
campaigns that have measurements, else 1 (the model was fitted on this machine).

A run that was flagged (``fidelity``: the network or the endpoints did not keep to the design, the harness's fault,
not the run's) is to do once more (same key and seed; ``Campaign.todo``): the claims whose draws read it wait for
that second outcome (``samples``). A failed run is not: a second attempt that finished would be a draw from the
runs that did not fail, never a plain observation, so its value is imputed either way (``samples``) and a re-run
would buy nothing.

What a campaign knows of its database: read once (``read``), then kept up to date from the outcomes the engine
reports as it records them (``record``); read again only after ``--jobs auto``'s calibration, whose serial pilot
records its runs itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING

from fecbench.host.paths import RESULTS_DIR
from fecbench.inputs.errors import UserError
from fecbench.records import run_records
from fecbench.records.db import open_readonly
from fecbench.records.status import Status
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.recorder import read_retried, read_statuses
from fecbench.verdicts.draws import Draw, DrawSpace, draws, space_of
from fecbench.verdicts.pack import Claim

if TYPE_CHECKING:
    from fecbench.runners.executors.engine import Finished

#: Runs needed to trust a measured duration factor.
MIN_MEASURED = 3

#: Statuses of a finished run that a reproduction runs once more (same key and seed) before its claims read it.
RUN_AGAIN = (Status.FIDELITY,)


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
    # measured ÷ estimated seconds of the ok runs the factors come from, per (label, size)
    ratios: dict[tuple[str, int | None], list[float]] = field(default_factory=dict)
    # runs the engine holds while it asks for runs for its idle networks (in flight, or its own to run again)
    held: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.by_unit = {(r.point, r.repetition, r.size, r.label): r for r in self.prepared.runs}

    def seconds(self, run: Run) -> float:
        return self.prepared.estimate(run) * self.factors.get((run.label, run.size), self.factor)

    def todo(self, run: Run) -> bool:
        """Not run yet, or flagged and not run again yet; and not held by the engine."""
        if run.key in self.held:
            return False
        status = self.statuses.get(run.key, Status.PENDING)
        return status in (Status.PENDING, Status.INTERRUPTED) or (status in RUN_AGAIN and run.key not in self.retried)

    def rerun_factor(self) -> float:
        """Runs started per run needed: each flagged run runs once more (measured in this campaign)."""
        finished = {key for key, status in self.statuses.items() if status not in (Status.PENDING, Status.INTERRUPTED)}
        again = {key for key in finished if self.statuses[key] in RUN_AGAIN} | (self.retried & finished)
        return 1.0 + len(again) / max(1, len(finished))

    @property
    def space(self) -> DrawSpace:
        return space_of(self.prepared)

    def draws(self, claim: Claim) -> list[Draw]:
        return draws(claim, self.space)


def read(campaign: Campaign) -> None:
    """What the databases hold: the campaign's statuses, its runs already run again, the measured durations (in its
    own database and in the design's usual one)."""
    campaign.statuses = read_statuses(campaign.db)
    campaign.retried = read_retried(campaign.db, RUN_AGAIN)
    measured_durations(campaign, [campaign.db, usual_db(campaign.prepared)])


def record(campaign: Campaign, finished: list[Finished]) -> None:
    """What the engine wrote in the campaign's database, from the outcomes it reported of the runs it ran to their
    end, in their order (each recorded as the run's status): a run that starts while flagged (or failed) has that
    outcome kept aside (``retried``: the allocator's second run of it, a flagged run's re-run round), an ok run
    its measured duration."""
    for done in finished:
        key = done.run.key
        if campaign.statuses.get(key) in RUN_AGAIN:
            campaign.retried.add(key)
        campaign.statuses[key] = str(done.outcome.status)
        if done.outcome.status == Status.OK and done.duration_s is not None and done.duration_s > 0:
            _measured(campaign, (done.run.point, done.run.repetition, done.run.size, done.run.label), done.duration_s)
    _factors(campaign)


def measured_durations(campaign: Campaign, dbs: list[Path]) -> None:
    """Set the campaign's duration factors from the ok runs of ``dbs`` (same design points)."""
    campaign.ratios = {}
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
            _measured(campaign, (point, rep, size, label), seconds)
    _factors(campaign)


def _measured(campaign: Campaign, unit: tuple, seconds: float) -> None:
    """One ok run's measured seconds (its unit: point, repetition, size, label) against the model's."""
    run = campaign.by_unit.get(unit)
    estimate = campaign.prepared.estimate(run) if run is not None else 0.0
    if estimate > 0:
        campaign.ratios.setdefault((unit[3], unit[2]), []).append(float(seconds) / estimate)


def _factors(campaign: Campaign) -> None:
    every = [r for values in campaign.ratios.values() for r in values]
    campaign.measured = len(every)
    campaign.factor = median(every) if len(every) >= MIN_MEASURED else 1.0
    campaign.factors = {k: median(v) for k, v in campaign.ratios.items() if len(v) >= MIN_MEASURED}


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
