"""`fecbench topo show|check` and `fecbench link bench`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from fecbench.inputs.errors import UserError

topo_app = typer.Typer(help="Topology specs: show one with values, or build it and check its fidelity.",
                       no_args_is_help=True)
link_app = typer.Typer(help="Accuracy and throughput of the link emulation.", no_args_is_help=True)
console = Console()

SET_HELP = "A factor value, e.g. --set bw=10 --set owd=50 --set queue=50ms (repeatable)."
BACKEND_HELP = "Link shaping backend: netem or delayline (default: $FECBENCH_LINK_BACKEND, else netem if present)."
PATHS_HELP = "Number of paths of an N-path spec (overrides [topology] paths)."


def parse_sets(items: list[str]) -> dict[str, Any]:
    """`k=v` pairs: numbers become floats, anything else (e.g. "50ms") stays a string."""
    values: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise UserError(f"--set {item!r}: expected NAME=VALUE, e.g. --set bw=10")
        try:
            values[name.strip()] = float(text)
        except ValueError:
            values[name.strip()] = text.strip()
    return values


def _load(spec: str, sets: list[str], paths: int | None):
    from fecbench.emulation.topology_file import load_topology

    topo = load_topology(spec, paths=paths)
    values = parse_sets(sets)
    topo.check_values(values, strict=True)
    return topo, values


def _show_backend(requested: str | None, trace_link: str | None) -> str:
    """The backend `show` describes; without root netem cannot be probed, so delayline is assumed (and where a
    trace link needs the delay element)."""
    from fecbench.emulation.backend import BACKENDS, ENV_VAR, netem_available, select_backend

    choice = requested or os.environ.get(ENV_VAR)
    if choice:
        if choice not in BACKENDS:
            raise UserError(f"unknown link backend {choice!r} (allowed: netem, delayline)")
        if trace_link and choice == "netem":
            select_backend("netem", trace_link)   # refuses, saying why
        return choice
    return "netem" if os.geteuid() == 0 and netem_available() and not trace_link else "delayline"


@topo_app.command("show")
def show(spec: str = typer.Argument(..., help="Topology spec (TOML)."),
         set_: list[str] = typer.Option([], "--set", help=SET_HELP),
         paths: int | None = typer.Option(None, "--paths", help=PATHS_HELP),
         link_backend: str | None = typer.Option(None, "--link-backend", help=BACKEND_HELP),
         json_out: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Nodes, links, addresses, routes and shaping commands of SPEC with these values (no root needed)."""
    from fecbench.emulation.layout import describe, make_layout
    from fecbench.emulation.spec import first_trace_link

    topo, values = _load(spec, set_, paths)
    resolved = topo.resolve(values)
    backend = _show_backend(link_backend, first_trace_link(resolved))
    info = describe(topo, make_layout(topo, "fbX"), resolved, backend)
    info["factors"] = {name: topo.value_of(name, values) for name in sorted(topo.factors())}
    if json_out:
        print(json.dumps(info, indent=1))
        return
    console.print(f"[bold]{info['name']}[/bold] ({info['file']}): {topo.description}")
    console.print(f"backend {backend}; {topo.paths} path(s); factors: "
                  + ", ".join(f"{k}={v}" for k, v in info["factors"].items()))
    console.print(f"client addresses {', '.join(info['client_addresses'])}; server {info['server_address']}")
    nodes = Table("node", "role", "interfaces", "routes / rules", title="nodes (interface names: fbX = build prefix)")
    for n in info["nodes"]:
        ifaces = "\n".join(f"{i['name']} {i['address'] or ''} ({i['link']})" for i in n["interfaces"])
        nodes.add_row(n["name"], n["role"], ifaces, "\n".join(n["routes"] + [f"rule {r}" for r in n["rules"]]))
    console.print(nodes)
    links = Table("link", "ends", "direction", "bw Mbit/s", "burst B", "owd ms", "queue", "egress", title="links")
    commands = []
    for link in info["links"]:
        ends = " — ".join(link["ends"]) + (" (lossy)" if link["loss"] else "")
        if not link["shaped"]:
            links.add_row(link["id"], ends, "both", "-", "-", "-", "-", "plain veth")
            continue
        for d in ("forward", "reverse"):
            s = link[d]
            burst = "-" if s["burst_bytes"] is None else f"{s['burst_bytes']:,}"
            rate = f"trace {Path(s['trace']).name}" if s.get("trace") else str(s["bw_mbit"])
            queue = f"{s['queue']:,} {s['queue_unit']}" if s["queue"] or not s.get("trace") else "unlimited"
            links.add_row(link["id"], ends, d, rate, burst, f"{s['owd_ms']:g}", queue,
                          f"{link['delay_node']}:{s['egress']}")
            commands += [f"{link['delay_node']}: {c}" for c in s["commands"]]
    console.print(links)
    console.print("[bold]shaping commands[/bold] (per direction: dropper on the sending router's egress "
                  "→ delay → tbf and its queue on the delay node's egress):")
    for line in commands:
        console.print("  " + line, soft_wrap=True, highlight=False)


@topo_app.command("check")
def check(spec: str = typer.Argument(..., help="Topology spec (TOML)."),
          set_: list[str] = typer.Option([], "--set", help=SET_HELP),
          paths: int | None = typer.Option(None, "--paths", help=PATHS_HELP),
          link_backend: str | None = typer.Option(None, "--link-backend", help=BACKEND_HELP),
          rate: bool = typer.Option(False, "--rate", help="Also probe each path's rate (1 s of UDP)."),
          json_out: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Build SPEC, compare measured and configured RTT (and rate) per path, tear it down."""
    from fecbench.emulation.network import Network
    from fecbench.inputs.errors import require_root

    require_root("fecbench topo check")
    topo, values = _load(spec, set_, paths)
    with console.status("building the network…", spinner="dots"):
        net = Network(topo, values, backend=link_backend)
        with net:
            results = net.fidelity(rate_probe=rate)
    report = {"backend": net.backend, "paths": results,
              "timings": {k: round(v, 4) for k, v in net.timings.items()}}
    if json_out:
        print(json.dumps(report, indent=1))
    else:
        table = Table("path", "source", "RTT configured ms", "RTT measured ms", "rate configured", "rate measured",
                      "ok", title=f"fidelity ({net.backend})")
        for r in results:
            table.add_row(str(r["path"]), r["source"], f"{r['rtt_configured_ms']:g}",
                          "-" if r["rtt_measured_ms"] is None else f"{r['rtt_measured_ms']:.2f}",
                          str(r.get("rate_configured_mbit", "-")),
                          "-" if r.get("rate_measured_mbit") is None else f"{r['rate_measured_mbit']:.2f}",
                          "[green]ok[/green]" if r["ok"] else "[red]NO[/red]")
        console.print(table)
        console.print("build {build_s:.3f} s, teardown {stop_s:.3f} s".format(**net.timings))
    if not all(r["ok"] for r in results):
        raise typer.Exit(1)


@link_app.command("bench")
def bench(link_backend: str | None = typer.Option(None, "--link-backend", help=BACKEND_HELP),
          packets: int = typer.Option(1000, "--packets", min=10, help="Probe datagrams per delay (at 1000 pps)."),
          json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON.")) -> None:
    """Delay error at 10/50/200/400 ms, throughput at 10/100 Mbit/s, delay element CPU, topology times."""
    from fecbench.emulation import bench as bench_mod
    from fecbench.inputs.errors import require_root

    require_root("fecbench link bench")
    with console.status("link bench…", spinner="dots") as status:
        result = bench_mod.run(link_backend, packets=packets,
                               progress=lambda what: status.update(f"link bench: {what}"))
    if json_out:
        print(json.dumps(result, indent=1))
        return
    console.print(f"backend: {result['backend']}")
    delay = Table("one-way ms", "error median ms", "error p99 ms", "received", title="delay (goal ≤ 0.1 / ≤ 0.3 ms)")
    for d in result["delay"]:
        delay.add_row(f"{d['owd_ms']:g}", str(d["error_median_ms"]), str(d["error_p99_ms"]),
                      f"{d['received']}/{d['packets']}")
    console.print(delay)
    rate = Table("Mbit/s", "measured (payload)", "ratio", "wire ratio", "offered (wire ratio)",
                 title="rate (goal ≥ 95 %; offered: what the sender sent, asked 1.1: below 1 it did not fill the link)")
    for r in result["rate"]:
        rate.add_row(str(r["mbit"]), str(r["measured_mbit"]), str(r["achieved_ratio"]), str(r["wire_ratio"]),
                     str(r.get("offered_wire_ratio")))
    console.print(rate)
    console.print(f"delay element CPU at 100 Mbit/s: {result['cpu_percent_at_100mbit']} % of one core")
    t = result["topology"]
    console.print(f"single.toml: build {t['build_s']} s, reconfigure {t['configure_ms']} ms, "
                  f"teardown {t['stop_s']} s (droppers attached: {t['droppers']})")
