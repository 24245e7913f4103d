"""CLI of ``fecbench report``, ``export``, ``explain`` and ``bench backends``: outside the report package,
whose import (seaborn, scipy) would cost every `fecbench` command ~1.5 s at start; the work is imported when
the command runs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from fecbench.host.paths import check_output_dir, check_output_file

console = Console()


def report(
    db: Path = typer.Argument(None, help="Results database (default: the newest results/*.sqlite)."),
    output: Path = typer.Option(None, "-o", "--output", help="Output directory "
                                "(default: results/<db stem>-report/)."),
    baseline: str = typer.Option(None, "--baseline", help="Label every other label is compared with (default: "
                                 "each label with its own implementation's no-FEC and single-path twins, "
                                 "designs/README.md 'Baselines'; udp for messages runs)."),
    open_notebook: bool = typer.Option(False, "--open-notebook", help="Instead of writing a report, "
                                       "start Jupyter in notebooks/ on this database (FECBENCH_DB)."),
    port: int = typer.Option(8888, "--port", min=1, max=65535, help="With --open-notebook: the port Jupyter "
                             "listens on (on 127.0.0.1 only; tunnel it with ssh -L to reach it from elsewhere)."),
    against: Path = typer.Option(None, "--against", help="Another campaign of the same design (another version "
                                 "of a stack or of fecbench): both side by side, what changed first, the ECDFs of "
                                 "the per-run ratios in both (versions-ratio-ecdf.png) and of this ÷ that by run "
                                 "key (versions-change-ecdf.png).", show_default=False, metavar="OTHER.sqlite"),
) -> None:
    """Figures (PNG) and one self-contained HTML page with summary and medians tables.

    With --open-notebook, start JupyterLab (installed with the analysis extra) on the database instead,
    listening on 127.0.0.1:PORT; without Jupyter installed this says how to install it and exits 2.
    """
    from fecbench.analysis import report as report_mod

    db = db if db is not None else report_mod.default_db()
    if open_notebook:
        raise typer.Exit(report_mod.open_notebook(db, port=port))
    if against is not None:
        report_mod.check_against(db, against)
    with console.status("report") as status:
        written = report_mod.build(db, output if output is None else check_output_dir(output, "--output"),
                                   baseline=baseline, against=against,
                                   progress=lambda name: status.update(f"report: {name}"))
    for sentence in written.sentences:
        console.print(sentence, markup=False, highlight=False)
    console.print(f"{len(written.figures)} figures and {len(written.tables)} tables → {written.html}")


def export(
    db: Path = typer.Argument(None, help="Results database (default: the newest results/*.sqlite)."),
    fmt: str = typer.Option("csv", "--format", "-f", help="csv or parquet."),
    output: Path = typer.Option(None, "-o", "--output", help="Output file "
                                "(default: the database path with .csv or .parquet)."),
    table: str = typer.Option("runs", "--table", "-t", help="runs (one row per run), paths (one row per "
                              "run, path and side of multipath runs: what each endpoint counted on each path), losses "
                              "(per run: drops by cause, declared losses), link-losses (per run, link and direction) "
                              "or artifacts (the qlog, key logs and captures runs kept, with their files)."),
) -> None:
    """Tidy runs table (one row per run: factors, implementation, label, status, metrics) as CSV/Parquet;
    --table paths: the per-path endpoint metrics of multipath runs."""
    from fecbench.analysis import report as report_mod
    from fecbench.analysis.export import export as export_table

    db = db if db is not None else report_mod.default_db()
    target = export_table(db, fmt, output if output is None else check_output_file(output, "--output"), table)
    console.print(f"wrote {target}")


def explain(
    db: Path = typer.Argument(..., help="Results database."),
    run_key: str = typer.Argument(..., help="The run's key (a unique prefix will do: fecbench export, column key)."),
    output: Path = typer.Option(None, "-o", "--output", help="Output directory "
                                "(default: <db stem>-explain/ beside the database)."),
    pair: bool = typer.Option(False, "--pair", help="Draw the run beside its twin without FEC on the same "
                              "losses (same implementation, point, repetition, size and loss seed)."),
) -> None:
    """One run's timeline from its kept qlog: congestion window, bytes in flight, smoothed RTT and sending
    rate over time, with dropper drops, declared losses, repairs and recoveries as marks (PNG), and its
    numbers (text). Needs the run's qlog: `fecbench run DESIGN --capture qlog=all`, or that run alone again
    with its key and loss seed: `fecbench run DESIGN --db again.sqlite --only KEY --capture qlog=all`."""
    from fecbench.analysis.traces import explain as explain_mod

    written = explain_mod.explain(db, run_key, output if output is None else check_output_dir(output, "--output"),
                                  pair=pair)
    console.print(written.text, markup=False, highlight=False, soft_wrap=True)
    console.print(f"timeline → {written.figure}\nsummary → {written.summary}", markup=False, highlight=False,
                  soft_wrap=True)


def bench_backends(design: Path = typer.Argument(Path("designs/smoke.toml"), help="The design run on both backends."),
                   backends: str = typer.Option("netem,delayline", "--backends", help="The two link backends "
                                                "compared (the same one twice: a control)."),
                   repetitions: int = typer.Option(2, "--repetitions", help="Repetitions of the design."),
                   out: Path = typer.Option(Path("results/compare-backends"), "--out",
                                            help="Where the databases and compare.json go.")) -> None:
    """Same results, both backends: the design under netem and under the delay element on this kernel, per
    point the median DCT ratio and how far the dropper verdict logs of paired runs agree (vm/README.md)."""
    from fecbench.analysis.studies.backends import parse_backends, run_backends_bench
    from fecbench.inputs.errors import UserError, require_root

    names = parse_backends(backends)
    if not design.is_file():
        raise UserError(f"{design}: no such design file")
    if repetitions < 1:
        raise UserError(f"--repetitions must be at least 1 (got {repetitions})")
    require_root("fecbench bench backends (the campaigns build Mininet networks)")
    if "netem" in names:
        from fecbench.emulation.backend import netem_probe

        ok, reason = netem_probe()
        if not ok:
            raise UserError(f"this kernel has no netem ({reason}): load sch_netem, run it in the test-kernels "
                            "guest (make test-kernels), or compare --backends delayline,delayline")
    raise typer.Exit(run_backends_bench(design.resolve(), names, repetitions, out))
