"""The one selection of a campaign's runs: those still to do in its database, what `--retry` adds, a pilot's
sample, a caller's order (`fecbench run`, `fecbench reproduce` and `--jobs auto` select through it)."""

from __future__ import annotations

import random
from pathlib import Path

from fecbench.inputs.errors import UserError
from fecbench.records.status import RETRYABLE, Status
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.recorder import read_statuses


def select_runs(prepared: Prepared, statuses: dict[str, str], retry: set[str]) -> list[Run]:
    """Runs still to do: never finished (pending/interrupted), plus the statuses asked for by --retry."""
    todo_statuses = {Status.PENDING, Status.INTERRUPTED} | set(retry)
    return [run for run in prepared.runs if statuses.get(run.key, Status.PENDING) in todo_statuses]


def runs_to_do(prepared: Prepared, db_path: Path, retry: set[str], sample: int | None = None,
               only: list[Run] | None = None) -> list[Run]:
    """The one selection of a campaign's runs: those still to do in its database (plus `retry`'s statuses),
    a `sample` of them, and with `only`, those of these runs in that order."""
    todo = sample_runs(select_runs(prepared, read_statuses(db_path), retry), sample, prepared.design.seed)
    if only is not None:
        wanted = {run.key for run in todo}
        todo = [run for run in only if run.key in wanted]
    return todo


def sample_runs(todo: list[Run], k: int | None, seed: int) -> list[Run]:
    """A pilot: k of the runs to do, drawn at random (seeded by the design seed, so the same design draws
    the same runs), in campaign order; all of them when k is None or not smaller."""
    if k is None or k >= len(todo):
        return todo
    chosen = {run.key for run in random.Random(f"fecbench-sample:{seed}").sample(todo, k)}
    return [run for run in todo if run.key in chosen]


def parse_retry(text: str | None) -> set[str]:
    if not text:
        return set()
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    unknown = wanted - set(RETRYABLE)
    if unknown:
        raise UserError(f"--retry: unknown status {sorted(unknown)[0]!r} (allowed: {', '.join(RETRYABLE)})")
    return wanted
