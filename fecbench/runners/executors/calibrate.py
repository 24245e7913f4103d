"""`fecbench run --jobs auto`: how many networks this machine can run at once without changing the results.

Calibrated on the design itself, not on synthetic traffic: a pilot of K of its runs (drawn at random,
seeded by the design: the same runs every time, as `--sample K` draws them) is executed

1. serially, on one network: the reference; then
2. with N = 2, 4, 8, 16, 32 networks at once (up to the design's number of runs), every network busy
   until the last pilot run has finished (other runs of the design fill the networks the pilot leaves
   idle; their results are not kept).

N keeps the results when, during its pilot,
- no pilot run broke a bound: the endpoints' p99 wake-up latency (`fecbench.timekeeping.endpoint_timing`: the
  design's `endpoint_bound_ms`, else FECBENCH_ENDPOINT_BOUND_MS, else 2 ms) and the delay elements' p99
  lateness (`fecbench.timekeeping.lateness`, 0.5 ms; netem keeps none);
- every pilot run ended as it did serially (ok, or not), and
- the outcome matches the serial runs, paired by key (the same run meets the same losses): the median
  of the per-run ratios (loaded ÷ serial) of the design's outcome metric within 5 % of 1, and a
  Wilcoxon signed-rank test of the paired values not rejecting equality at 1 %. The metric is the
  completion time (`dct_ms`) of downloads, uploads and exchanges, the total re-buffering time of
  messages (`rebuffering_ms`, both sides plus one message interval: a stall shorter than one
  interval is within the noise, and a run without stalls has a ratio).

`auto` takes the largest N before the first that fails (measured again once first: a passing
disturbance of the host fails a measurement, an overload fails every one). Everything measured is
recorded with the campaign (host information: `jobs_calibration`), and every run of the campaign is
judged by the same bounds, so a machine that becomes busier later shows up in `fecbench status`.

The serial pilot is drawn from the runs the campaign has still to do and, given the campaign's database
(`RecordedSerialPilot`), runs as an ordinary session of the campaign: its runs are results, recorded
like any other, and the campaign skips them afterwards. Only the loaded pilots (the same runs again, on
N networks) and their fillers are thrown away. A calibration of this machine for the same workload class
is reused within its age, once a short paired pilot confirms it (`executors.calibrations`).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import random
import statistics
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.runners.executors.engine import Engine, Finished
from fecbench.runners.executors.selection import sample_runs
from fecbench.runners.executors.serial import SerialExecutor, TestbedFactory
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.lifecycle import Runner, run_one
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.recorder import Recorder, impls_fingerprint
from fecbench.runners.run.testbed import MininetTestbed, Testbed
from fecbench.timekeeping import endpoint_timing, lateness

if TYPE_CHECKING:
    from rich.console import Console

CANDIDATES = (1, 2, 4, 8, 16, 32)  # up to jobs.MAX_JOBS
PILOT_RUNS = 16
TRIES = 2                           # measurements of an N before it counts as changing the results
RATIO_TOLERANCE = 0.05
ALPHA = 0.01


def outcome_metric(prepared: Prepared) -> tuple[str, float]:
    """The metric a pilot compares, and what is added to both sides of its ratio (see the docstring)."""
    workload = prepared.design.workload
    if workload.kind == "messages":
        return "rebuffering_ms", 1000.0 / workload.rate
    return "dct_ms", 0.0


#: Runs a pilot serially and returns what the calibration keeps of each (by key); see `RecordedSerialPilot`.
SerialPilot = Callable[[list[Run]], dict[str, dict[str, Any]]]


def pilot_of(prepared: Prepared, k: int, runs: list[Run] | None = None) -> tuple[list[Run], list[Run]]:
    """The pilot, k of `runs` (default: all the design's) as `--sample k` draws them, and the design's other
    runs in a seeded order (the fillers)."""
    pilot = sample_runs(prepared.runs if runs is None else runs, k, prepared.design.seed)
    chosen = {run.key for run in pilot}
    fillers = [run for run in prepared.runs if run.key not in chosen]
    random.Random(f"fecbench-fillers:{prepared.design.seed}").shuffle(fillers)
    return pilot, fillers


def _result(run: Run, outcome: Outcome, metric: str) -> dict[str, Any]:
    """What the calibration keeps of a pilot run: status, metric, and the worst p99 of its endpoints and
    delay elements with whether each kept its bound."""
    ends = outcome.endpoints or {}
    late = [((s.get("delay") or {}).get("lateness") or {}) for s in outcome.link_stats]
    late = [x for x in late if x.get("p99_us") is not None]
    value = (outcome.metrics or {}).get(metric)
    return {"key": run.key, "status": outcome.status, "error": outcome.error,
            "value": float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
            "endpoint_p99_ms": ends.get("wakeup_p99_ms"), "endpoint_ok": ends.get("ok"),
            "lateness_p99_ms": max((x["p99_us"] / 1000 for x in late), default=None),
            "lateness_ok": all(x.get("ok") is not False for x in late), "lateness": late}


def execute(prepared: Prepared, pilot: list[Run], fillers: list[Run], jobs: int, link_backend: str | None,
            factory: TestbedFactory = MininetTestbed) -> dict[str, dict[str, Any]]:
    """Run the pilot on `jobs` networks at once, each kept busy (fillers) until the last pilot run ended."""
    metric = outcome_metric(prepared)[0]
    queue = [*pilot, *fillers]
    wanted = {run.key for run in pilot}
    results: dict[str, dict[str, Any]] = {}
    lock, done = threading.Lock(), threading.Event()
    testbeds: list[Testbed] = []
    with tempfile.TemporaryDirectory(prefix="fecbench-calibrate-") as logs:
        try:
            for _ in range(min(jobs, len(queue))):  # built one after another in this thread (building traps signals)
                testbeds.append(factory(prepared.topology, queue[0].values, link_backend))
            runners = [Runner(prepared, testbed, Path(logs)) for testbed in testbeds]

            def work(runner: Runner) -> None:
                while not done.is_set():
                    with lock:
                        if not queue:
                            return
                        run = queue.pop(0)
                    outcome, _ = run_one(runner, run)
                    if run.key in wanted:
                        with lock:
                            results[run.key] = _result(run, outcome, metric)
                            if len(results) == len(wanted):
                                done.set()

            with cf.ThreadPoolExecutor(max_workers=len(runners), thread_name_prefix="fecbench-calibrate") as pool:
                futures = [pool.submit(work, runner) for runner in runners]
                while not done.wait(0.5) and not all(f.done() for f in futures):
                    pass
                # The pilot is measured: cut the fillers still running short.
                while not all(f.done() for f in futures):
                    for runner in runners:
                        runner.stop_all()
                    cf.wait(futures, timeout=0.2)
                for future in futures:
                    future.result()
        finally:
            for testbed in testbeds:
                testbed.stop()
    return results


class RecordedSerialPilot:
    """The serial reference run as an ordinary session of the campaign on `db_path` (progress, records,
    fidelity re-runs): its runs are results of the campaign, and the calibration reads their outcomes."""

    def __init__(self, prepared: Prepared, db_path: Path, link_backend: str | None, console: Console | None = None,
                 factory: TestbedFactory = MininetTestbed) -> None:
        self.prepared, self.db_path, self.link_backend, self.console = prepared, db_path, link_backend, console
        self.factory = factory
        self.host: tuple[str, dict[str, Any]] | None = None   # backend and host information of its last session

    def __call__(self, pilot: list[Run]) -> dict[str, dict[str, Any]]:
        metric = outcome_metric(self.prepared)[0]
        results: dict[str, dict[str, Any]] = {}

        def keep(finished: Finished) -> None:   # a fidelity re-run's outcome replaces the first, as recorded
            results[finished.run.key] = _result(finished.run, finished.outcome, metric)

        executor = SerialExecutor(self.prepared, self.db_path, link_backend=self.link_backend,
                                  testbed_factory=self.factory)
        engine = Engine(self.prepared, self.db_path, executor, self.console, todo=pilot, on_finished=keep)
        engine.run(set())
        if engine.recorder is not None:
            self.host = (executor.backend(), executor.host_info())
        return results

    def record(self, calibration: dict[str, Any]) -> None:
        """The calibration in the campaign's host information (which the campaign's next session, with its
        networks, records again): kept even when the pilots were the last runs to do."""
        if self.host is None:
            return
        backend, host = self.host
        recorder = Recorder.open(self.db_path, self.prepared, backend, {**host, "jobs_calibration": calibration},
                                 impls_fingerprint(self.prepared.design))
        recorder.close()


def unrecorded_serial_pilot(prepared: Prepared, link_backend: str | None,
                            factory: TestbedFactory = MininetTestbed) -> SerialPilot:
    """The serial reference on a network of its own, recorded nowhere (benchmarks, tests)."""
    return lambda pilot: execute(prepared, pilot, [], 1, link_backend, factory)


def compare(serial: dict[str, dict[str, Any]], loaded: dict[str, dict[str, Any]], epsilon: float) -> dict[str, Any]:
    """The loaded pilot against the serial one, paired by key: runs whose status differs, and over the runs ok
    on both sides the median ratio of (value + ε) and the Wilcoxon signed-rank p-value."""
    from scipy.stats import wilcoxon

    changed = sorted(k for k in serial if loaded.get(k, {}).get("status") != serial[k]["status"]
                     and "ok" in (loaded.get(k, {}).get("status"), serial[k]["status"]))
    both = [(serial[k]["value"], loaded[k]["value"]) for k in serial
            if k in loaded and serial[k]["value"] is not None and loaded[k]["value"] is not None]
    ratios = [(b + epsilon) / (a + epsilon) for a, b in both if a + epsilon > 0]
    median = statistics.median(ratios) if ratios else None
    differences = [b - a for a, b in both]
    try:
        p = float(wilcoxon(differences).pvalue) if any(differences) else 1.0
    except ValueError:  # too few pairs that differ
        p = 1.0
    return {"pairs": len(both), "changed_status": changed,
            "median_ratio": None if median is None else round(median, 4),
            "wilcoxon_p": None if math.isnan(p) else round(p, 5)}


def summarise(jobs: int, results: dict[str, dict[str, Any]], serial: dict[str, dict[str, Any]] | None,
              epsilon: float) -> dict[str, Any]:
    """One row of the calibration: the worst p99s, the runs beyond a bound, the comparison, the verdict."""
    values = list(results.values())
    ends = [r["endpoint_p99_ms"] for r in values if r["endpoint_p99_ms"] is not None]
    late = [r["lateness_p99_ms"] for r in values if r["lateness_p99_ms"] is not None]
    beyond = sum(1 for r in values if r["endpoint_ok"] is False or not r["lateness_ok"])
    row: dict[str, Any] = {"jobs": jobs, "runs": len(values), "ok": sum(r["status"] == "ok" for r in values),
                           "endpoint_p99_ms": max(ends, default=None), "lateness_p99_ms": max(late, default=None),
                           "beyond_bound": beyond, "unmeasured_endpoints": len(values) - len(ends),
                           "lateness": lateness.judge((r["key"], x) for r in values for x in r.get("lateness", []))}
    why = []
    if beyond:
        why.append(f"{beyond} pilot run(s) beyond a bound")
    if serial is not None:
        row.update(compare(serial, results, epsilon))
        if row["changed_status"]:
            why.append(f"{len(row['changed_status'])} run(s) ended otherwise than serially")
        if row["median_ratio"] is not None and abs(row["median_ratio"] - 1) > RATIO_TOLERANCE:
            why.append(f"median ratio to serial {row['median_ratio']:.3f}")
        if row["wilcoxon_p"] is not None and row["wilcoxon_p"] < ALPHA:
            why.append(f"Wilcoxon p = {row['wilcoxon_p']:.2g} < {ALPHA:g}")
    row["keeps_results"] = not why
    row["why"] = "; ".join(why)
    return row


def calibrate(prepared: Prepared, link_backend: str | None, *, candidates: tuple[int, ...] = CANDIDATES,
              factory: TestbedFactory = MininetTestbed, pilot_runs: int = PILOT_RUNS,
              report: Callable[[dict[str, Any]], None] = lambda row: None, runs: list[Run] | None = None,
              serial_pilot: SerialPilot | None = None) -> dict[str, Any]:
    """Measure the serial pilot (drawn from `runs`, default the design's; run by `serial_pilot`, default
    unrecorded), then each N in turn (stopping after the first that changes the results), and choose the
    largest N before it. Candidates beyond the design's number of runs are left out: a campaign never builds
    more networks than it has runs."""
    epsilon = outcome_metric(prepared)[1]
    pilot, fillers = pilot_of(prepared, pilot_runs, runs)
    usable = [jobs for jobs in candidates if jobs <= len(prepared.runs)] or [1]
    serial = (serial_pilot or unrecorded_serial_pilot(prepared, link_backend, factory))(pilot)
    rows = [{**summarise(1, serial, None, epsilon), "tries": 1}]
    report(rows[-1])
    chosen = 1
    for jobs in (j for j in usable if j > 1):
        tries = 0
        while tries < TRIES:
            tries += 1
            row = summarise(jobs, execute(prepared, pilot, fillers, jobs, link_backend, factory), serial, epsilon)
            if row["keeps_results"]:
                break
        rows.append({**row, "tries": tries})
        report(rows[-1])
        if not row["keeps_results"]:
            break
        chosen = jobs
    return {**rule(prepared), "chosen": chosen, "pilot": [run.key for run in pilot], "rows": rows}


def rule(prepared: Prepared) -> dict[str, Any]:
    """What a pilot is judged by, as recorded with the campaign."""
    metric, epsilon = outcome_metric(prepared)
    return {"metric": metric, "epsilon": epsilon,
            "endpoint_bound_ms": endpoint_timing.bound_ms(prepared.design.endpoint_bound_ms),
            "bound_ms": lateness.bound_ms(), "ratio_tolerance": RATIO_TOLERANCE, "alpha": ALPHA}
