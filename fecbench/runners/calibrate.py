"""`fecbench run --jobs auto`: how many networks this machine can emulate at once accurately.

A short calibration before the campaign: for N = 1, 2, 4, 8, 16, 32 networks of the design's topology (at its
first run's link values), all N carry traffic at once (each network's fidelity check with its rate probe:
one-way delay probes, then a UDP stream at the bottleneck rate), and every delay element counts how late
it forwarded each frame (``fecbench.lateness``). The worst p99 lateness over the N networks' link
directions decides: ``auto`` takes the largest N whose worst p99 stays within the bound (0.5 ms,
``FECBENCH_LATENESS_BOUND_MS``), stopping at the first N that breaks it in three measurements in a
row (a passing disturbance of the host breaks it once, an overload every time). The rows are recorded with the
campaign (host information), and every run still records its own lateness, so a machine that becomes
busier during the campaign shows up in `fecbench status`.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from typing import Any

from fecbench import lateness
from fecbench.errors import UserError
from fecbench.runners.prepare import Prepared
from fecbench.runners.serial import TestbedFactory
from fecbench.runners.testbed import MininetTestbed, Testbed

CANDIDATES = (1, 2, 4, 8, 16, 32)  # up to jobs.MAX_JOBS
TRIES = 3  # measurements of an N before it counts as breaking the bound


def _within(row: dict[str, Any], bound_ms: float) -> bool:
    return row["worst_p99_ms"] is not None and row["worst_p99_ms"] <= bound_ms


def choose(rows: list[dict[str, Any]], bound_ms: float) -> int:
    """The largest N of the measured rows (in increasing N) before the first whose worst p99 lateness
    exceeds ``bound_ms``; 1 when even one network breaks it."""
    chosen = 1
    for row in rows:
        if not _within(row, bound_ms):
            break
        chosen = row["jobs"]
    return chosen


def _load(testbed: Testbed) -> list[dict[str, Any]]:
    """Traffic through one network (its fidelity check with the rate probe), then its lateness."""
    testbed.clear_lateness()
    testbed.fidelity(rate_probe=True)
    return [stat["lateness"] for stat in testbed.link_stats() if stat.get("lateness")]


def measure(prepared: Prepared, jobs: int, link_backend: str | None,
            factory: TestbedFactory = MininetTestbed) -> dict[str, Any]:
    """Build `jobs` networks, load them all at once, return the worst p99 lateness (ms) and the frames counted."""
    values = prepared.runs[0].values
    testbeds: list[Testbed] = []
    try:
        for _ in range(jobs):  # built one after another in this thread (building traps signals)
            testbeds.append(factory(prepared.topology, values, link_backend))
        if testbeds[0].backend != "delayline":
            raise UserError(f"--jobs auto needs the delay element's lateness counts; the {testbeds[0].backend} "
                            "backend keeps none: give --jobs N (or --link-backend delayline)")
        with cf.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="fecbench-calibrate") as pool:
            per_network = list(pool.map(_load, testbeds))
    finally:
        for testbed in testbeds:
            testbed.stop()
    summaries = [late for network in per_network for late in network if late.get("p99_us") is not None]
    worst = max((late["p99_us"] for late in summaries), default=None)
    return {"jobs": jobs, "worst_p99_ms": None if worst is None else round(worst / 1000, 4),
            "frames": sum(late["frames"] for late in summaries)}


def calibrate(prepared: Prepared, link_backend: str | None, *, candidates: tuple[int, ...] = CANDIDATES,
              factory: TestbedFactory = MininetTestbed,
              report: Callable[[dict[str, Any]], None] = lambda row: None) -> dict[str, Any]:
    """Measure N = each candidate in turn (stopping after the first that breaks the bound) and choose.
    Candidates beyond the design's number of runs are left out: a campaign never builds more networks
    than it has runs, so measuring them would only cost time (and choose what is not used)."""
    bound = lateness.bound_ms()
    rows = []
    usable = [jobs for jobs in candidates if jobs <= len(prepared.runs)] or list(candidates[:1])
    for jobs in usable:
        # A broken bound is measured again, as a failed fidelity check is: a passing disturbance of the
        # host (one starlink-uploads calibration read 2 ms at N = 1, then 0.15-0.19 ms in four
        # repeats) must not condemn an N, while a real overload breaks the bound every time.
        tries = 0
        while tries < TRIES:
            tries += 1
            row = measure(prepared, jobs, link_backend, factory)
            if _within(row, bound):
                break
        rows.append({**row, "tries": tries})
        report(rows[-1])
        if not _within(row, bound):
            break
    return {"chosen": choose(rows, bound), "bound_ms": bound, "rows": rows}
