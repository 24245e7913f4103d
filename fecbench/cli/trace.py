"""`fecbench trace show|convert`: the measured link traces a topology's trace links replay (traces/README.md)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from fecbench.inputs.errors import UserError

trace_app = typer.Typer(help="Packet-delivery traces (Mahimahi's format) for trace links: show one, or convert a "
                             "published series into one.", no_args_is_help=True)
console = Console()
FORMATS = ("auto", "mahimahi", "rate-csv", "ping")


@trace_app.command("show")
def show(path: Path = typer.Argument(..., help="A trace file in Mahimahi's format."),
         bin_ms: int = typer.Option(1000, "--bin-ms", min=1, help="Capacity per time bin of this many ms.")) -> None:
    """What a trace offers: its opportunities, loop, mean capacity, longest gap, sha256 and capacity per bin."""
    from fecbench.inputs.traces import load_trace

    trace = load_trace(path)
    console.print(f"{trace.path}\n  {len(trace.offsets_ms):,} opportunities of 1,504 bytes over a loop of "
                  f"{trace.period_ms / 1000:g} s: {trace.mean_mbit:.3f} Mbit/s on average; longest gap "
                  f"{trace.longest_wait_ms:,} ms\n  sha256 {trace.sha256}")
    table = Table("from (s)", "to (s)", "Mbit/s", title=f"capacity per {bin_ms:g} ms")
    for i, mbit in enumerate(trace.capacity_mbit(bin_ms)):
        table.add_row(f"{i * bin_ms / 1000:g}", f"{min((i + 1) * bin_ms, trace.period_ms) / 1000:g}", f"{mbit:.3f}")
    console.print(table)


@trace_app.command("convert")
def convert(source: Path = typer.Argument(..., help="A published series: a CSV of time and rate, or a Mahimahi trace."),
            output: Path = typer.Option(..., "-o", "--output", help="The trace file to write (Mahimahi's format)."),
            source_format: str = typer.Option("auto", "--from", help="rate-csv (a header such as time_s,mbit_s: the "
                                              "rate holds until the next row), mahimahi (checked and copied), ping (a "
                                              "`ping -D` log: a delay series of half each RTT), or auto (by the file's "
                                              "suffix: .csv is rate-csv, .log and .txt ping)."),
            force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
            losses_to: Path | None = typer.Option(None, "--losses-to", help="ping: also write its unanswered requests "
                                                  "as a link schedule of outages (a TOML file for [design] schedule)."),
            link: str | None = typer.Option(None, "--link", help="The link the --losses-to schedule cuts (a "
                                            "topology's link id, e.g. cell).")) -> None:
    """Write SOURCE as a packet-delivery trace for a topology's `trace = "..."`, or a ping log as a delay series for
    its `delays = "..."` (topologies/README.md)."""
    from fecbench.inputs.traces import (
        delays_from_ping,
        load_delays,
        load_trace,
        opportunities_from_rates,
        outages_from_ping,
        rate_series_from_csv,
    )

    if source_format not in FORMATS:
        raise UserError(f"--from {source_format!r}: one of {', '.join(FORMATS)}")
    if source_format == "auto" and losses_to is not None:
        source_format = "ping"
    if source_format == "auto":
        suffix = source.suffix.lower()
        source_format = "rate-csv" if suffix == ".csv" else "ping" if suffix in (".log", ".txt") else "mahimahi"
    if (losses_to is None) != (link is None) or (losses_to is not None and source_format not in ("ping", "auto")):
        raise UserError("--losses-to and --link go together, with a ping log (--from ping)")
    for target in (output, losses_to):
        if target is not None and target.exists() and not force:
            raise UserError(f"{target} exists: choose another name or pass --force")
    try:
        text = source.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {source}: {exc}") from None
    if source_format == "ping":
        offsets, delays, missing = delays_from_ping(text, str(source))
        output.write_text("".join(f"{ms} {delay:g}\n" for ms, delay in zip(offsets, delays, strict=True)))
        series = load_delays(output)
        low, high = series.span_ms
        console.print(f"wrote {output}: a delay series of {len(offsets) - 1:,} steps over "
                      f"{series.period_ms / 1000:g} s, one-way delay {low:g}–{high:g} ms (half each RTT), sha256 "
                      f"{series.sha256}" + (f"; {missing} request(s) got no reply" if missing else ""))
        if losses_to is not None and link is not None:
            _write_outages(losses_to, link, source, outages_from_ping(text, str(source)))
        return
    if source_format == "rate-csv":
        offsets = opportunities_from_rates(*rate_series_from_csv(text, str(source)))
    else:
        offsets = list(load_trace(source).offsets_ms)
    output.write_text("".join(f"{ms}\n" for ms in offsets))
    trace = load_trace(output)
    console.print(f"wrote {output}: {len(trace.offsets_ms):,} opportunities, loop {trace.period_ms / 1000:g} s, "
                  f"{trace.mean_mbit:.3f} Mbit/s on average, sha256 {trace.sha256}")


def _write_outages(path: Path, link: str, source: Path, outages: list[tuple[float, float]]) -> None:
    """A link schedule (fecbench/emulation/schedule.py) cutting `link` both ways at each outage, checked by loading."""
    from fecbench.emulation.schedule import load_schedule

    lines = [f"# The unanswered requests of {source.name} (fecbench trace convert --losses-to): n in a row are an",
             "# outage of n ping intervals from the first one's sending; time 0 is its delay series' (the first",
             "# reply), which a schedule counts from the run's client start.", "",
             "[schedule]", f'description = "losses of {source.name}: {len(outages)} outage(s)"']
    for at_s, length_ms in outages:
        lines += ["", "[[change]]", f'link = "{link}"', 'direction = "both"', f"at_s = {at_s:g}",
                  f"outage_ms = {length_ms:g}"]
    path.write_text("\n".join(lines) + "\n")
    if outages:
        load_schedule(path)
    console.print(f"wrote {path}: {len(outages)} outage(s) on link {link}, "
                  f"{sum(length for _, length in outages) / 1000:g} s in all")
