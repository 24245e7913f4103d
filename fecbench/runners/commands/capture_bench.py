"""`fecbench bench capture`: does keeping what explains a run change what it explains? The bench campaign
(designs/bench-campaign.toml, or a sample of it) run twice on this machine, with every capture off and
with every capture on (qlog, key logs and packet captures of every run), paired by run key (the same
runs on the same loss patterns): the median DCT ratio (on ÷ off) with a bootstrap interval, overall and per
label and size (each implementation's own qlog writer: designs/bench-capture-stacks.toml), each side's
endpoint wake-up latency and its runs above the endpoint bound, the median run's wall time (a capture's start and
stop are in it: runners.run.pcap), and the bytes kept. The goal: the median
ratio within 2 % of 1 and no run above the bound because of capturing. `on` chooses what the second campaign
captures (a `--capture` value, default `all`; e.g. `pcap=all,qlog=off` for packet captures alone).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from fecbench.records.run_records import kept_bytes
from fecbench.runners.commands.campaign_bench import BENCH_DESIGN, copy_of, endpoint_accuracy, read_runs, run_campaign

GOAL = 0.02        # |median ratio - 1| within this
RESAMPLES = 2000


def paired_ratios(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> np.ndarray:
    """DCT on ÷ off for every run ok on both sides (same key: same point, label, size, seed)."""
    before = {r["key"]: r["dct_ms"] for r in off if r["status"] == "ok" and r["dct_ms"]}
    return np.array([r["dct_ms"] / before[r["key"]] for r in on
                     if r["status"] == "ok" and r["dct_ms"] and r["key"] in before])


def per_label(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paired ratio per label and size: its median, interval, pairs and whether it is within the goal."""
    out = []
    for label, size in sorted({(r.get("label"), r.get("size")) for r in on}, key=str):
        mine = [r for r in on if r.get("label") == label and r.get("size") == size]
        ratios = paired_ratios(off, mine)
        if not len(ratios):
            continue
        median, low, high = median_interval(ratios)
        out.append({"label": label, "size": size, "pairs": int(len(ratios)), "median": round(median, 4),
                    "low": round(low, 4), "high": round(high, 4), "within_goal": abs(median - 1) <= GOAL})
    return out


def median_interval(ratios: np.ndarray, seed: int = 1) -> tuple[float, float, float]:
    """The median and a 95 % percentile-bootstrap interval of it (seeded: the same figures every time)."""
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(ratios, size=(RESAMPLES, len(ratios)), replace=True), axis=1)
    return float(np.median(ratios)), float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def run_capture_bench(design: Path = BENCH_DESIGN, sample: int | None = None, jobs: int = 1,
                      folder: Path | None = None, on: str = "all") -> dict[str, Any]:
    """Both campaigns (off first, then `on`, each in a fresh process) and the figures."""
    with tempfile.TemporaryDirectory(prefix="fecbench-capture-bench-") as tmp:
        where = folder or Path(tmp)
        copy = copy_of(design, where)
        sides: dict[str, Any] = {}
        for mode, capture in (("off", "off"), ("all", on)):
            db = where / f"capture-{mode}.sqlite"
            extra = ["--capture", capture, "--no-retry"] + (["--sample", str(sample)] if sample else [])
            wall, busy = run_campaign(copy, db, jobs, extra)
            runs = read_runs(db)
            sides[mode] = {"db": db, "wall_s": round(wall, 1), "cpu_busy": busy, "runs": runs,
                           "run_s_p50": round(float(np.median([r["held_s"] for r in runs])), 3) if runs else None,
                           "endpoints": endpoint_accuracy(db), "kept_bytes": kept_bytes(db)}
        ratios = paired_ratios(sides["off"]["runs"], sides["all"]["runs"])
        median, low, high = median_interval(ratios) if len(ratios) else (float("nan"),) * 3
        off_above = (sides["off"]["endpoints"] or {}).get("runs_above_bound", 0)
        on_above = (sides["all"]["endpoints"] or {}).get("runs_above_bound", 0)
        return {"design": str(design), "jobs": jobs, "on": on, "pairs": int(len(ratios)),
                "dct_ratio": {"median": round(median, 4), "low": round(low, 4), "high": round(high, 4)},
                "per_label": per_label(sides["off"]["runs"], sides["all"]["runs"]),
                "goal": GOAL, "meets_goal": bool(len(ratios)) and abs(median - 1) <= GOAL and on_above <= off_above,
                **{mode: {k: v for k, v in side.items() if k not in ("db", "runs")} for mode, side in sides.items()}}


def text(figures: dict[str, Any]) -> str:
    """The figures in a few lines."""
    r = figures["dct_ratio"]
    on = figures.get("on", "all")
    lines = [f"capture {on} vs off, {figures['pairs']} runs paired by key ({figures['design']}, "
             f"--jobs {figures['jobs']}):",
             f"  DCT median ratio (on ÷ off) {r['median']} (95 % {r['low']}–{r['high']}); goal within "
             f"{figures['goal']:.0%} of 1: {'met' if figures['meets_goal'] else 'NOT met'}"]
    for row in figures.get("per_label", []):
        lines.append(f"  {row['label']} at {row['size']} B: {row['median']} (95 % {row['low']}–{row['high']}, "
                     f"{row['pairs']} pairs){'' if row['within_goal'] else ' above the budget'}")
    for mode in ("off", "all"):
        side, ends = figures[mode], figures[mode]["endpoints"] or {}
        name = on if mode == "all" else mode
        lines.append(f"  capture {name}: wall {side['wall_s']} s (median run {side['run_s_p50']} s), endpoint run p99 "
                     f"p50/p99/max "
                     f"{ends.get('p50')}/{ends.get('p99')}/{ends.get('max')} ms ({ends.get('runs_above_bound')} runs "
                     f"above {ends.get('bound_ms')} ms), kept {side['kept_bytes'] / 1e6:.2f} MB")
    return "\n".join(lines)
