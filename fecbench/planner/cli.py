"""`fecbench plan`: make a design's points, print their quality; compare, augment, plot, bench."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

COMPARED = ("wsp", "lhs", "sobol", "random")


def plan(
    design: Path = typer.Argument(None, help="Design file (TOML) with a [space] table.", show_default=False),
    seed: int = typer.Option(None, "--seed", help="Design seed (default: [design] seed, else 0)."),
    paths: int = typer.Option(None, "--paths", help="Paths of a multipath design (default: from the "
                                                    "design's topology, else 1)."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: results/<design name>-plan/)."),
    compare: bool = typer.Option(False, "--compare", help="Also print the metrics of WSP, LHS, Sobol and "
                                                          "uniform random designs of the same size."),
    augment: Path = typer.Option(None, "--augment", help="Existing points (CSV) to extend with --add points."),
    add: int = typer.Option(None, "--add", help="Number of points --augment adds."),
    plot: bool = typer.Option(False, "--plot", help="Save a pair plot (pairs.png) beside the points."),
    bench: bool = typer.Option(False, "--bench", help="Benchmark WSP against LHS on the unit cube."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Make the design points (CSV + manifest JSON) and print their quality metrics."""
    from rich.console import Console

    from fecbench.errors import UserError

    console = Console()
    if bench:
        _bench(console, json_out)
        return
    if design is None:
        raise UserError("fecbench plan: give a design file (or --bench)")
    if (augment is None) != (add is None):
        raise UserError("--augment FILE and --add K go together")

    from fecbench.planner import augment as augment_mod
    from fecbench.planner import make_plan, parse_space
    from fecbench.specs import Section

    root = Section.load(design)
    # A whole design (a topology and implementations): validated as `run` validates it, and what each run
    # at each point will get is printed after the points (unless --seed, --paths or --augment change them).
    campaign = None
    if "impl" in root and "topology" in root.data.get("design", {}):
        from fecbench.runners.experiment.checks import validate

        campaign = validate(design, dry_run=True)
    header = root.section("design")
    name = header.get("name", str, design.stem)
    seed = header.get("seed", int, 0, min=0) if seed is None else seed
    paths = _paths(design, header) if paths is None else paths
    space = parse_space(root.section("space", required=True), paths=paths)

    with console.status("planning…", spinner="dots"):
        start = time.perf_counter()
        if augment is not None:
            result = augment_mod.augment_plan(space, augment, add, seed)
        else:
            result = make_plan(space, seed)
        seconds = time.perf_counter() - start
        comparison = _compare(space, seed, len(result.points)) if compare else None
    from fecbench.paths import check_output_dir

    folder = check_output_dir(out or Path("results") / (f"{name}-plan-augmented" if augment is not None
                                                        else f"{name}-plan"), "--out")
    csv_path, manifest_path = result.write(folder)
    figure = None
    if plot:
        from fecbench.planner.plot import pair_plot
        figure = pair_plot(result, folder / "pairs.png")

    if json_out:
        report: dict[str, Any] = {"points_csv": str(csv_path), "manifest": result.manifest,
                                  "seconds": round(seconds, 3)}
        if comparison is not None:
            report["compare"] = comparison
        if figure is not None:
            report["plot"] = str(figure)
        print(json.dumps(report, indent=2))
        return
    _print_points(console, result.points)
    _print_metrics(console, result.manifest, seconds)
    if comparison is not None:
        _print_comparison(console, comparison)
    if campaign is not None and augment is None and seed == campaign.design.seed and \
            paths == campaign.topology.paths:
        _print_applied(console, campaign)
    console.print(f"wrote {csv_path} and {manifest_path}" + (f" and {figure}" if figure else ""))


def _print_applied(console: Any, campaign: Any) -> None:
    """Per point, what every run will get (links, losses, workload), then each label's argv."""
    from rich.text import Text

    from fecbench.runners.experiment.applied import describe_impls, describe_point

    console.print("[bold]what each run gets[/] (values in the units the network applies; recorded with every run)")
    for point in sorted(campaign.points):
        for line in describe_point(campaign, point):
            console.print(Text(line))
    for line in describe_impls(campaign):
        console.print(Text(line))
    for warning in campaign.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"))


def _paths(design: Path, header: Any) -> int:
    """Number of paths of the design's topology, when it names one that exists; else 1."""
    topology = header.get("topology", str, None)
    if topology is None:
        return 1
    for base in (design.parent, Path.cwd()):
        candidate = base / topology
        if candidate.is_file():
            from fecbench.topologies import load_topology
            return load_topology(candidate).paths
    return 1


def _compare(space: Any, seed: int, size: int) -> dict[str, Any]:
    import dataclasses

    from fecbench.planner import make_plan

    sized = dataclasses.replace(space, points=size, list_file=None)
    out = {}
    for method in COMPARED:
        if space.mirror and size % 2:
            continue
        start = time.perf_counter()
        metrics = make_plan(sized, seed, method=method).manifest["metrics"]
        out[method] = {**_summary(metrics), "seconds": round(time.perf_counter() - start, 3)}
    return out


def _summary(metrics: dict[str, Any]) -> dict[str, Any]:
    coverage = metrics.get("coverage") or {}
    return {"maximin": metrics.get("maximin"), "cd2": metrics.get("cd2"), "fill": metrics.get("fill"),
            "min_coverage": min((c["covered"] for c in coverage.values()), default=None),
            "max_gap": max((c["max_gap"] for c in coverage.values() if "max_gap" in c), default=None)}


def _print_points(console: Any, frame: Any, limit: int = 30) -> None:
    from rich.table import Table

    table = Table(title=f"{len(frame)} design points")
    table.add_column("point", justify="right", overflow="fold")
    for column in frame.columns:
        table.add_column(str(column), justify="right", overflow="fold")
    for index, row in frame.head(limit).iterrows():
        table.add_row(str(index), *(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)
    if len(frame) > limit:
        console.print(f"… {len(frame) - limit} more rows in the CSV")


def _print_metrics(console: Any, manifest: dict[str, Any], seconds: float) -> None:
    from rich.table import Table

    table = Table(title=f"{manifest['method']} design, seed {manifest['seed']} ({seconds:.2f} s)")
    table.add_column("metric", overflow="fold")
    table.add_column("value", justify="right", overflow="fold")
    for key in ("points", "candidates", "d_min", "wsp_passes", "trimmed"):
        if manifest.get(key) is not None:
            table.add_row(key, str(manifest[key]))
    for key, value in _summary(manifest["metrics"]).items():
        table.add_row(key, str(value))
    table.add_row("space hash", manifest["space_hash"][:16])
    console.print(table)


def _print_comparison(console: Any, comparison: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="same size, other methods (maximin ↑, cd2 ↓, fill ↓)")
    table.add_column("method", overflow="fold")
    keys = ("maximin", "cd2", "fill", "min_coverage", "max_gap", "seconds")
    for key in keys:
        table.add_column(key, justify="right", overflow="fold")
    for method, row in comparison.items():
        table.add_row(method, *(str(row[k]) for k in keys))
    console.print(table)


def _bench(console: Any, json_out: bool) -> None:
    from fecbench.planner.bench import goals_met, run_bench

    with console.status("benchmarking WSP and LHS…", spinner="dots"):
        result = run_bench()
    if json_out:
        print(json.dumps(result, indent=2))
        return
    from rich.table import Table

    table = Table(title="WSP on the unit cube (LHS = scipy random-cd)")
    for column in ("case", "points", "maximin", "LHS maximin", "ratio", "seconds", "peak MB", "candidates"):
        table.add_column(column, justify="right", overflow="fold")
    for case, row in result.items():
        wsp = row["wsp"]
        table.add_row(case, str(wsp["points"]), str(wsp["maximin"]), str(row.get("lhs", {}).get("maximin", "")),
                      str(row.get("ratio", "")), str(wsp["seconds"]), str(wsp["peak_mb"]), str(wsp["candidates"]))
    console.print(table)
    for goal, ok in goals_met(result).items():
        console.print(f"{'met' if ok else 'MISSED'}: {goal}")
