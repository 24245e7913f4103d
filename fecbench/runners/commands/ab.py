"""Two builds of one stack measured side by side on this machine (`fecbench ab`, `fecbench-ci ab`; issue 68).

The robust practice of performance CI: base and head built and run in the same job, on the same runner,
interleaved, so the machine, its kernel and its load cancel (a baseline recorded elsewhere carries another
machine's speed). Each build has its own design file, usually the same `.fecbench/ci.toml` in two checkouts whose
descriptors point at that checkout's binary; the two must plan the same runs (the same keys and loss seeds: the
design's text may differ only in where its implementations are found, which the run keys leave out).

The runs go chunk by chunk in the design's order, ABBA (base then head, head then base, ...), each chunk the same
keys on both sides, so a drift of the machine over the job (a neighbour's load, a warming CPU) falls on both
builds alike and a pair's two runs are at most two chunks apart. Each side's database is a campaign of its own,
resumable like any (`fecbench run` on it continues it), and the two are compared as any two campaigns of one
design (`fecbench compare --margin`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fecbench.inputs.errors import UserError

if TYPE_CHECKING:
    from fecbench.runners.executors import Machine
    from fecbench.runners.executors.progress import Reporter
    from fecbench.runners.experiment.prepare import Prepared
    from fecbench.runners.experiment.runs import Run

#: Runs of one side in a chunk: about ten seconds of the recipe's short downloads, so a pair's runs are close in
#: time, while each chunk's network is built only once.
CHUNK_RUNS = 10


@dataclass
class Side:
    """One build: its prepared design and its database."""
    name: str
    prepared: Prepared
    db: Path
    counts: Counter = field(default_factory=Counter)


def same_runs(base: Prepared, head: Prepared) -> None:
    """The two designs plan the same runs in the same order on the same losses, else a UserError (exit 2) saying
    how they differ."""
    a = [(run.key, run.loss_seed) for run in base.runs]
    b = [(run.key, run.loss_seed) for run in head.runs]
    if a == b:
        return
    only_a = len({k for k, _ in a} - {k for k, _ in b})
    only_b = len({k for k, _ in b} - {k for k, _ in a})
    raise UserError(f"base {base.design.path} and head {head.design.path} do not plan the same runs ({len(a)} and "
                    f"{len(b)} runs, {only_a} only in base, {only_b} only in head): an A/B needs one design, its "
                    "implementations' names, labels and arguments unchanged; only the binaries may differ")


def chunks(runs: list[Run], size: int) -> list[list[str]]:
    """The design's run keys in order, `size` at a time."""
    keys = [run.key for run in runs]
    return [keys[i:i + size] for i in range(0, len(keys), size)]


def order(index: int, base: Side, head: Side) -> tuple[Side, Side]:
    """ABBA: base first in even chunks, head first in odd ones."""
    return (base, head) if index % 2 == 0 else (head, base)


def interleave(base: Side, head: Side, machine: Machine, reporter: Reporter, *, chunk: int = CHUNK_RUNS,
               reruns: int = 0) -> str | None:
    """Run both sides' runs still to do, chunk by chunk (``order``), each side on its own executor built per chunk
    (its networks torn down before the other side runs); each side's ``counts`` gets its outcomes. Returns why
    a side's campaign stopped (a circuit breaker: the rest would only repeat its failure), else None."""
    from fecbench.runners.commands import pipeline
    from fecbench.runners.commands.pipeline import Execution
    from fecbench.runners.executors import make_executor

    same_runs(base.prepared, head.prepared)
    todo = {side.name: {run.key: run for run in pipeline.choose_runs(side.prepared, side.db, set())}
            for side in (base, head)}
    jobs = machine.jobs or 1
    parts = chunks(base.prepared.runs, chunk)
    for index, keys in enumerate(parts):
        for side in order(index, base, head):
            runs = [todo[side.name][key] for key in keys if key in todo[side.name]]
            if not runs:
                continue
            reporter.say(f"chunk {index + 1}/{len(parts)}: {side.name}, {len(runs)} run(s)")
            executor = make_executor(side.prepared, side.db, machine, jobs, None, reporter)
            summary = pipeline.execute(side.prepared, side.db, Execution(executor, runs, None, jobs), reporter,
                                       retry=set(), reruns=reruns)
            side.counts.update(summary.counts)
            if summary.aborted:
                return f"{side.name}: {summary.aborted}"
    return None
