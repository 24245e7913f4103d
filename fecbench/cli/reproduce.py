"""CLI of ``fecbench reproduce``: list the packs, or run one within a budget and print its verdicts."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from fecbench.cli import options
from fecbench.inputs.errors import UserError
from fecbench.runners.executors.progress import RichReporter

console = Console()
VERDICT_STYLE = {"holds": "green", "fails": "red", "at the threshold": "blue", "inconclusive": "yellow",
                 "not judged": "magenta", "not runnable here": "dim"}


def reproduce(
    pack: str = typer.Argument(None, help="The pack (a folder of reproduce/); none: list the packs."),
    budget: str = typer.Option(None, "--budget", help="Wall time for the whole command, e.g. 30m, 90s, 2h "
                               "(runs, verdicts and page); default 30m."),
    full: bool = typer.Option(False, "--full", help="Every run of every design of the pack (no budget)."),
    jobs: str = typer.Option(None, "--jobs", help="Networks at once on this machine (1-32; default 1), or auto "
                             "(as `fecbench run --jobs auto`: the serial pilot's runs are kept; this machine's "
                             "calibration for the workload class is reused within its age once a short paired "
                             "pilot confirms it)."),
    recalibrate: bool = options.RECALIBRATE,
    dask: str = options.DASK,
    tls_ca_file: Path = options.TLS_CA_FILE,
    tls_cert: Path = options.TLS_CERT,
    tls_key: Path = options.TLS_KEY,
    insecure: bool = options.INSECURE,
    dashboard: bool = options.DASHBOARD,
    profile: list[str] = typer.Option(None, "--profile", help="A stack profile of the pack (repeat to compare "
                                      "them side by side; default: the pack's default profile)."),
    results: Path = typer.Option(None, "--results", help="Where the packs' designs, databases and pages go "
                                 "(default results/reproduce)."),
    no_run: bool = typer.Option(False, "--no-run", help="Run nothing: the verdicts of what the databases hold."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the runs the budget buys; run nothing."),
    link_backend: str = typer.Option(None, "--link-backend", help="netem | delayline (default: probe)."),
    error: str = typer.Option(None, "--error", help="How the page's verdicts share its 5 % error level: fwer "
                              "(family-wise: the chance of any false verdict, Bonferroni) or fdr (false-discovery: "
                              "the expected share of false verdicts among those shown, Benjamini–Yekutieli on each "
                              "claim's anytime p-value); default: the pack's rule and reason (pack.toml `error`)."),
    fidelity: bool = typer.Option(False, "--fidelity", help="Print every pack's fidelity table (Markdown: each "
                                  "claim's quote, what is judged, its reading, the setup it is judged on) and exit."),
    claims: list[str] = typer.Option(None, "--claims", help="Judge only these claims of the pack (repeat; each a "
                                     "claim id or a shell-style pattern such as 'fig5-*'): only they take runs and "
                                     "verdicts, and the page's error level is split over them alone (the page says "
                                     "which). Default: every claim."),
) -> None:
    """Re-run a seed paper's experiments and say, claim by claim, whether they hold."""
    started = time.monotonic()
    from fecbench.verdicts import pack as pack_mod

    if claims and pack is None:
        raise UserError("--claims chooses claims of a pack: name the pack (fecbench reproduce PACK --claims ID)")
    if fidelity:
        _fidelity(pack_mod, pack, claims or [])
        return
    if pack is None:
        _list(pack_mod)
        return
    from fecbench.verdicts import budgeting, profiles, session

    loaded = pack_mod.load_pack(pack).subset(claims or [])
    error = loaded.error_rule(options.error_rule(error))[0]
    names = list(dict.fromkeys(profile)) if profile else [loaded.default_profile]
    for name in names:
        loaded.profile(name)
    if full and budget is not None:
        raise UserError("--budget and --full: choose one")
    seconds = None if full else budgeting.parse_budget(budget or "30m")
    from fecbench.runners.executors import Machine

    count, security = options.machine_options(
        link_backend=link_backend, jobs=jobs, recalibrate=recalibrate, dask=dask, tls_ca_file=tls_ca_file,
        tls_cert=tls_cert, tls_key=tls_key, insecure=insecure, dashboard=dashboard, reporter=RichReporter(console))
    machine = Machine(jobs=count, link_backend=link_backend, dask=dask, security=security, dashboard=dashboard,
                        recalibrate=recalibrate)
    from fecbench.host.paths import check_output_dir

    root = check_output_dir(results or profiles.DEFAULT_ROOT, "--results")
    if dry_run:
        _dry_run(loaded, session.first_batch(loaded, names, seconds, full, root, error), seconds)
        return
    if not no_run:
        from fecbench.host.affinity import confine_harness
        from fecbench.inputs.errors import require_root

        require_root("fecbench reproduce")
        warning = confine_harness()
        if warning:
            console.print(f"[yellow]warning: {warning}[/]")
    outcome = session.reproduce(loaded, names, budget=seconds, full=full, machine=machine, root=root,
                                reporter=RichReporter(console), run=not no_run, started=started, rule=error)
    _print_verdicts(outcome)


def _fidelity(pack_mod, pack: str | None, claims: list[str]) -> None:
    """--fidelity: the pack's table (of its chosen claims), or every pack's that cites papers."""
    from fecbench.verdicts.validation.fidelity import fidelity_table

    packs = [pack_mod.load_pack(name).subset(claims) for name in ([pack] if pack else pack_mod.pack_names())]
    print(fidelity_table([p for p in packs if pack or p.cites_papers]))


def _list(pack_mod) -> None:
    table = Table(title="reproduction packs (fecbench reproduce PACK)")
    for col in ("pack", "title", "designs", "claims", "profiles (default first)"):
        table.add_column(col)
    for name in pack_mod.pack_names():
        pack = pack_mod.load_pack(name)
        order = [pack.default_profile] + [p for p in pack.profiles if p != pack.default_profile]
        designs = ", ".join(a if r.present else f"{a} (to come)" for a, r in pack.designs.items())
        table.add_row(name + (" (CI)" if pack.smoke else ""), pack.title, designs, str(len(pack.claims)),
                      ", ".join(order))
    console.print(table)


def _dry_run(pack, batch, seconds: float | None) -> None:
    """--full: every run the designs list; a budget: the first batch the adaptive allocation would start with
    (the next ones depend on the verdicts its runs give); per claim, what a verdict would still take."""
    selection, campaigns = batch.selection, batch.campaigns
    chosen = f" ({pack.chosen_text()})" if pack.chosen else ""
    if batch.capacity is None:
        title = f"{pack.name}{chosen}: the full pack"
    else:
        title = (f"{pack.name}{chosen}: the first batch of a budget of {seconds / 60:g} min ({batch.capacity / 60:.1f} "
                 "min of runs; the next batches follow the verdicts)")
    table = Table(title=title, caption="runs: what the batch starts; a run it flags is run again at its end (up to 3 "
                                       "rounds): at the campaign's measured re-run rate, about the next column")
    for col in ("profile", "design", "runs", "with re-runs (measured rate)", "estimated min", "duration factor"):
        table.add_column(col, justify="right")
    for key, runs in selection.runs.items():
        factor = campaigns[key].rerun_factor()
        table.add_row(key[0], key[1], str(len(runs)), f"{len(runs) * factor:.0f} (×{factor:.2f})",
                      f"{selection.seconds[key] / 60:.1f}", f"{campaigns[key].factor:.2f}")
    console.print(table)
    claims = Table(title="per claim", caption=TO_A_VERDICT)
    for col in ("claim", "draws", "estimated min", "no runs because", "draws to a verdict",
                "expected min to a verdict"):
        claims.add_column(col, justify="right")
    for claim in pack.claims:
        claims.add_row(claim.id, str(selection.claim_draws.get(claim.id, 0)),
                       f"{selection.claim_seconds.get(claim.id, 0.0) / 60:.1f}", batch.idle.get(claim.id, ""),
                       *to_a_verdict(claim, batch.verdicts, campaigns))
    console.print(claims)


#: How the per-claim table's last two columns read.
TO_A_VERDICT = ("draws, estimated min: what this batch gives the claim; to a verdict: what it would still take in all, "
                "at the measured durations and re-run rate, in machine time (one network at a time; with --jobs "
                "N, up to N times less wall time): ≈ from its interval's narrowing, ≥ a lower bound (every "
                "observation agreeing; nothing measured yet)")


def to_a_verdict(claim, verdicts, campaigns) -> tuple[str, str]:
    """The draws and machine minutes a verdict on ``claim`` would still take (``allocate.projection``, the number
    an undecided verdict's note gives): "≥" a lower bound, "≈" an estimate; a decided claim why it takes none."""
    from fecbench.verdicts import allocate

    mine = [v for v in verdicts if v.claim.id == claim.id]
    if mine and all(v.decided for v in mine):
        return "–", "; ".join(sorted({v.stopped for v in mine}))
    need = allocate.projection(claim, mine, campaigns)
    if need is None:
        return "?", "no estimate (a value on a verdict's boundary, or no bound)"
    draws, seconds, at_least = need
    sign = "≥" if at_least else "≈"
    return f"{sign} {draws:.0f}", f"{sign} {_minutes(seconds)}"


def _minutes(seconds: float) -> str:
    """Minutes that never round a need to nothing (two significant digits below 0.1)."""
    minutes = seconds / 60
    return f"{minutes:.0f}" if minutes >= 10 else f"{minutes:.1f}" if minutes >= 0.1 else f"{minutes:.2g}"


def _print_verdicts(outcome) -> None:
    from fecbench.verdicts.evaluate import expectation, paper_text

    by = {(v.claim.id, v.profile): v for v in outcome.verdicts}
    table = Table(title=f"{outcome.pack.title}: verdicts", show_lines=False)
    table.add_column("claim")
    table.add_column("expected")
    table.add_column("the paper's value")
    for name in outcome.profiles:
        table.add_column(name)
    for claim in outcome.pack.claims:
        cells = []
        for name in outcome.profiles:
            v = by[(claim.id, name)]
            cells.append(f"[{VERDICT_STYLE[v.verdict]}]{v.verdict}[/] {v.interval_text()}\n[dim]stopped: {v.stopped}, "
                         f"{v.looks} look(s)[/]" + (f"\n[dim]{v.reason}[/]" if v.verdict != "holds" else ""))
        table.add_row(claim.id, expectation(claim), paper_text(claim), *cells)
    console.print(table)
    if outcome.pack.chosen:
        console.print(f"[bold]a subset:[/] {outcome.pack.chosen_text()}; the error level is split over these claims "
                      "alone (the page says so)")
    counts: dict[str, int] = {}
    for v in outcome.verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    console.print(", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + f" in {outcome.seconds / 60:.1f} min"
                  + (f" (budget {outcome.budget / 60:g} min)" if outcome.budget else ""))
    for r in outcome.ran:
        if r.out_of_time or r.stopped:
            console.print(f"{r.target.profile}/{r.target.alias}: {r.out_of_time} run(s) left pending; "
                          f"resume with {r.target.resume_command()}")
    console.print(f"page: {outcome.html}")
