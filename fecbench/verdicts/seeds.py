"""Extra seeds: repetitions beyond a design's, the design's seed stream continued.

An undecided claim may take more seeds than its design lists. A run of repetition r ≥ R (the design's
``repetitions``) is made exactly as ``runners.experiment.runs.enumerate_runs`` would make it: its loss seed is
``loss_seed(design seed, point, r)`` (the same for every implementation and every profile: common
random numbers, and a profile keeps the design's seed), its key ``run_key(experiment hash, point
values, implementation, workload, size, r)`` with the campaign's own experiment hash. The design
file is not changed, so the runs already done keep their keys and loss seeds (a design given more repetitions
later keeps them too: ``selection.continue_recorded`` keys its runs as the database's were, and those keys are
these extension keys, so the extra seeds reproduce ran are found as done), and
the extra runs join the same campaign in the same database, recorded as such by their repetition
(≥ the ``repetitions`` the campaign records). ``fecbench run FILE --db DB`` leaves them alone (they
are not in the design); ``fecbench reproduce`` finds them again (``recorded``) and resumes them.
"""

from __future__ import annotations

from fecbench.inputs.errors import UserError
from fecbench.records import run_records
from fecbench.records.db import open_readonly
from fecbench.runners.experiment.runs import Run, loss_seed, run_key
from fecbench.verdicts.campaign import Campaign


def design_repetitions(campaign: Campaign) -> int:
    return campaign.prepared.design.repetitions


def extension_run(campaign: Campaign, point: int, repetition: int, size: int | None, label: str) -> Run | None:
    """The run (point, repetition, size, label) of the campaign: its own if the design has it, else the
    extra run the design's seed stream continued gives (None for an unknown point or label)."""
    found = campaign.by_unit.get((point, repetition, size, label))
    if found is not None:
        return found
    prepared = campaign.prepared
    impl = next((entry for entry in prepared.design.impls if entry.label == label), None)
    if impl is None or point not in prepared.points or repetition < design_repetitions(campaign):
        return None
    values = prepared.points[point]
    key = run_key(prepared.experiment_hash, values, impl, prepared.design.workload.params(), size, repetition)
    return Run(key=key, index=-1, point=point, values=values, impl=impl, workload=prepared.design.workload.kind,
               size=size, repetition=repetition, loss_seed=loss_seed(prepared.design.seed, point, repetition))


def adopt(campaign: Campaign, runs: list[Run]) -> None:
    """Make extra runs part of the campaign's prepared runs (the recorder inserts them as pending, the
    engine may run them), after the design's own."""
    for run in runs:
        unit = (run.point, run.repetition, run.size, run.label)
        if unit in campaign.by_unit:
            continue
        run.index = len(campaign.prepared.runs)
        campaign.prepared.runs.append(run)
        campaign.by_unit[unit] = run


def recorded(campaign: Campaign) -> int:
    """Adopt the extra runs the campaign's database already holds (a key that does not match the seed
    stream's is not this campaign's: left out). Returns how many."""
    try:
        con = open_readonly(campaign.db)
    except UserError:
        return 0
    try:
        rows = run_records.extra_repetitions(con, design_repetitions(campaign))
    finally:
        con.close()
    found = []
    for point, repetition, size, label, key in rows:
        run = extension_run(campaign, int(point), int(repetition), None if size is None else int(size), str(label))
        if run is not None and run.key == key:
            found.append(run)
    adopt(campaign, sorted(found, key=lambda r: (r.repetition, r.point, r.size or 0, r.label)))
    return len(found)


def extra_count(campaign: Campaign) -> int:
    """Extra runs the campaign holds (adopted)."""
    return sum(1 for run in campaign.prepared.runs if run.repetition >= design_repetitions(campaign))
