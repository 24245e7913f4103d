"""The `fecbench` command: one entry point; each component contributes its sub-commands."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from fecbench.cli.ab import ab as ab_command
from fecbench.cli.bench import bench_verdicts as bench_verdicts_command
from fecbench.cli.bench import bench_worlds as bench_worlds_command
from fecbench.cli.compare import compare_command
from fecbench.cli.dropper import app as dropper_app
from fecbench.cli.plan import plan as plan_command
from fecbench.cli.report import bench_backends as bench_backends_command
from fecbench.cli.report import explain as explain_command
from fecbench.cli.report import export as export_command
from fecbench.cli.report import report as report_command
from fecbench.cli.reproduce import reproduce as reproduce_command
from fecbench.cli.run import bench_app
from fecbench.cli.run import register as register_runner_commands
from fecbench.cli.topo import link_app, topo_app
from fecbench.cli.trace import trace_app
from fecbench.inputs.errors import UserError
from fecbench.records.provenance import version_text

app = typer.Typer(
    help="fecbench: emulate networks, inject seeded losses, run FEC-enabled QUIC, record and analyse runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Help as plain text: Rich markup would swallow square-bracketed words of help texts ("[space]").
    rich_markup_mode=None,
)
console = Console()


def _version(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print version and git SHA, then exit.")) -> None:
    pass


@app.command("doctor")
def doctor_command(json_out: bool = typer.Option(False, "--json", help="Print the checks as JSON.")) -> None:
    """What this machine can do, and how to fix what it cannot."""
    from fecbench.cli import doctor as doctor_mod

    raise typer.Exit(doctor_mod.main(json_out))


@app.command()
def clean(all_owners: bool = typer.Option(False, "--include-live",
                                          help="Also clean up after fecbench processes still running.")) -> None:
    """Remove what a crashed or killed fecbench process left behind (its own resources only)."""
    from fecbench.host import cleanup
    from fecbench.inputs.errors import require_root

    require_root("fecbench clean")
    removed = cleanup.clean(include_live=all_owners)
    for entry in removed:
        what = f" {entry['what']}" if entry.get("kind") == "process" and entry.get("what") else ""
        console.print(f"removed {entry['kind']} {entry['name']}{what} (left by pid {entry['owner']})",
                      markup=False, highlight=False)
    console.print(f"{len(removed)} leftover resource(s) removed")


# Component sub-commands, in the order of the CLI surface in README.md. Each component keeps its heavy imports
# inside its command functions, so `fecbench --help` stays fast.
app.command("plan")(plan_command)
register_runner_commands(app)  # run, status, impls
app.command("compare")(compare_command)  # two campaigns by run key (many hosts against one)
app.command("ab")(ab_command)            # two builds interleaved on this machine, then compared
bench_app.command("verdicts")(bench_verdicts_command)  # reproduce's benchmark, beside `bench campaign`
bench_app.command("worlds")(bench_worlds_command)      # the verdicts on synthetic worlds with a known truth
bench_app.command("backends")(bench_backends_command)  # analysis' backend comparison
app.command("report")(report_command)
app.command("export")(export_command)
app.command("explain")(explain_command)
app.command("reproduce")(reproduce_command)
app.add_typer(dropper_app, name="dropper")
app.add_typer(topo_app, name="topo")
app.add_typer(link_app, name="link")
app.add_typer(trace_app, name="trace")


def check_environment() -> None:
    """The accuracy bounds set in the environment, checked before any command uses them deep in a campaign."""
    from fecbench.timekeeping import endpoint_timing, lateness

    lateness.bound_ms()
    endpoint_timing.bound_ms()


def main() -> None:
    # Typer's standalone mode handles usage errors (exit 2), --help and typer.Exit; user errors raised by
    # commands come out here and become one line on stderr with exit status 2.
    # Every process a command starts (Dask workers included) carries this process's marker, for `clean`.
    from fecbench.host import marks

    marks.mark_owner()
    try:
        check_environment()
        app()
    except UserError as exc:
        print(f"fecbench: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("fecbench: interrupted", file=sys.stderr)
        sys.exit(130)
