"""CLI: `fecbench run`, `fecbench status`, `fecbench impls list|check`."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fecbench.cli import options
from fecbench.inputs.errors import UserError
from fecbench.runners.executors.progress import RichReporter
from fecbench.runners.executors.quiet import FIDELITY_RERUNS

if TYPE_CHECKING:
    from fecbench.runners.commands.pipeline import Execution, Machine
    from fecbench.runners.executors.engine import Summary
    from fecbench.runners.experiment.descriptor import Descriptor
    from fecbench.runners.experiment.estimate import CampaignEstimate
    from fecbench.runners.experiment.prepare import Prepared
    from fecbench.runners.experiment.runs import Run

console = Console()
impls_app = typer.Typer(help="Implementations: descriptors, capabilities, whether they are built.",
                        no_args_is_help=True)
dask_app = typer.Typer(help="Dask clusters: TLS credentials for campaigns on many hosts.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks of whole campaigns.", no_args_is_help=True)


def run(design: Path = typer.Argument(..., help="The design file (TOML)."),
        db: Path | None = typer.Option(None, "--db", help="Results database (default results/<design name>.sqlite)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="List the runs and an estimated duration; run nothing."),
        retry: str | None = typer.Option(None, "--retry", help="Also re-run these statuses, e.g. failed,timeout."),
        link_backend: str | None = typer.Option(None, "--link-backend", help="netem | delayline (default: probe)."),
        keep_logs: bool = typer.Option(False, "--keep-logs", help="Keep the log folder of ok runs too."),
        dask: str | None = options.DASK,
        tls_ca_file: Path | None = options.TLS_CA_FILE,
        tls_cert: Path | None = options.TLS_CERT,
        tls_key: Path | None = options.TLS_KEY,
        insecure: bool = options.INSECURE,
        dashboard: bool = options.DASHBOARD,
        breaker: int = typer.Option(5, "--breaker", min=0, help="Stop scheduling a label whose first K runs "
                                    "all failed the same way (0: never)."),
        accept_short_timeout: bool = typer.Option(False, "--accept-short-timeout", help="Run although timeout_s "
                                                  "is below the safe multiple of some run's minimum duration."),
        jobs: str | None = typer.Option(None, "--jobs", help="Run on N networks on this machine at once "
                                        "(no Dask needed); default 1. auto: the largest N whose pilot of the "
                                        "design's runs keeps the endpoints and delay elements within their bounds "
                                        "and matches the same runs done serially."),
        sample: int | None = typer.Option(None, "--sample", min=1, help="A pilot: only K of the runs to do, "
                                          "drawn at random (seeded by the design); the others stay pending."),
        only: str | None = typer.Option(None, "--only", help="Only these runs: KEY[,KEY...] (a key or enough of "
                                        "it to be one run's). One run again with its key and loss seed, e.g. into a "
                                        "new --db with --capture qlog=all to explain it."),
        jobs_pilot: int = typer.Option(16, "--jobs-pilot", min=1, help="--jobs auto: runs of the design in its "
                                       "calibration pilot (each run serially and with N networks)."),
        capture: str | None = typer.Option(None, "--capture", help="What runs keep to explain themselves, "
                                           "overriding the design's [capture]: all, off, or per kind, e.g. "
                                           "qlog=all,pcap=sample:3 (rules: all, off, failed, outliers, sample:N, "
                                           "joined with +)."),
        reruns: int = typer.Option(FIDELITY_RERUNS, "--reruns", min=0, max=20, help="Rounds of re-runs of the runs "
                                   "this campaign flags `fidelity`, at its end, one at a time once the CPU is quieter; "
                                   "each attempt's outcome is kept in earlier_outcomes, the run's status is its last "
                                   "attempt's (0: keep them flagged)."),
        no_retry: bool = typer.Option(False, "--no-retry", help="Same as --reruns 0."),
        twins: int = typer.Option(0, "--twins", min=0, help="At the end, run N of the campaign's ok runs again "
                                  "under their keys (seeded; none twice), each twin recorded beside its run (the "
                                  "twins table), never in its place (a flagged twin is re-run as a twin): how far a "
                                  "run repeats itself, which the report gives beside every effect. Then prints twin "
                                  "÷ run of the campaign's metric (median, 10th-90th percentile, share within 5 %) "
                                  "once at least 11 twins ended ok (fewer would let one twin set the interval), "
                                  "else how many more are needed."),
        recalibrate: bool = options.RECALIBRATE,
        ) -> None:
    """Run a campaign: every design point × implementation × size × repetition, resumable."""
    from fecbench.runners.commands import pipeline
    from fecbench.runners.executors.selection import parse_retry

    retry_set = parse_retry(retry)
    jobs_count, security = options.machine_options(
        link_backend=link_backend, jobs=jobs, recalibrate=recalibrate, dask=dask, tls_ca_file=tls_ca_file,
        tls_cert=tls_cert, tls_key=tls_key, insecure=insecure, dashboard=dashboard, reporter=RichReporter(console))
    machine = pipeline.Machine(jobs=jobs_count, dask=dask, link_backend=link_backend, keep_logs=keep_logs,
                               security=security, dashboard=dashboard, recalibrate=recalibrate, jobs_pilot=jobs_pilot)
    # 1. check the inputs, 2. plan the runs, 3. estimate ...
    prepared = pipeline.check_inputs(design, capture=capture, accept_short_timeout=accept_short_timeout,
                                     dry_run=dry_run)
    db_path = check_db_path(db or prepared.design.default_db())
    todo = pipeline.choose_runs(prepared, db_path, retry_set, sample, only)   # the one selection: the engine runs these
    if prepared.repetitions_as is not None:
        console.print(f"{db_path}: the campaign's runs keep the keys of its first design "
                      f"(repetitions = {prepared.repetitions_as or 'not written'}); only the new runs are to do")
    estimate = pipeline.estimate(prepared, todo, machine, db_path)
    for warning in prepared.warnings + estimate.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"))
    if dry_run:
        _dry_run(prepared, todo, db_path, estimate, machine)
        return
    confine()
    # ... and decide how to execute, 4. execute, 5. summarise
    execution, summary = _execute(prepared, db_path, todo, machine, retry_set, breaker,
                                  reruns=0 if no_retry else reruns)
    for style, line in pipeline.summary_lines(db_path, summary):
        console.print(Text(line, style=style))
    if summary.aborted:
        raise typer.Exit(1)
    if twins:
        _twins(prepared, db_path, twins, machine, execution.jobs, reruns=0 if no_retry else reruns)


def _dry_run(prepared: Prepared, todo: list[Run], db_path: Path, estimate: CampaignEstimate,
             machine: Machine) -> None:
    """--dry-run: the runs and an estimated duration; with --jobs auto, what its calibration will run first."""
    from fecbench.runners.run.recorder import read_statuses

    _print_dry_run(prepared, todo, read_statuses(db_path), db_path, estimate)
    if machine.jobs is None and todo and machine.dask is None:   # --jobs auto: what its calibration will run first
        from fecbench.runners.executors.calibrations import plan_text

        console.print(Text(plan_text(prepared, machine.link_backend, todo, estimate.per_run,
                                     pilot_runs=machine.jobs_pilot, recalibrate=machine.recalibrate)))


def confine() -> None:
    """Root, and this process and what it starts off the CPU left to the delay elements (fecbench.host.affinity)."""
    from fecbench.host.affinity import confine_harness
    from fecbench.inputs.errors import require_root

    require_root("fecbench run")
    not_confined = confine_harness()
    if not_confined:
        console.print(f"[yellow]warning: {not_confined}[/]")


def _execute(prepared: Prepared, db_path: Path, todo: list[Run], machine: Machine, retry_set: set[str], breaker: int,
             reruns: int) -> tuple[Execution, Summary]:
    """Decide how to execute and execute; an interrupt (Ctrl-C) leaves a resumable campaign, exit 130."""
    from fecbench.runners.commands import pipeline

    try:
        reporter = RichReporter(console)
        execution = pipeline.decide_execution(prepared, db_path, todo, machine, reporter)
        summary = pipeline.execute(prepared, db_path, execution, reporter, retry=retry_set, breaker=breaker,
                                   reruns=reruns)
    except KeyboardInterrupt:
        # sys.__stderr__: the progress display may still be redirecting sys.stderr.
        where = "the runs in flight are" if machine.dask or machine.jobs != 1 else "the current run is"
        print(f"fecbench: interrupted; {where} recorded as interrupted in {db_path}, the network "
              "is torn down; run the same command again to resume", file=sys.__stderr__, flush=True)
        raise typer.Exit(130) from None
    return execution, summary


def _twins(prepared: Prepared, db_path: Path, twins: int, machine: Machine, jobs: int, reruns: int) -> None:
    """--twins N: N of the campaign's ok runs again under their keys, each recorded beside its run; then the spread
    of the campaign's twins (`twin_spread`)."""
    from fecbench.runners.commands import pipeline

    twinned = pipeline.twins(prepared, db_path, twins, machine, jobs, RichReporter(console), reruns=reruns)
    done = "no ok run left to twin" if twinned is None else \
        ", ".join(f"{k} {v}" for k, v in sorted(twinned.counts.items())) or "none ran"
    console.print(Text(f"twins: {twins} asked, {0 if twinned is None else twinned.selected} run again under their "
                       f"keys ({done}), each recorded beside its run (the twins table): the runs are as they were"))
    console.print(Text(twin_spread(prepared, db_path)))


def twin_spread(prepared: Prepared, db_path: Path) -> str:
    """How far the campaign's runs repeat themselves, over all its twins in the database (`evidence.twin_summary`
    on the campaign's outcome metric, `calibrate.outcome_metric`), or how many more ok twins it needs first."""
    from fecbench.analysis import results
    from fecbench.analysis.report import evidence
    from fecbench.runners.executors import selection
    from fecbench.runners.executors.calibrate import outcome_metric

    if not db_path.is_file():
        return f"twins: none recorded ({db_path} holds no run yet)"
    metric, epsilon = outcome_metric(prepared)
    frame = results.load(db_path)
    frame = frame[frame["key"].isin({run.key for run in prepared.runs})]
    summary = evidence.twin_summary(evidence.attempts(db_path, frame, metric), metric, epsilon)
    default = db_path.resolve() == prepared.design.default_db().resolve()
    again = f"fecbench run {prepared.design.path}" + ("" if default else f" --db {db_path}") + " --twins"
    return evidence.twin_summary_text(summary, again, len(selection.twins(prepared, db_path, len(prepared.runs))))


def check_db_path(db_path: Path) -> Path:
    """A results database's place: an existing file, or a new file in a folder that exists or can be made
    (a folder, a device or a path under /proc is refused, exit 2, before anything runs)."""
    from fecbench.host.paths import check_output_file

    return check_output_file(db_path, "--db")


def _print_dry_run(prepared: Prepared, todo: list[Run], statuses: dict[str, str], db_path: Path,
                   estimate: CampaignEstimate) -> None:
    from fecbench.runners.experiment.applied import describe_impls, describe_point

    design = prepared.design
    console.print(f"[bold]{design.name}[/]: what each run gets (recorded with every run: runs.applied_json)")
    points = sorted({run.point for run in todo}) or sorted(prepared.points)
    for point in points[:8]:
        for line in describe_point(prepared, point):
            console.print(Text(line))
    if len(points) > 8:
        console.print(f"… and {len(points) - 8} more points (fecbench plan {design.path} lists them all)")
    for line in describe_impls(prepared):
        console.print(Text(line))
    table = Table(title=f"{design.name}: {len(todo)} of {len(prepared.runs)} run(s) to do → {db_path}")
    for col in ("#", "point", "label", "workload", "size", "rep", "loss seed", "est. s", "status"):
        # A number is never broken over lines (a loss seed once was, over three): names fold instead.
        table.add_column(col, justify="right" if col in ("#", "point", "size", "rep", "est. s") else "left",
                         overflow="fold", no_wrap=col not in ("label", "workload"))
    shown = todo[:40]
    for run in shown:
        table.add_row(str(run.index), str(run.point), run.label, run.workload, str(run.size or "-"),
                      str(run.repetition), str(run.loss_seed),
                      f"{estimate.per_run.get(run.key, prepared.estimate(run)):.1f}",
                      statuses.get(run.key, "new"))
    console.print(table)
    if len(todo) > len(shown):
        console.print(f"… and {len(todo) - len(shown)} more")
    per_label = Counter(run.label for run in todo)
    console.print("per label: " + ", ".join(f"{k} {v}" for k, v in per_label.items()))
    console.print(f"points {len(prepared.points)}, repetitions {design.repetitions}, "
                  f"implementations {len(design.impls)}, sizes {len(design.workload.sizes)}; {estimate.text()}")


@impls_app.command("list")
def impls_list(design_dir: list[Path] = typer.Option([], "--dir", help="Extra folders holding <name>/impl.toml."),
               ) -> None:
    """Every implementation descriptor found, its capabilities and whether its binary exists."""
    from fecbench.runners.experiment.descriptor import discover, load_descriptor

    table = Table(title="implementations")
    for col in ("name", "workloads", "codes", "multipath", "args", "binary", "descriptor"):
        table.add_column(col, overflow="fold")
    for name, path in sorted(discover(design_dir).items()):
        try:
            d = load_descriptor(path)
        except UserError as exc:
            table.add_row(name, "-", "-", "-", "-", f"[red]invalid: {exc}[/]", str(path))
            continue
        found = d.binaries()
        built = all(found.values())
        table.add_row(name, ",".join(d.workloads), ",".join(d.codes), "yes" if d.multipath else "no",
                      ",".join(d.args), "[green]built[/]" if built else "[red]missing[/]", str(path))
    console.print(table)


@impls_app.command("check")
def impls_check(names: list[str] = typer.Argument(None, help="Implementations to check (default: all)."),
                build: bool = typer.Option(False, "--build", help="Run the descriptors' build commands first."),
                design_dir: list[Path] = typer.Option([], "--dir", help="Extra folders holding <name>/impl.toml."),
                ) -> None:
    """Validate descriptors, check binaries exist and answer their version command; exit 1 if one fails."""
    from fecbench.runners.experiment.descriptor import discover, load_descriptor

    known = discover(design_dir)
    selected = names or sorted(known)
    failed = 0
    for name in selected:
        if name not in known:
            raise UserError(f"unknown implementation {name!r} (known: {', '.join(sorted(known))})")
        try:
            d = load_descriptor(known[name])
            if build and d.build:
                _build(d)
            d.require_binaries()
            version = d.version()
        except UserError as exc:
            console.print(f"[red]✗ {name}[/]: {exc}")
            failed += 1
            continue
        console.print(f"[green]✓ {name}[/]: {version or '(no version output)'}")
    if failed:
        raise typer.Exit(1)


def _build(descriptor: Descriptor) -> None:
    """Run a descriptor's build commands in its folder."""
    import subprocess

    from fecbench.runners.experiment.argv_template import render

    for argv in descriptor.build:
        argv = render(argv, {"dir": str(descriptor.dir)}, {})
        if subprocess.run(argv, cwd=descriptor.dir, check=False).returncode != 0:
            raise UserError(f"{descriptor.path}: build command {' '.join(argv)} failed")


@dask_app.command("certs")
def dask_certs(out: Path = typer.Argument(..., help="A new folder for the CA and the host certificates."),
               scheduler: str = typer.Option(..., "--scheduler", help="The scheduler host's name or address "
                                             "(the interface the workers reach)."),
               worker: list[str] = typer.Option(..., "--worker", help="A worker host (repeat for each)."),
               port: int = typer.Option(8786, "--port", help="The scheduler's port."),
               days: int = typer.Option(365, "--days", help="Validity of the certificates."),
               ) -> None:
    """Make a campaign CA and one certificate per host; print the commands that start a TLS cluster."""
    from fecbench.runners.executors import dask_certs as certs

    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: expected 1 to 65535")
    files = certs.make(out, scheduler, worker, days)
    console.print(f"wrote {out}/ca.pem, ca.key and a certificate and key for {', '.join(files)}")
    print(certs.recipe(out, scheduler, worker, port))


@bench_app.command("campaign")
def bench_campaign(jobs: str = typer.Option("1,2,4,8,16,32", "--jobs", help="The numbers of networks to compare "
                                            "(include 1: speed-ups and comparisons are relative to it)."),
                   pilot: int = typer.Option(64, "--pilot", min=0, help="Runs of the projected design run with "
                                             "each N to project its wall time (0: no projection)."),
                   project: Path = typer.Option(Path("designs/networking2019-uniform.toml"), "--project",
                                                help="The design whose wall time is projected."),
                   pilot_min_jobs: int = typer.Option(1, "--pilot-min-jobs", min=1, help="Run the projected "
                                                      "design's pilot only with N at least this."),
                   speedup: bool = typer.Option(True, "--speedup/--no-speedup", help="Also run "
                                                "designs/bench-campaign.toml with each N (speed-up, accuracy)."),
                   json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
                   ) -> None:
    """Run designs/bench-campaign.toml with --jobs N for each N (speed-up, accuracy of the emulation and the
    endpoints) and a pilot of a full design with each N (its projected wall time where both bounds hold)."""
    from fecbench.inputs.errors import require_root
    from fecbench.runners.commands.campaign_bench import run_bench
    from fecbench.runners.executors.jobs import parse_jobs
    from fecbench.runners.experiment.prepare import prepare

    counts = [parse_jobs(part.strip()) for part in jobs.split(",") if part.strip()]
    if not counts:
        raise UserError("--jobs: give one or more numbers of networks, e.g. 1,2,4,8")
    prepare(project)  # a bad design is a user error before anything runs
    require_root("fecbench bench campaign")
    figures = run_bench(counts, pilot_runs=pilot, pilot_min_jobs=pilot_min_jobs, projected=project.resolve(),
                        speedup=speedup)
    if json_out:
        print(json.dumps(figures, indent=1))
        return
    _print_bench(figures)


@bench_app.command("capture")
def bench_capture(sample: int | None = typer.Option(None, "--sample", min=1, help="Only K of the bench design's "
                                                     "runs (the same K both times)."),
                  jobs: int = typer.Option(1, "--jobs", min=1, help="Networks at once, both times."),
                  design: Path = typer.Option(Path("designs/bench-campaign.toml"), "--design",
                                              help="The design run twice (capture off, then all)."),
                  json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
                  on: str = typer.Option("all", "--on", help="What the second campaign captures (a --capture "
                                         "value), e.g. pcap=all,qlog=off for packet captures alone."),
                  ) -> None:
    """Run a design with every capture off and with every capture on (qlog, keys, pcap), paired by run key:
    the median DCT ratio and the endpoints' timing with each (goal: ratio within 2 %, no run above the bound)."""
    from fecbench.inputs.errors import require_root
    from fecbench.runners.commands.capture_bench import run_capture_bench, text
    from fecbench.runners.experiment.checks import validate

    validate(design)
    require_root("fecbench bench capture")
    from fecbench.runners.experiment.capture import CapturePolicy, parse_option

    parse_option(on, CapturePolicy())   # a mistake in --on is a user error before anything runs
    figures = run_capture_bench(design.resolve(), sample=sample, jobs=jobs, on=on)
    print(json.dumps(figures, indent=1, default=str) if json_out else text(figures))


def _ms3(d: dict[str, Any] | None) -> str:
    d = d or {}
    return f"{d.get('p50')}/{d.get('p99')}/{d.get('max')} ({d.get('runs_above_bound')})"


def _print_bench(figures: dict[str, Any]) -> None:
    load = ", ".join(f"{v:g}" for v in figures["load_average"])
    table = Table(title=f"{figures['design']} on {figures['cores']} cores (load average after: {load})")
    for col in ("jobs", "runs", "wall s", "speed-up", "span s", "speed-up (span)", "in flight", "CPUs busy",
                "dct ÷ serial p10/p50/p90",
                f"run p99 lateness p50/p99/max ms (runs > {figures['lateness_bound_ms']:g})",
                "frames p99/p99.9/max µs (> bound)",
                f"run p99 endpoint wake-up p50/p99/max ms (runs > {figures['endpoint_bound_ms']:g})",
                "wake-ups p99/p99.9 ms", "statuses", f"{figures['full_design']} h"):
        table.add_column(col, justify="right", overflow="fold")
    for r in figures["results"]:
        frames = r["frame_lateness_us"] or {}
        ends = r.get("endpoint_p99_ms") or {}
        table.add_row(str(r["jobs"]), str(r["runs"]), f"{r['wall_s']:.1f}", str(r["speedup_wall"]),
                      f"{r['span_s']:.1f}", str(r["speedup_span"]), str(r["in_flight"]),
                      " ".join(f"{b:.0%}" for b in r["cpu_busy"]),
                      "/".join(str(v) for k, v in (r["dct_vs_serial"] or {}).items() if k != "runs") or "-",
                      _ms3(r["run_p99_lateness_ms"]),
                      f"{frames.get('p99_us')}/{frames.get('p99.9_us')}/{round(frames.get('max_us') or 0)} "
                      f"({frames.get('above_bound')} of {frames.get('frames')})",
                      _ms3(ends), f"{ends.get('every_p99')}/{ends.get('every_p99.9')}",
                      ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items())),
                      str(r["projected_full_design_h"]))
    if figures["results"]:
        console.print(table)
    for p in figures["pilots"]:
        late, frames = p["run_p99_lateness_ms"] or {}, p["frame_lateness_us"] or {}
        versus = p.get("versus_serial") or {}
        console.print(f"pilot of {figures['full_design']}: {p['runs']} of its {p['runs_in_design']} runs at --jobs "
                      f"{p['jobs']} ({', '.join(f'{k} {v}' for k, v in sorted(p['statuses'].items()))}) held their "
                      f"network {p['ratio']:.3f} × the model's estimate (s.e. {p['ratio_se']:.3f}); "
                      f"{p['steady_use']:.1%} of network time in runs; fidelity check "
                      f"{p['fidelity_per_check_s']} s → projected "
                      f"{p['projected_h']} h (95 %: {p['range_h'][0]}–{p['range_h'][1]} h), serial {p['serial_h']} h "
                      f"(model {p['model_total_h']} h); run p99 lateness p50/p99/max ms {_ms3(late)}, frames "
                      f"{frames.get('above_bound')} of {frames.get('frames')} above; endpoint p99 wake-up p50/p99/max "
                      f"ms {_ms3(p.get('endpoint_p99_ms'))}"
                      + (f"; {p['metric']} ÷ serial median {versus.get('median_ratio')}, Wilcoxon p "
                         f"{versus.get('wilcoxon_p')}" if versus else "")
                      + (": keeps the bounds" if p.get("keeps_bounds") else f": does not ({p.get('why')})")
                      + f"; CPUs busy {' '.join(f'{b:.0%}' for b in p['cpu_busy'])}")
    best = figures.get("projection")
    if figures["pilots"]:
        console.print(f"projection of {figures['full_design']}: " + (
            f"{best['projected_h']} h (95 %: {best['range_h'][0]}–{best['range_h'][1]} h) with {best['jobs']} "
            f"network(s), the largest N that keeps both bounds (serial {best['serial_h']} h)" if best else
            "no N kept both bounds"))


def register(app: typer.Typer) -> None:
    """Add `run`, `status`, `impls`, `dask` and `bench` to the root CLI."""
    from fecbench.cli.status import status

    app.command("run")(run)
    app.command("status")(status)
    app.add_typer(impls_app, name="impls")
    app.add_typer(dask_app, name="dask")
    app.add_typer(bench_app, name="bench")


