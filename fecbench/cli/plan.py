"""`fecbench plan`: make a design's points, print their quality; compare, augment, plot, bench."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import typer

COMPARED = ("wsp-lhs", "wsp", "lhs", "sobol", "random")


def plan(
    design: Path = typer.Argument(None, help="Design file (TOML) with a [space] table.", show_default=False),
    seed: int = typer.Option(None, "--seed", help="Design seed (default: [design] seed, else 0)."),
    paths: int = typer.Option(None, "--paths", help="Paths of a multipath design (default: from the "
                                                    "design's topology, else 1)."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: results/<design name>-plan/ in the "
                             "current folder, where `fecbench run` puts results/<design name>.sqlite; never the "
                             "checkout's unless you are in it)."),
    compare: bool = typer.Option(False, "--compare", help="Also print the metrics of wsp-lhs, WSP, LHS, Sobol "
                                                          "and uniform random designs of the same size."),
    augment: Path = typer.Option(None, "--augment", help="Existing points (CSV) to extend with --add points."),
    add: int = typer.Option(None, "--add", help="Number of points --augment adds."),
    plot: bool = typer.Option(False, "--plot", help="Save a plot of every factor's and every pair's projection "
                                                    "(pairs.png) beside the points."),
    bench: bool = typer.Option(False, "--bench", help="Benchmark the methods (wsp-lhs, WSP, LHS, Sobol) on the "
                                                      "unit cube, and WSP's speed and memory."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Make the design points (CSV + manifest JSON) and print their quality metrics."""
    from rich.console import Console

    from fecbench.inputs.errors import UserError

    console = Console()
    if bench:
        _bench(console, json_out)
        return
    if design is None:
        raise UserError("fecbench plan: give a design file (or --bench)")
    if (augment is None) != (add is None):
        raise UserError("--augment FILE and --add K go together")

    from fecbench.inputs.specs import Section
    from fecbench.planner import parse_space

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

    units = _network_units(campaign, space) if campaign is not None else None
    with console.status("planning…", spinner="dots"):
        result, seconds = _make_points(space, seed, augment, add, units)
        comparison = _compare(space, seed, len(result.points)) if compare else None
    from fecbench.host.paths import check_output_dir

    folder = check_output_dir(out or Path("results") / (f"{name}-plan-augmented" if augment is not None
                                                        else f"{name}-plan"), "--out")
    csv_path, manifest_path = result.write(folder)
    figure = None
    if plot:
        from fecbench.planner.plot import pair_plot
        figure = pair_plot(result, folder / "pairs.png")

    if json_out:
        _print_json(result, csv_path, seconds, comparison, figure)
        return
    _print_points(console, result.points)
    _print_metrics(console, result.manifest, seconds)
    if comparison is not None:
        _print_comparison(console, comparison)
    if campaign is not None and augment is None and seed == campaign.design.seed and \
            paths == campaign.topology.paths:
        _print_applied(console, campaign)
        _print_hosts(console, campaign)
    console.print(f"wrote {csv_path.resolve()} and {manifest_path.name}" + (f" and {figure.name}" if figure else "")
                  + ("" if out else " (the default folder: results/ in the current folder; --out to choose)"))


def _make_points(space: Any, seed: int, augment: Path | None, add: int | None, units: Any) -> tuple[Any, float]:
    """The plan (made, or --augment's points extended by --add), in the network's units when a campaign gives
    them, and the seconds its making took."""
    from fecbench.planner import augment as augment_mod
    from fecbench.planner import make_plan

    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        if augment is not None:
            existing = _written_units(augment, units[0], Path(scratch)) if units else augment
            result = augment_mod.augment_plan(space, existing, add, seed)
            result.manifest["augmented_from"] = str(augment)
        else:
            result = make_plan(space, seed)
        seconds = time.perf_counter() - start
        if units is not None:   # points.csv and the manifest in the units the network applies
            result = result.in_units(*units)
    return result, seconds


def _print_json(result: Any, csv_path: Path, seconds: float, comparison: Any, figure: Path | None) -> None:
    report: dict[str, Any] = {"points_csv": str(csv_path), "manifest": result.manifest, "seconds": round(seconds, 3)}
    if comparison is not None:
        report["compare"] = comparison
    if figure is not None:
        report["plot"] = str(figure)
    print(json.dumps(report, indent=2))


def _print_hosts(console: Any, campaign: Any) -> None:
    """The campaign's machine time here and its wall time on H hosts like this one (designs/README.md, "Many
    hosts"), from this machine's measured run durations (its results databases, the design's own first)."""
    from rich.text import Text

    from fecbench.runners.experiment.estimate import hosts_projection, hosts_text

    db = campaign.design.default_db()
    machine_s, walls, per_host = hosts_projection(campaign, campaign.runs, None, db)
    console.print(Text(f"machine time: {machine_s / 3600:.2f} h for {len(campaign.runs)} run(s) at this machine's "
                       f"measured durations; {per_host} network(s) per host: " + hosts_text(walls)))


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


def _network_units(campaign: Any, space: Any) -> tuple[dict[str, float], dict[str, str]]:
    """Per factor of `space`, the multiplier to the unit the network applies and that unit's name, as the
    campaign's validation found them (by declared name: --paths may expand a factor otherwise)."""
    from fecbench.runners.experiment.factor_uses import check_and_scale, uses

    scales = check_and_scale(campaign.design, campaign.topology, campaign.space)
    readers = uses(campaign.design, campaign.topology, campaign.space)
    by_base: dict[str, tuple[float, str]] = {}
    for f in campaign.space.factors:
        unit = next((use.quantity.unit for use in readers[f.name] if use.quantity.unit), f.unit)
        by_base[f.base] = (scales.get(f.name, 1.0), unit)
    known = [f for f in space.factors if f.base in by_base]
    return ({f.name: by_base[f.base][0] for f in known}, {f.name: by_base[f.base][1] for f in known})


def _written_units(csv: Path, scales: dict[str, float], folder: Path) -> Path:
    """A copy of points to augment, written by `plan` in the network's units, back in the units the design
    writes (9 significant digits: the values planned); the file itself when nothing was converted."""
    if not csv.is_file() or all(scale == 1.0 for scale in scales.values()):
        return csv
    import numpy as np
    import pandas as pd

    from fecbench.planner import portable

    table = pd.read_csv(csv, keep_default_na=False, dtype=str)
    for name, scale in scales.items():
        if scale != 1.0 and name in table.columns:
            numbers = np.array([float(v) for v in table[name]]) / scale
            table[name] = [repr(float(v)) for v in portable.round_significant(numbers)]
    back = folder / csv.name
    table.to_csv(back, index=False, lineterminator="\n")
    return back


def _paths(design: Path, header: Any) -> int:
    """Number of paths of the design's topology, when it names one that exists; else 1."""
    topology = header.get("topology", str, None)
    if topology is None:
        return 1
    for base in (design.parent, Path.cwd()):
        candidate = base / topology
        if candidate.is_file():
            from fecbench.emulation import load_topology
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
    projections = metrics.get("projections") or {}
    return {"maximin": metrics.get("maximin"), "cd2": metrics.get("cd2"), "fill": metrics.get("fill"),
            "min_coverage": min((c["covered"] for c in coverage.values()), default=None),
            "worst_gap": projections.get("worst_gap"), "worst_2d": projections.get("worst_2d_maximin"),
            "maxpro": projections.get("maxpro")}


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
    for key in ("points", "candidates", "d_min", "wsp_passes", "trimmed", "wsp_d_min", "exchanges", "moves",
                "relaxed"):
        if manifest.get(key) is not None:
            table.add_row(key, str(manifest[key]))
    projections = manifest["metrics"].get("projections") or {}
    for key, value in _summary(manifest["metrics"]).items():
        where = {"worst_gap": projections.get("worst_gap_factor"), "worst_2d": projections.get("worst_2d_pair")}
        table.add_row(key, str(value) + (f" ({_names(where[key])})" if where.get(key) else ""))
    table.add_row("space hash", manifest["space_hash"][:16])
    console.print(table)
    from rich.text import Text

    for warning in manifest["metrics"].get("warnings", []):
        console.print(Text(f"warning: {warning}", style="yellow"))


def _names(where: Any) -> str:
    return " × ".join(where) if isinstance(where, list) else str(where)


def _print_comparison(console: Any, comparison: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="same size, other methods (maximin ↑, cd2 ↓, fill ↓, worst_gap ↓, worst_2d ↑, maxpro ↓)")
    table.add_column("method", no_wrap=True, min_width=7)
    keys = ("maximin", "cd2", "fill", "min_coverage", "worst_gap", "worst_2d", "maxpro", "seconds")
    for key in keys:
        table.add_column(key, justify="right", overflow="fold")
    for method, row in comparison.items():
        table.add_row(method, *(str(row[k]) for k in keys))
    console.print(table)


def _bench(console: Any, json_out: bool) -> None:
    from fecbench.planner.bench import goals_met, run_bench, run_method_bench

    with console.status("benchmarking the methods, then WSP's speed and memory…", spinner="dots"):
        methods = run_method_bench()
        result = run_bench()
    if json_out:
        print(json.dumps({"methods": methods, "wsp": result}, indent=2))
        return
    _print_method_bench(console, methods)
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


def _print_method_bench(console: Any, methods: dict[str, Any]) -> None:
    """The methods compared at n = 130 (ratios against WSP and LHS of the same run), the small designs, the goals."""
    from rich.table import Table

    table = Table(title="methods on the unit cube, seed 1 (maximin ↑, worst gap ↓, worst 2-D ↑, CD2 ↓, MaxPro ↓)")
    for column in ("case", "method", "maximin", "× WSP", "worst gap", "× LHS", "worst 2-D", "CD2", "× LHS ",
                   "MaxPro", "seconds"):
        table.add_column(column, justify="right", overflow="fold")
    for case, rows in methods["n130"].items():
        wsp, lhs = rows["wsp"], rows["lhs"]
        for method, row in rows.items():
            table.add_row(case, method, str(row["maximin"]), f"{row['maximin'] / wsp['maximin']:.3f}",
                          str(row["worst_gap"]), f"{row['worst_gap'] / lhs['worst_gap']:.2f}", str(row["worst_2d"]),
                          str(row["cd2"]), f"{row['cd2'] / lhs['cd2']:.2f}", str(row["maxpro"]), str(row["seconds"]))
    console.print(table)
    if not any(m.startswith("maxpro package") for rows in methods["n130"].values() for m in rows):
        console.print("(the PyPI maxpro package is not installed here: its rows are left out)")
    small = methods["small"]
    worst = min(small, key=lambda r: r["ratio"])
    console.print(f"small designs (n {', '.join(str(n) for n in sorted({r['points'] for r in small}))} × d "
                  f"{', '.join(str(d) for d in sorted({r['dims'] for r in small}))}): wsp-lhs's maximin ≥ LHS's in "
                  f"{sum(r['wsp-lhs'] >= r['lhs'] for r in small)} of {len(small)} cases; least ratio "
                  f"{worst['ratio']} (n = {worst['points']}, d = {worst['dims']})")
    for goal, ok in methods["goals"].items():
        console.print(f"{'met' if ok else 'MISSED'}: {goal}")
