"""The one selection of a campaign's runs: those still to do in its database, what `--retry` adds, a pilot's
sample, a caller's order (`fecbench run`, `fecbench reproduce` and `--jobs auto` select through it), and the
twins a campaign runs again under their keys (`--twins`).

Twins measure how far a run repeats itself. Seeded losses drop the n-th packet of a direction; when timing changes
which packet is the n-th (an ACK sent a little earlier, a timer that fired a little later), two runs with the same
key, point and loss seed can measure different times. `--twins N` runs N of the campaign's ok runs again at its
end (a seeded sample: the same design picks the same runs), each twin recorded beside its run (the `twins` table:
`runners.run.recorder.TwinRecorder`), never in its place: every reader of the runs sees the run's own outcome. The
report sets their spread beside every effect (`fecbench.analysis.report.evidence.twin_spreads`), and `fecbench
run --twins` prints it once enough twins ended ok (`evidence.MIN_TWINS`). A database written before schema 9 kept
a twin's first outcome in `earlier_outcomes` with the reason `TWIN`: its twinned runs count as twinned."""

from __future__ import annotations

import random
from collections import OrderedDict, deque
from pathlib import Path

from fecbench.inputs.errors import UserError
from fecbench.records import run_records
from fecbench.records.db import open_readonly
from fecbench.records.status import RETRYABLE, Status
from fecbench.runners.experiment.design import written_repetitions
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.recorder import read_design_texts, read_statuses


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


def continue_recorded(prepared: Prepared, db_path: Path) -> int | None:
    """A campaign extended: when none of the design's runs is in the database but the runs of the same design
    with the `repetitions` one of its campaigns wrote are, key the runs as those were (`Prepared.rekey`), so
    that the runs it holds are found, keys unchanged, and only the new repetitions are to do. Returns the
    repetitions the runs are now keyed with (0: a design that wrote none), None when they were not rekeyed.
    A design whose `repetitions` did not change keeps its own keys; any other change to what the experiment
    hash reads ([space], [loss], [workload], the seed, the topology) still makes every run new."""
    statuses = read_statuses(db_path)
    if not statuses or any(run.key in statuses for run in prepared.runs):
        return None
    own = written_repetitions(prepared.design.text)
    for written in dict.fromkeys(written_repetitions(text) for text in read_design_texts(db_path)):
        if written == own:
            continue
        prepared.rekey(written)
        if any(run.key in statuses for run in prepared.runs):
            return written
    if prepared.repetitions_as is not None:
        prepared.rekey(None)
    return None


def sample_runs(todo: list[Run], k: int | None, seed: int) -> list[Run]:
    """A pilot: k of the runs to do, drawn at random (seeded by the design seed, so the same design draws
    the same runs), in campaign order; all of them when k is None or not smaller."""
    if k is None or k >= len(todo):
        return todo
    chosen = {run.key for run in random.Random(f"fecbench-sample:{seed}").sample(todo, k)}
    return [run for run in todo if run.key in chosen]


#: The repetitions `--only` tries a key under when the design's own keying has no run of it (a design raised since).
ONLY_REKEY_MAX = 100


def _matches(prepared: Prepared, prefixes: list[str]) -> dict[str, list[Run]]:
    return {prefix: [run for run in prepared.runs if run.key.startswith(prefix)] for prefix in prefixes}


def only_keys(prepared: Prepared, text: str | None) -> list[Run] | None:
    """`--only KEY[,KEY…]`: the design's runs whose keys start with these prefixes, one run each (a prefix that
    matches none or several is refused, exit 2): one run again with its key and loss seed, e.g. into a new database
    with its captures kept (`fecbench explain`'s advice). A key made while the design wrote another `repetitions`
    (its campaign then given more) is found under that keying (`Prepared.rekey`, up to ONLY_REKEY_MAX), which the
    runs then keep: the same key and loss seed as the run recorded."""
    if not text:
        return None
    prefixes = [part.strip() for part in text.split(",") if part.strip()]
    found = _matches(prepared, prefixes)
    if any(not runs for runs in found.values()):
        own = prepared.repetitions_as
        for written in range(ONLY_REKEY_MAX + 1):
            if written == own or written == prepared.design.repetitions:
                continue
            prepared.rekey(written)
            again = _matches(prepared, prefixes)
            if all(len(runs) == 1 for runs in again.values()):
                found = again
                break
        else:
            prepared.rekey(own)
    for prefix, runs in found.items():
        if len(runs) != 1:
            raise UserError(f"--only {prefix!r}: {'no run' if not runs else f'{len(runs)} runs'} of "
                            f"{prepared.design.path.name} with a key starting so, under its own repetitions or any "
                            f"of 0-{ONLY_REKEY_MAX} (give a key, or enough of it to be one run's: `fecbench status DB` "
                            "and the report name keys; a run of a repetition the design no longer has needs that many "
                            "again)")
    return [runs[0] for runs in found.values()]


def parse_retry(text: str | None) -> set[str]:
    if not text:
        return set()
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    unknown = wanted - set(RETRYABLE)
    if unknown:
        raise UserError(f"--retry: unknown status {sorted(unknown)[0]!r} (allowed: {', '.join(RETRYABLE)})")
    return wanted


TWIN = run_records.TWIN


def twins(prepared: Prepared, db_path: Path, n: int) -> list[Run]:
    """N of the campaign's runs that finished ok and were not twinned before, drawn at random (seeded by the design
    seed), in campaign order; fewer when fewer are left."""
    statuses, done = read_statuses(db_path), twinned(db_path)
    candidates = [run for run in prepared.runs if statuses.get(run.key) == Status.OK and run.key not in done]
    chosen = {run.key for run in random.Random(f"fecbench-twins:{prepared.design.seed}").sample(
        candidates, min(n, len(candidates)))}
    return [run for run in prepared.runs if run.key in chosen]


def twinned(db_path: Path) -> set[str]:
    """The runs of a database that have a twin already (recorded beside them, or before schema 9 in their place)."""
    if not db_path.is_file():
        return set()
    conn = open_readonly(db_path)
    try:
        return run_records.twinned_keys(conn)
    finally:
        conn.close()


class RunQueue:
    """The runs left to start, in the campaign's order, also reachable by design point (an executor may
    keep a network on one point to reconfigure it, and measure fidelity, rarely)."""

    def __init__(self, runs: list[Run]) -> None:
        self._left: OrderedDict[str, Run] = OrderedDict((run.key, run) for run in runs)
        self._by_point: dict[int, deque[Run]] = {}
        for run in runs:
            self._by_point.setdefault(run.point, deque()).append(run)

    def __len__(self) -> int:
        return len(self._left)

    def points(self) -> dict[int, int]:
        """Points with runs left -> how many."""
        return {p: len(q) for p, q in self._by_point.items() if q}

    def pop_next(self) -> Run:
        _, run = self._left.popitem(last=False)
        self._by_point[run.point].remove(run)
        return run

    def pop_point(self, point: int) -> Run:
        run = self._by_point[point].popleft()
        del self._left[run.key]
        return run

    def pop_near(self, current: int | None, taken: set[int | None]) -> Run | None:
        """For a network configured for point `current`: a run of that point if any is left; else of the point
        no other network works on (`taken`) with the most runs left; else of the biggest point."""
        left = self.points()
        if current not in left:
            free = [p for p in left if p not in taken] or list(left)
            if not free:
                return None
            current = max(free, key=lambda p: left[p])
        return self.pop_point(current)

    def add(self, runs: list[Run]) -> None:
        """More runs, after those left."""
        for run in runs:
            self._left[run.key] = run
            self._by_point.setdefault(run.point, deque()).append(run)

    def drain(self) -> list[Run]:
        """Take every run off the queue (a campaign out of time: they stay pending); those runs."""
        left = list(self._left.values())
        self._left.clear()
        self._by_point.clear()
        return left

    def put_back(self, runs: list[Run]) -> None:
        """Runs taken off and not started: first again, in their order."""
        for run in reversed(runs):
            self._left[run.key] = run
            self._left.move_to_end(run.key, last=False)
            self._by_point.setdefault(run.point, deque()).appendleft(run)

    def drop_label(self, label: str) -> list[Run]:
        """Take every run of an implementation label off the queue (the circuit breaker); those runs."""
        dropped = [run for run in self._left.values() if run.label == label]
        for run in dropped:
            del self._left[run.key]
            self._by_point[run.point].remove(run)
        return dropped
