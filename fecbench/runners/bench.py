"""`fecbench bench campaign`: how much faster `--jobs N` runs a campaign, and how accurate the emulation
stays under that load, measured in one go for several N on a fixed small design (designs/bench-campaign.toml).

For each N the design runs from scratch (its own database) with `fecbench run --jobs N`. Printed per N:
the wall time, the sum of the runs' own durations ÷ wall time (the parallel speed-up the engine got),
the fidelity probe's RTT error per path (p50, p99, max; measured under the load of the N networks), the
distribution over runs of each run's own p99 delay-element lateness (and how many broke the bound), the
run statuses, and the projected wall time of the full 2019 uniform design: its serial estimate scaled by
this design's measured wall time ÷ its own serial estimate.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fecbench.paths import DESIGNS_DIR, REPO_ROOT
from fecbench.topologies.fidelity import quantile

BENCH_DESIGN = DESIGNS_DIR / "bench-campaign.toml"
PROJECTED_DESIGN = DESIGNS_DIR / "networking2019-uniform.toml"


def _serial_estimate_s(design: Path) -> float:
    from fecbench.runners.prepare import prepare

    prepared = prepare(design)
    return sum(prepared.estimate(run) for run in prepared.runs)


def copy_of(design: Path, folder: Path | None = None) -> Path:
    """The design where it runs from (the bench's folder): a copy whose topology path is absolute."""
    if folder is None:
        return design
    copy = folder / design.name
    copy.write_text(design.read_text().replace('topology = "topologies/', f'topology = "{REPO_ROOT}/topologies/'))
    return copy


def _one(design: Path, jobs: int, folder: Path) -> dict[str, Any]:
    db = folder / f"jobs{jobs}.sqlite"
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db), "--jobs", str(jobs)],
                         capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, "COLUMNS": "200"},
                         check=False)
    wall = time.monotonic() - started
    if out.returncode != 0:
        raise RuntimeError(f"--jobs {jobs}: fecbench run failed ({out.returncode}): {out.stderr[-2000:]}")
    with sqlite3.connect(db) as conn:
        durations = [r[0] for r in conn.execute("SELECT duration_s FROM runs WHERE duration_s IS NOT NULL")]
        statuses = dict(conn.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
        errors = [r[0] - r[1] for r in conn.execute(
            "SELECT rtt_measured_ms, rtt_configured_ms FROM fidelity WHERE rtt_measured_ms IS NOT NULL")]
        lateness = [json.loads(r[0]).get("lateness") or {} for r in conn.execute(
            "SELECT delay_json FROM link_stats WHERE delay_json IS NOT NULL")]
    p99s = [late["p99_us"] / 1000 for late in lateness if late.get("p99_us") is not None]
    flagged = sum(1 for late in lateness if late.get("ok") is False)
    return {"jobs": jobs, "runs": len(durations), "wall_s": round(wall, 2),
            "speedup": round(sum(durations) / wall, 2) if wall else None, "statuses": statuses,
            "rtt_error_ms": {"p50": round(quantile(errors, 0.5), 3), "p99": round(quantile(errors, 0.99), 3),
                             "max": round(max(errors), 3)} if errors else None,
            # Each run's own delay-element lateness (fecbench.lateness), per link direction.
            "run_p99_lateness_ms": {"p50": round(quantile(p99s, 0.5), 3), "p99": round(quantile(p99s, 0.99), 3),
                                    "max": round(max(p99s), 3), "above_bound": flagged} if p99s else None}


def run_bench(jobs_list: list[int], design: Path = BENCH_DESIGN) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="fecbench-bench-"))
    try:
        results = [_one(copy_of(design, folder), jobs, folder) for jobs in jobs_list]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # Projection: the full design's serial estimate (transfer times, as `--dry-run` prints it) scaled by
    # what this design measured: its wall time with N networks ÷ its own serial estimate.
    serial_h = _serial_estimate_s(PROJECTED_DESIGN) / 3600
    bench_estimate_s = _serial_estimate_s(copy_of(design))
    for entry in results:
        entry["projected_full_design_h"] = round(serial_h * entry["wall_s"] / bench_estimate_s, 2)
    return {"design": str(design.relative_to(REPO_ROOT)), "cores": os.cpu_count(),
            "full_design": str(PROJECTED_DESIGN.relative_to(REPO_ROOT)), "full_design_estimate_serial_h":
            round(serial_h, 2), "results": results}
