"""`fecbench status`: progress per implementation, failures by kind, fidelity warnings, per-run overhead,
and how a Dask campaign's cluster was protected. Reads the database only (while a campaign runs, too)."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from fecbench.inputs.errors import UserError
from fecbench.records.status import Status
from fecbench.timekeeping.lateness import criterion_text, from_delay_json, judge

console = Console()


def status(db: Path | None = typer.Argument(None, help="Results database (default: the newest in results/)."),
           timing: bool = typer.Option(False, "--timing", help="Per-run overhead: wall time minus transfer time."),
           json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
           ) -> None:
    """Progress per implementation, failures by kind, fidelity warnings (readable while a campaign runs)."""
    from fecbench.records import db as dbmod
    from fecbench.records import run_records

    path = db if db is not None else dbmod.newest()
    conn = dbmod.open_readonly(path)
    try:
        columns = {col[1] for col in conn.execute("PRAGMA table_info(runs)")}
        optional = "".join(f", r.{c}" for c in ("phases_json", "runner", "decided_by") if c in columns)
        rows = [dict(r) for r in conn.execute(
            "SELECT r.key, r.label, r.status, r.error, r.size, r.duration_s, r.finished_at, m.dct_ms, "
            "m.client_wall_ms" + optional + " FROM runs r LEFT JOIN metrics m ON m.run_key = r.key")]
        mark_running(rows)
        fidelity_bad = conn.execute("SELECT COUNT(DISTINCT run_key) FROM fidelity WHERE ok = 0").fetchone()[0]
        # Checks that passed only when measured again: the host was disturbed at that moment.
        rechecked = conn.execute("SELECT COUNT(DISTINCT run_key) FROM fidelity WHERE ok = 1 AND checks > 1"
                                 ).fetchone()[0]
        late = late_runs(conn)
        endpoints = endpoint_runs(conn)
        campaigns = [_campaign_row(dict(r)) for r in conn.execute(
            "SELECT id, name, created_at, link_backend, host_json FROM campaigns")]
        breakers = run_records.read_breakers(conn)
    except sqlite3.Error as exc:
        raise UserError(f"{path}: cannot read the results database: {exc}") from None
    finally:
        conn.close()
    summary = summarize(rows)
    summary["fidelity_warnings"] = fidelity_bad
    summary["fidelity_rechecked"] = rechecked
    summary["lateness_warnings"] = late
    summary["endpoint_warnings"] = endpoints
    summary["campaigns"] = campaigns
    summary["breakers"] = breakers
    if timing:
        summary["timing"] = overhead(rows)
        summary["phases"] = phase_times(rows)
    if json_out:
        print(json.dumps(summary, indent=1, default=str))
        return
    _print_status(path, summary)


def late_runs(conn: sqlite3.Connection) -> dict[str, Any]:
    """Runs whose own delay-element lateness broke the bound (``fecbench.timekeeping.lateness``), recorded with
    their link statistics; the worst p99 among them, the largest p99 of any run (how close the others
    came), and the bound (the largest any run was judged by, flagged or not, as for the endpoints)."""
    keys, worst, largest, bounds, directions = set(), 0.0, None, [], []
    for key, text in conn.execute("SELECT run_key, delay_json FROM link_stats WHERE delay_json LIKE '%lateness%'"):
        late = from_delay_json(text) or {}
        directions.append((key, late))
        if late.get("bound_ms") is not None:
            bounds.append(float(late["bound_ms"]))
        if late.get("p99_us") is not None:
            largest = max(largest or 0.0, float(late["p99_us"]) / 1000)
        if late.get("ok") is False:
            keys.add(key)
            worst = max(worst, float(late.get("p99_us") or 0) / 1000)
    judged = judge(directions)
    return {"runs": len(keys), "worst_p99_ms": worst, "max_p99_ms": largest, "bound_ms": max(bounds, default=None),
            "judged": judged, "criterion": criterion_text(judged) if judged["runs"] else None}


def endpoint_runs(conn: sqlite3.Connection) -> dict[str, Any]:
    """Runs whose endpoints waited too long (``timekeeping.endpoint_timing``): how many were judged so, the worst
    share of its run their excess waits took among them and the largest of any run (how close the others came),
    the largest p99 wake-up latency of any run, the bound and share limit (the largest any was judged by), and how
    many runs were not measured. A run recorded before issue 48 has no excess: judged by its p99 then."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='endpoint_timing'").fetchone():
        return {"runs": 0, "worst_share": None, "max_share": None, "max_p99_ms": None, "bound_ms": None,
                "share_limit": None, "not_measured": 0}
    share = "json_extract(json, '$.excess_share')"
    late = conn.execute(f"SELECT COUNT(*), MAX({share}) FROM endpoint_timing WHERE ok = 0").fetchone()
    largest, worst_p99, bound, limit = conn.execute(
        f"SELECT MAX({share}), MAX(wakeup_p99_ms), MAX(bound_ms), MAX(json_extract(json, '$.excess_limit')) "
        "FROM endpoint_timing").fetchone()
    missing = conn.execute("SELECT COUNT(*) FROM endpoint_timing WHERE json LIKE '{\"error\"%'").fetchone()[0]
    return {"runs": late[0], "worst_share": late[1], "max_share": largest, "max_p99_ms": worst_p99, "bound_ms": bound,
            "share_limit": limit, "not_measured": missing}


def mark_running(rows: list[dict[str, Any]]) -> None:
    """A run started and not finished (the database says `running`) is in flight while its campaign process runs;
    one whose process is gone, or that this host cannot tell of, is `interrupted` (as the next campaign will record
    it). A database of an older fecbench says `interrupted` for a run in flight: `running` while its process runs."""
    from fecbench.records.run_records import runner_alive

    for row in rows:
        if row["status"] not in (Status.RUNNING, Status.INTERRUPTED) or row.get("finished_at") is not None:
            continue
        if runner_alive(row.get("runner")):
            row["status"], row["error"] = Status.RUNNING.value, None
        elif row["status"] == Status.RUNNING:
            row["status"] = Status.INTERRUPTED.value


def _campaign_row(row: dict[str, Any]) -> dict[str, Any]:
    """A campaign as status shows it: where it ran (Dask target) and whether that was authenticated."""
    try:
        host = json.loads(row.pop("host_json") or "{}")
    except json.JSONDecodeError:
        host = {}
    if "dask" in host:
        row["dask"] = host["dask"]
        row["dask_security"] = host.get("dask_security") or {"transport": "tcp", "authenticated": False,
                                                              "why": "recorded before fecbench checked it"}
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per_label: dict[str, Counter] = defaultdict(Counter)
    failures: Counter = Counter()
    measured: dict[tuple[str, str], list[list[float]]] = {}
    for row in rows:
        per_label[row["label"]][row["status"]] += 1
        if row["status"] not in ("ok", "pending", "running"):
            # Measured values (e.g. a latency of 3.41 ms) would make every error its own kind: one kind, and
            # the range each value took among its runs in its place.
            first = (row["error"] or "").split("\n")[0]   # whole: never cut
            kind = MEASURED.sub("…", first)
            failures[(row["status"], kind)] += 1
            values = [float(v) for v in MEASURED.findall(first)]
            seen = measured.setdefault((row["status"], kind), [[] for _ in values])
            for place, value in zip(seen, values, strict=False):
                place.append(value)
    totals = Counter(row["status"] for row in rows)
    # Which checks flagged the flagged runs, as judged when they ran (runs.decided_by): never today's bounds.
    flagged_by = Counter(name.strip() for row in rows if row["status"] == Status.FIDELITY and row.get("decided_by")
                         for name in row["decided_by"].split(","))
    return {"total": len(rows), "statuses": dict(totals), "flagged_by": dict(flagged_by.most_common()),
            "per_label": {label: dict(c) for label, c in sorted(per_label.items())},
            "failures": [{"status": s, "error": with_ranges(e, measured[(s, e)]), "count": n}
                         for (s, e), n in failures.most_common()]}


#: A measured value in an error (a latency, a share), as opposed to a count or a name's digits.
MEASURED = re.compile(r"\d+\.\d+")


def with_ranges(kind: str, values: list[list[float]]) -> str:
    """An error kind with each "…" replaced by the range its value took (3.4–14 or one value)."""
    parts = kind.split("…")
    out = [parts[0]]
    for i, rest in enumerate(parts[1:]):
        seen = values[i] if i < len(values) else []
        low, high = (min(seen), max(seen)) if seen else (None, None)
        out.append("…" if low is None else f"{low:.3g}" if low == high else f"{low:.3g}–{high:.3g}")
        out.append(rest)
    return "".join(out)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def overhead(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per size, over ok runs: run wall time minus the client's own transfer time (dct_ms), and minus
    the client process's wall time (the harness's own cost around the client)."""
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["status"] == "ok" and row["duration_s"] is not None:
            groups[row["size"]].append(row)
    out = []
    for size, group in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        vs_dct = [r["duration_s"] - r["dct_ms"] / 1000 for r in group if r["dct_ms"] is not None]
        vs_client = [r["duration_s"] - r["client_wall_ms"] / 1000 for r in group if r["client_wall_ms"] is not None]
        entry: dict[str, Any] = {"size": size, "runs": len(group),
                                 "wall_median_s": statistics.median(r["duration_s"] for r in group)}
        if vs_dct:
            entry.update(overhead_median_s=statistics.median(vs_dct), overhead_p90_s=_quantile(vs_dct, 0.9))
        if vs_client:
            entry.update(harness_median_s=statistics.median(vs_client))
        out.append(entry)
    return out


def phase_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Over ok runs that recorded them (schema ≥ 5): where the wall time went, per phase of the runner
    (runners.run.lifecycle.PHASES) and `between` (the run's recorded duration minus its phases: handing it to
    a network and back); mean, median and p90 seconds, and each phase's share of the summed wall time."""
    from fecbench.runners.run.lifecycle import PHASES

    timed = []
    for row in rows:
        if row["status"] == "ok" and row.get("phases_json") and row["duration_s"] is not None:
            phases = json.loads(row["phases_json"])
            phases["between"] = max(0.0, row["duration_s"] - sum(phases.values()))
            timed.append(phases)
    total = sum(sum(p.values()) for p in timed)
    out = []
    for name in (*PHASES, "between"):
        values = [p.get(name, 0.0) for p in timed]
        if not any(values):
            continue
        out.append({"phase": name, "runs": len(values), "mean_s": statistics.fmean(values),
                    "median_s": statistics.median(values), "p90_s": _quantile(values, 0.9),
                    "share": sum(values) / total if total else None})
    return out


def _print_status(path: Path, summary: dict[str, Any]) -> None:
    console.print(f"[bold]{path}[/]: {summary['total']} run(s): "
                  + ", ".join(f"{k} {v}" for k, v in sorted(summary["statuses"].items())))
    table = Table(title="per implementation label")
    statuses = ["running", *(s.value for s in Status if s not in (Status.PENDING, Status.RUNNING)), "pending"]
    table.add_column("label", overflow="fold")
    for s in statuses:
        table.add_column(s, justify="right", overflow="fold")
    for label, counts in summary["per_label"].items():
        table.add_row(label, *(str(counts.get(s, 0)) for s in statuses))
    console.print(table)
    if summary["failures"]:
        console.print("[bold]failures by kind[/]")
        for f in summary["failures"][:20]:
            console.print(f"  {f['count']:5d}  {f['status']:<11} {f['error']}", markup=False, highlight=False)
    for campaign in summary["campaigns"]:
        if "dask" not in campaign:
            continue
        sec = campaign["dask_security"]
        if sec.get("authenticated"):
            console.print(f"campaign {campaign['id']} ran on Dask {campaign['dask']} over TLS "
                          f"({sec.get('credentials', '')})")
        else:
            console.print(f"[red]campaign {campaign['id']} ran on Dask {campaign['dask']} UNAUTHENTICATED "
                          f"(plain TCP: {sec.get('why', '')})[/]")
    for b in summary["breakers"]:
        console.print(f"[red]circuit breaker (campaign {b['campaign_id']}, {b['tripped_at']}): {b['label']}: its "
                      f"first {b['runs']} runs all ended {b['status']} ({b['error']}); {b['skipped']} more were "
                      "not run (pending: fix the cause, then fecbench run again)[/]")
    if summary["flagged_by"]:
        console.print("flagged, by the check that flagged them when they ran: "
                      + ", ".join(f"{name} {n}" for name, n in summary["flagged_by"].items()), highlight=False)
    if summary["fidelity_warnings"]:
        console.print(f"[magenta]fidelity warnings: {summary['fidelity_warnings']} run(s) measured a network "
                      "that did not match the design[/]")
    if summary["fidelity_rechecked"]:
        console.print(f"fidelity: {summary['fidelity_rechecked']} run(s) passed the check only when measured again "
                      "(a passing disturbance of the host; what the failed measurement read is in fidelity.json)")
    late = summary["lateness_warnings"]
    if late["runs"]:
        console.print(f"[magenta]emulation accuracy: {late['criterion']}: the network delayed packets longer than "
                      "configured during the runs flagged; recorded as fidelity (fecbench run --retry fidelity re-runs "
                      "them)[/]", highlight=False)
    ends = summary["endpoint_warnings"]
    if ends["runs"]:
        worst = "" if ends["worst_share"] is None else f" (worst {100 * ends['worst_share']:.2g} % of its run)"
        limit = "" if ends["share_limit"] is None else f" more than {100 * ends['share_limit']:g} % of the run"
        console.print(f"[magenta]endpoint timing: {ends['runs']} run(s) had their endpoints' waits for a CPU beyond "
                      f"{ends['bound_ms']:g} ms add up to{limit}{worst}: enough to change their times; recorded as "
                      "fidelity (fecbench run --retry fidelity re-runs them)[/]")
    within = [late["criterion"]] if not late["runs"] and late.get("criterion") else []
    if not ends["runs"] and ends["max_share"] is not None and ends["share_limit"] is not None:
        within.append(f"endpoints' waits beyond {ends['bound_ms']:g} ms at most {100 * ends['max_share']:.2g} % of a "
                      f"run (limit {100 * ends['share_limit']:g} %; p99 wake-up latency at most "
                      f"{ends['max_p99_ms']:.3g} ms)")
    for line in within:   # how close the runs came, where none broke a bound, and by which criterion
        console.print("timekeeping: " + line)
    if ends["not_measured"]:
        console.print(f"endpoint timing: {ends['not_measured']} run(s) not measured (fecbench doctor says why)")
    if "timing" in summary:
        table = Table(title="per-run overhead (ok runs): wall time − client transfer time (dct_ms)")
        for col in ("size", "runs", "wall median s", "overhead median s", "overhead p90 s",
                    "wall − client process s"):
            table.add_column(col, justify="right", overflow="fold")
        for t in summary["timing"]:
            table.add_row(str(t["size"] if t["size"] is not None else "messages"), str(t["runs"]),
                          f"{t['wall_median_s']:.3f}", _fmt(t.get("overhead_median_s")),
                          _fmt(t.get("overhead_p90_s")), _fmt(t.get("harness_median_s")))
        console.print(table)
    if summary.get("phases"):
        table = Table(title="where the wall time of ok runs went, per phase (runners.run.lifecycle.PHASES)")
        for col in ("phase", "runs", "mean s", "median s", "p90 s", "share of wall"):
            table.add_column(col, justify="right", overflow="fold")
        for p in summary["phases"]:
            table.add_row(p["phase"], str(p["runs"]), _fmt(p["mean_s"]), _fmt(p["median_s"]), _fmt(p["p90_s"]),
                          "-" if p["share"] is None else f"{100 * p['share']:.1f} %")
        console.print(table)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
