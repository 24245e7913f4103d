"""`fecbench bench campaign`: how much faster `--jobs N` runs a campaign, how accurate the emulation stays
under that load, and how long the full 2019 uniform design would take on this machine, all measured.

**Speed-up.** For each N, the fixed design designs/bench-campaign.toml (a miniature of
networking2019-uniform: 128 runs over 32 points of its factor space, so that up to 16 networks never
wait for a point) runs from scratch, into its own database, with `fecbench run --jobs N`. Per N: the wall
time of the command; the span from the first run's start to the last run's end (the wall time without
starting Python, planning and building the N networks, which a long campaign pays once); the speed-ups
over the serial pass (N = 1) of both; how many runs were in flight on average (sum of run durations ÷
span); each run's download time against its own serial one (the same run meets the same losses: a
ratio above 1 is the load's doing, on the endpoints or the emulation); the statuses; how busy each CPU
was (the whole machine's: run it on a quiet machine); where the runs' time went
(`runners.run.lifecycle.PHASES`, mean seconds per run).

**Accuracy.** Per N: each run's own delay-element lateness (p99 per link direction, `fecbench.timekeeping.lateness`):
its distribution over runs and how many runs broke the bound; the lateness of every frame of every run
together (from the delay elements' histograms: p50, p99, p99.9, max, frames above the bound); the fidelity
probe's RTT error under that load.

**Endpoints.** Per N, the same for the endpoints (`fecbench.timekeeping.endpoint_timing`): each run's p99 wake-up
latency (median, p99 and max over runs, runs above the bound), every wake-up of every run together (p99,
p99.9), the median run-queue share.

**Projection** of a full design's wall time with N networks (default networking2019-uniform, `--project`),
measured on that design itself: a pilot of ``--pilot K`` of its runs drawn at random (`fecbench run --sample
K`, seeded by the design: the same runs every time) runs with N networks, for each N compared (from
`--pilot-min-jobs`). A pilot *keeps the bounds* when none of its runs had its endpoints or its delay
elements beyond their bound and, where the serial pilot (N = 1) ran, its outcome metric matches the serial
runs by key as `--jobs auto` requires (`runners.executors.calibrate.compare`). The projection reported is the one of
the largest N that keeps the bounds. Each pilot run i held its network x_i
seconds (its duration minus its fidelity check: the full campaign checks a point once per network that
works on it, not once per run), where the model `runners.experiment.runs.estimate_seconds` says m_i. R = Σx / Σm is
the ratio estimator of the whole design's run time M · R, M = Σ m over all its runs (the model carries
how duration depends on size, bandwidth, delay and loss; the pilot measures its level on this machine
under this load); its standard error comes from the spread of x_i − R · m_i. With f the mean fidelity
check, P the design's points and u the share of network time spent in runs while the pilot's queue still
held runs (the time between runs), the projection is (M · R + (P + N) · f) / (N · u), with a 95 % range
from R's standard error. It assumes what a long campaign does: every network busy until the queue is
empty (its end, a few runs long, is left out). `serial_h` (M · R + P · f) is what the same runs would
take one after the other, from durations measured under the load of N networks (so at most that).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from fecbench.emulation.fidelity import quantile
from fecbench.host.paths import DESIGNS_DIR, REPO_ROOT
from fecbench.records import db as dbmod
from fecbench.runners.executors import calibrate
from fecbench.timekeeping import endpoint_timing
from fecbench.timekeeping import lateness as latemod

BENCH_DESIGN = DESIGNS_DIR / "bench-campaign.toml"
PROJECTED_DESIGN = DESIGNS_DIR / "networking2019-uniform.toml"
PILOT_RUNS = 64
PILOT_MIN_JOBS = 1


def copy_of(design: Path, folder: Path | None = None) -> Path:
    """The design where it runs from (the bench's folder): a copy whose topology path is absolute."""
    if folder is None:
        return design
    copy = folder / design.name
    copy.write_text(design.read_text().replace('topology = "topologies/', f'topology = "{REPO_ROOT}/topologies/'))
    return copy


def _iso(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def cpu_times() -> list[tuple[int, int]]:
    """(busy, total) clock ticks per CPU since boot (/proc/stat; busy: not idle, not waiting for I/O)."""
    out = []
    with open("/proc/stat") as stat:
        for line in stat:
            name, *fields = line.split()
            if name.startswith("cpu") and name != "cpu":
                ticks = [int(v) for v in fields[:8]]
                out.append((sum(ticks) - ticks[3] - ticks[4], sum(ticks)))
    return out


def run_campaign(design: Path, db: Path, jobs: int, extra: list[str]) -> tuple[float, list[float]]:
    """`fecbench run` in a fresh process (as users run it); its wall time and how busy each CPU was meanwhile
    (the whole machine's: on a quiet machine, the campaign's)."""
    before, started = cpu_times(), time.monotonic()
    out = subprocess.run([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db), "--jobs", str(jobs),
                          *extra], capture_output=True, text=True, cwd=REPO_ROOT,
                         env={**os.environ, "COLUMNS": "200"}, check=False)
    wall, after = time.monotonic() - started, cpu_times()
    if out.returncode != 0:
        raise RuntimeError(f"--jobs {jobs}: fecbench run failed ({out.returncode}): {out.stderr[-2000:]}")
    busy = [round((b1 - b0) / (t1 - t0), 3) if t1 > t0 else 0.0
            for (b0, t0), (b1, t1) in zip(before, after, strict=True)]
    return wall, busy


def read_runs(db: Path) -> list[dict[str, Any]]:
    """Every executed run: key, point, label, size, status, duration, start and end (epoch s), phases, dct_ms,
    rebuffering_ms."""
    with closing(dbmod.open_readonly(db)) as conn:   # read-only: a bench never writes the campaign's records
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(
            "SELECT r.key, r.point, r.label, r.size, r.status, r.duration_s, r.started_at, r.finished_at, "
            "r.phases_json, m.dct_ms, m.rebuffering_ms FROM runs r LEFT JOIN metrics m ON m.run_key = r.key "
            "WHERE r.duration_s IS NOT NULL")]
    for row in rows:
        row["phases"] = json.loads(row.pop("phases_json") or "{}")
        row["held_s"] = row["duration_s"] - row["phases"].get("fidelity", 0.0)
    return rows


def frame_lateness(histograms: list[dict[str, Any]], edges: list[float] | None) -> dict[str, Any] | None:
    """Every frame of every run together: quantiles (bucket upper edges, as `timekeeping.lateness`) and how many
    frames were later than the bound."""
    if not histograms or edges is None:
        return None
    hist = [sum(values) for values in zip(*(h["late_hist"] for h in histograms), strict=True)]
    top = max(float(h.get("late_max_us", 0.0)) for h in histograms)
    bound_us = latemod.bound_ms() * 1000
    above = sum(count for i, count in enumerate(hist) if i >= len(edges) or edges[i] > bound_us)
    return {"frames": sum(hist), **{f"p{q:g}_us": latemod.quantile_us(hist, edges, top, q / 100)
                                    for q in (50, 99, 99.9)}, "max_us": top, "above_bound": above}


def endpoint_accuracy(db: Path) -> dict[str, Any] | None:
    """Each run's endpoint p99 wake-up latency over the runs (p50, p99, max, runs above the bound), every
    wake-up of every run together (p99, p99.9) and the median run-queue share; None if none was measured."""
    with closing(dbmod.open_readonly(db)) as conn:   # read-only: a bench never writes the campaign's records
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'endpoint_timing'").fetchone()
        rows = [json.loads(r[0]) for r in conn.execute("SELECT json FROM endpoint_timing")] if found else []
    measured = [r for r in rows if r.get("wakeup_p99_ms") is not None]
    if not measured:
        return None
    p99s = [r["wakeup_p99_ms"] for r in measured]
    every = endpoint_timing.merged_quantiles([r.get("wake_hist") or [] for r in measured], (0.99, 0.999))
    return {"p50": round(quantile(p99s, 0.5), 3), "p99": round(quantile(p99s, 0.99), 3), "max": round(max(p99s), 3),
            "runs_above_bound": sum(1 for r in measured if r.get("ok") is False), "bound_ms": measured[0]["bound_ms"],
            "every_p99": every[0.99], "every_p99.9": every[0.999],
            "runq_share_p50": round(quantile([r["runq_share"] for r in measured], 0.5), 4)}


def accuracy(db: Path) -> dict[str, Any]:
    with closing(dbmod.open_readonly(db)) as conn:   # read-only: a bench never writes the campaign's records
        errors = [r[0] - r[1] for r in conn.execute(
            "SELECT rtt_measured_ms, rtt_configured_ms FROM fidelity WHERE rtt_measured_ms IS NOT NULL")]
        stats = [(r[0], r[1], json.loads(r[2])) for r in conn.execute(
            "SELECT run_key, direction, delay_json FROM link_stats WHERE delay_json IS NOT NULL")]
    late = [s.get("lateness") or {} for _, _, s in stats]
    p99s = [x["p99_us"] / 1000 for x in late if x.get("p99_us") is not None]
    late_runs = {key for key, _, s in stats if (s.get("lateness") or {}).get("ok") is False}
    # A link's row per direction carries the delay element's counters of both directions: take them once.
    delays = [s["delay"] for _, direction, s in stats if direction == "forward" and "ab" in (s.get("delay") or {})]
    hists = [d[way] for d in delays for way in ("ab", "ba")]
    edges = delays[0].get("late_edges_us") if delays else None
    return {"rtt_error_ms": {"p50": round(quantile(errors, 0.5), 3), "p99": round(quantile(errors, 0.99), 3),
                             "max": round(max(errors), 3)} if errors else None,
            # Each run's own delay-element lateness (fecbench.timekeeping.lateness), per link direction.
            "run_p99_lateness_ms": {"p50": round(quantile(p99s, 0.5), 3), "p99": round(quantile(p99s, 0.99), 3),
                                    "max": round(max(p99s), 3), "runs_above_bound": len(late_runs)} if p99s else None,
            "frame_lateness_us": frame_lateness(hists, edges), "endpoint_p99_ms": endpoint_accuracy(db)}


def _one(design: Path, jobs: int, folder: Path) -> dict[str, Any]:
    db = folder / f"jobs{jobs}.sqlite"
    wall, busy = run_campaign(design, db, jobs, [])
    rows = read_runs(db)
    span = max(_iso(r["finished_at"]) for r in rows) - min(_iso(r["started_at"]) for r in rows)
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    names = sorted({name for r in rows for name in r["phases"]})
    dct = {r["key"]: r["dct_ms"] for r in rows if r["status"] in ("ok", "fidelity") and r["dct_ms"]}
    return {"jobs": jobs, "runs": len(rows), "wall_s": round(wall, 2), "span_s": round(span, 2),
            "in_flight": round(sum(r["duration_s"] for r in rows) / span, 2) if span else None,
            "statuses": statuses, "cpu_busy": busy, "held_mean_s": sum(r["held_s"] for r in rows) / len(rows),
            "fidelity_checks": sum(1 for r in rows if r["phases"].get("fidelity")),
            "fidelity_mean_s": _mean([r["phases"]["fidelity"] for r in rows if r["phases"].get("fidelity")]),
            "phases_mean_s": {n: round(sum(r["phases"].get(n, 0.0) for r in rows) / len(rows), 4) for n in names},
            "dct_ms": dct, **accuracy(db)}


def versus_serial(serial: dict[str, float], loaded: dict[str, float]) -> dict[str, Any] | None:
    """The same runs (same loss patterns) with N networks and alone: quantiles of dct(N) ÷ dct(1) over the
    runs ok in both. Load that slowed the endpoints or the emulation shows as ratios above 1."""
    ratios = sorted(loaded[k] / serial[k] for k in serial.keys() & loaded.keys())
    if not ratios:
        return None
    return {"runs": len(ratios), **{f"p{q:g}": round(quantile(ratios, q / 100), 3) for q in (10, 50, 90)}}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def steady_use(rows: list[dict[str, Any]], jobs: int) -> float | None:
    """The share of network time spent in runs while the queue still held runs (from the first start to the
    last start: the networks' time between runs, without the campaign's end, when networks run dry)."""
    starts = [_iso(r["started_at"]) for r in rows]
    t0, t1 = min(starts), max(starts)
    if t1 - t0 <= 0:
        return None
    busy = sum(max(0.0, min(_iso(r["finished_at"]), t1) - max(_iso(r["started_at"]), t0)) for r in rows)
    return min(1.0, busy / (jobs * (t1 - t0)))


def pilot(folder: Path, jobs: int, k: int, design: Path = PROJECTED_DESIGN) -> dict[str, Any]:
    """K runs of the projected design with N = jobs networks, its accuracy and its projected wall time
    (`projection`); `outcome`: each run's status and outcome metric by key (for the comparison with N = 1)."""
    from fecbench.runners.experiment.prepare import prepare

    copy = copy_of(design, folder)
    db = folder / f"pilot{jobs}.sqlite"
    wall, busy = run_campaign(copy, db, jobs, ["--sample", str(k)])
    prepared = prepare(copy)
    metric = calibrate.outcome_metric(prepared)[0]
    model = {run.key: prepared.estimate(run) for run in prepared.runs}
    rows = [r for r in read_runs(db) if r["key"] in model]
    outcome = {r["key"]: {"status": "ok" if r["status"] == "fidelity" else r["status"], "value": r[metric]}
               for r in rows}
    return {"jobs": jobs, "runs_in_design": len(prepared.runs), "wall_s": round(wall, 1), "cpu_busy": busy,
            "metric": metric, "epsilon": calibrate.outcome_metric(prepared)[1], "outcome": outcome,
            **projection(rows, model, len(prepared.points), jobs), **accuracy(db)}


def keeps_bounds(row: dict[str, Any], serial: dict[str, Any] | None) -> tuple[bool, str]:
    """Whether a pilot kept the endpoints and delay elements within their bounds and, against the serial
    pilot, its results (as `--jobs auto` requires); and why not."""
    why = []
    ends, late = row.get("endpoint_p99_ms") or {}, row.get("run_p99_lateness_ms") or {}
    if ends.get("runs_above_bound"):
        why.append(f"{ends['runs_above_bound']} run(s) above the endpoint bound")
    if late.get("runs_above_bound"):
        why.append(f"{late['runs_above_bound']} run(s) above the lateness bound")
    if not ends:
        why.append("endpoints not measured")
    if serial is not None and row is not serial:
        got = calibrate.compare(serial["outcome"], row["outcome"], row["epsilon"])
        row["versus_serial"] = got
        if got["changed_status"]:
            why.append(f"{len(got['changed_status'])} run(s) ended otherwise than serially")
        if got["median_ratio"] is not None and abs(got["median_ratio"] - 1) > calibrate.RATIO_TOLERANCE:
            why.append(f"median {row['metric']} ratio to serial {got['median_ratio']:.3f}")
        if got["wilcoxon_p"] is not None and got["wilcoxon_p"] < calibrate.ALPHA:
            why.append(f"Wilcoxon p = {got['wilcoxon_p']:.2g}")
    return not why, "; ".join(why)


def projection(rows: list[dict[str, Any]], model: dict[str, float], points: int, jobs: int) -> dict[str, Any]:
    """From the pilot's runs (held_s, phases, start and end) and the model's estimate of every run of the
    design (by key): R, its standard error, the mean fidelity check f, the steady share of network time in
    runs u, and (M · R + (P + N) · f) / (N · u) with its 95 % range (module docstring)."""
    x = [r["held_s"] for r in rows]
    m = [model[r["key"]] for r in rows]
    n, total = len(rows), sum(model.values())
    ratio = sum(x) / sum(m)
    residual = sum((xi - ratio * mi) ** 2 for xi, mi in zip(x, m, strict=True)) / (n - 1) if n > 1 else 0.0
    se = math.sqrt(residual / n) / (sum(m) / n) if n > 1 else 0.0
    checks = [r["phases"]["fidelity"] for r in rows if r["phases"].get("fidelity")]
    per_check = sum(checks) / len(checks) if checks else 0.0
    use = steady_use(rows, jobs) or 1.0
    # Every point is checked once per network that works on it: the points, and at most one more per network.
    checking = (points + jobs) * per_check

    def hours(r: float) -> float:
        return round((total * r + checking) / (jobs * use) / 3600, 2)

    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return {"runs": n, "statuses": statuses, "ratio": round(ratio, 4), "ratio_se": round(se, 4),
            "model_total_h": round(total / 3600, 2), "fidelity_per_check_s": round(per_check, 3),
            "steady_use": round(use, 3), "serial_h": round((total * ratio + points * per_check) / 3600, 2),
            "projected_h": hours(ratio), "range_h": [hours(max(0.0, ratio - 1.96 * se)), hours(ratio + 1.96 * se)]}


def run_bench(jobs_list: list[int], design: Path = BENCH_DESIGN, pilot_runs: int = PILOT_RUNS,
              pilot_min_jobs: int = PILOT_MIN_JOBS, projected: Path = PROJECTED_DESIGN,
              speedup: bool = True) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="fecbench-bench-"))
    try:
        results = [_one(copy_of(design, folder), jobs, folder) for jobs in jobs_list] if speedup else []
        pilots = [pilot(folder, jobs, pilot_runs, projected) for jobs in jobs_list
                  if pilot_runs and jobs >= pilot_min_jobs]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    serial = next((r for r in results if r["jobs"] == 1), None)
    for row in results:
        row["speedup_wall"] = round(serial["wall_s"] / row["wall_s"], 2) if serial else None
        row["speedup_span"] = round(serial["span_s"] / row["span_s"], 2) if serial else None
        row["dct_vs_serial"] = versus_serial(serial["dct_ms"], row["dct_ms"]) if serial else None
    for row in results:
        row.pop("dct_ms")
        row["projected_full_design_h"] = next((p["projected_h"] for p in pilots if p["jobs"] == row["jobs"]), None)
    serial_pilot = next((p for p in pilots if p["jobs"] == 1), None)
    for row in pilots:
        row["keeps_bounds"], row["why"] = keeps_bounds(row, serial_pilot)
    for row in pilots:
        row.pop("outcome")
    kept = [p for p in pilots if p["keeps_bounds"]]
    best = max(kept, key=lambda p: p["jobs"]) if kept else None
    return {"design": str(design.relative_to(REPO_ROOT)), "cores": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()], "lateness_bound_ms": latemod.bound_ms(),
            "endpoint_bound_ms": endpoint_timing.bound_ms(), "full_design": _shown(projected), "pilots": pilots,
            "results": results,
            "projection": None if best is None else {"jobs": best["jobs"], "projected_h": best["projected_h"],
                                                     "range_h": best["range_h"], "serial_h": best["serial_h"]}}


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)
