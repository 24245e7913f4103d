"""`fecbench ab`: two builds of one stack run interleaved on this machine, then compared
(fecbench.runners.commands.ab says how; ci-recipes/fecbench-ci's `ab` builds two refs and calls it)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from fecbench.cli.compare import compare_command
from fecbench.runners.commands.ab import CHUNK_RUNS
from fecbench.runners.executors.progress import RichReporter
from fecbench.runners.executors.quiet import FIDELITY_RERUNS

console = Console()


def ab(base: Path = typer.Argument(..., metavar="BASE_DESIGN", help="The base build's design file (its "
                                   "descriptors name the base binary)."),
       head: Path = typer.Argument(..., metavar="HEAD_DESIGN", help="The head build's design file: the same runs, "
                                   "only its binaries may differ."),
       out: Path = typer.Option(Path("fecbench-ab-out"), "--out", help="Folder of base.sqlite and head.sqlite "
                                "(an A/B left unfinished there resumes)."),
       margin: str = typer.Option("5%", "--margin", help="The compare's margin (fecbench compare --margin)."),
       metric: str = typer.Option("dct_ms", "--metric", help="The compared metric (fecbench compare --metric)."),
       chunk: int = typer.Option(CHUNK_RUNS, "--chunk", min=1, help="Runs of one side before the other side's "
                                 "same runs (ABBA order)."),
       reruns: int = typer.Option(FIDELITY_RERUNS, "--reruns", min=0, max=20, help="Rounds of re-runs of runs "
                                  "flagged fidelity, at each chunk's end (0: keep them flagged)."),
       ) -> None:
    """A/B on one machine: BASE_DESIGN's and HEAD_DESIGN's runs (the same design, two builds) interleaved chunk by
    chunk on the same seeds, then `fecbench compare BASE HEAD --margin`: machine, kernel and load cancel.

    Exit status: the compare's (0 equivalent, 1 differs, 3 undecided), 2 bad input (the two designs do not plan
    the same runs), 1 when a side's campaign stopped (a circuit breaker)."""
    from fecbench.cli.run import confine
    from fecbench.runners.commands import ab as ab_mod
    from fecbench.runners.commands import pipeline

    sides = []
    for name, design in (("base", base), ("head", head)):
        prepared = pipeline.check_inputs(design)
        sides.append(ab_mod.Side(name, prepared, out / f"{name}.sqlite"))
    ab_mod.same_runs(sides[0].prepared, sides[1].prepared)
    confine()
    out.mkdir(parents=True, exist_ok=True)
    stopped = ab_mod.interleave(*sides, pipeline.Machine(), RichReporter(console), chunk=chunk, reruns=reruns)
    for side in sides:
        done = ", ".join(f"{k} {v}" for k, v in sorted(side.counts.items())) or "nothing to do"
        console.print(f"{side.name} ({side.db}): {done}")
    if stopped:
        console.print(f"[red]campaign stopped: {stopped}; the databases keep what ran[/]")
        raise typer.Exit(1)
    compare_command(a=sides[0].db, b=sides[1].db, margin=margin, metric=metric, by=[], label=[], seed=0,
                    json_out=False, same_machine=False)
