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

Twins. A run repeated serially does not always repeat its result: where a drop lands once timing moves decides
whether a loss is recovered, and a run near its time limit may end ok once and time out the next. So when a loaded
pilot differs from the serial one by its outcomes (not by a bound), the pilot's runs are run once more serially
(the twins, recorded nowhere; measured once per calibration) and the loaded pilot is judged against what the twins
do: it changes the results when its runs end otherwise than serially more often than the twins' (one-sided Fisher
exact test at 1 %), when their metric strays further from the serial value than the twins' do (one-sided Wilcoxon
signed-rank test of the paired |log ratios| at 1 %), or when its median ratio to serial is beyond 5 % (a bias,
whatever the twins do).

Networks tried. The serial pilot also measures how much CPU one network's runs take (this process and the
children it reaped: endpoints, delay elements, commands; `cpu_seconds`) per second of wall time: N beyond
`CPU_TARGET` of the usable CPUs' worth of networks is not tried, and that N itself is tried beside the doubling steps.
Where the pilot measured its endpoints' CPU, a run's cores are modelled from its rate (`jobs.CpuModel`): the networks
start runs by CPU, and N goes up to what the design's lightest runs fill.
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
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.host.affinity import all_cpus
from fecbench.runners.executors.engine import Engine, Finished
from fecbench.runners.executors.jobs import CpuModel, PilotRun, Starts, fit, run_bytes
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
    from fecbench.runners.executors.progress import Reporter

CANDIDATES = (1, 2, 4, 8, 16, 32)  # up to jobs.MAX_JOBS
PILOT_RUNS = 16
TRIES = 2                           # measurements of an N before it counts as changing the results
RATIO_TOLERANCE = 0.05
ALPHA = 0.01
#: The share of the usable CPUs the networks' runs may keep busy (the rest: the harness, bursts, the delay elements'
#: wake-ups); a serial pilot shorter than MIN_MEASURED_S measures no CPU share.
CPU_TARGET = 0.7
MIN_MEASURED_S = 1.0
MAX_NETWORKS = CANDIDATES[-1]


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
            "lateness_ok": all(x.get("ok") is not False for x in late), "lateness": late,
            "cpu_share": ends.get("cpu_share"), "client_wall_s": (outcome.client_wall_ms or 0) / 1000}


def execute(prepared: Prepared, pilot: list[Run], fillers: list[Run], jobs: int, link_backend: str | None,
            factory: TestbedFactory = MininetTestbed, cpu: CpuModel | None = None) -> dict[str, dict[str, Any]]:
    """Run the pilot on `jobs` networks at once, each kept busy (fillers) until the last pilot run ended; with a CPU
    model, a network starts its next run only once it fits the budget beside those in flight (`jobs.CpuModel`); runs
    start `jobs.START_GAP_S` apart while others run, as in a campaign."""
    metric = outcome_metric(prepared)[0]
    queue = [*pilot, *fillers]
    wanted = {run.key for run in pilot}
    results: dict[str, dict[str, Any]] = {}
    lock, done = threading.Condition(), threading.Event()
    in_flight: dict[str, float] = {}   # run key -> its expected cores
    starts = Starts(cpu, prepared.design)

    def admitted() -> bool:   # under the lock
        return starts.gap_open(bool(in_flight)) and starts.admits(starts.cost(queue[0]), list(in_flight.values()))

    testbeds: list[Testbed] = []
    with tempfile.TemporaryDirectory(prefix="fecbench-calibrate-") as logs:
        try:
            for _ in range(min(jobs, len(queue))):  # built one after another in this thread (building traps signals)
                testbeds.append(factory(prepared.topology, queue[0].values, link_backend))
            runners = [Runner(prepared, testbed, Path(logs)) for testbed in testbeds]

            def work(runner: Runner) -> None:
                while not done.is_set():
                    with lock:
                        while queue and not admitted() and not done.is_set():
                            lock.wait(0.5)
                        if not queue or done.is_set():
                            return
                        run = queue.pop(0)
                        in_flight[run.key] = starts.cost(run)
                        starts.started()
                    outcome, _ = run_one(runner, run)
                    with lock:
                        del in_flight[run.key]
                        lock.notify_all()
                        if run.key in wanted:
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

    def __init__(self, prepared: Prepared, db_path: Path, link_backend: str | None, reporter: Reporter | None = None,
                 factory: TestbedFactory = MininetTestbed) -> None:
        self.prepared, self.db_path, self.link_backend, self.reporter = prepared, db_path, link_backend, reporter
        self.factory = factory
        self.host: tuple[str, dict[str, Any]] | None = None   # backend and host information of its last session

    def __call__(self, pilot: list[Run]) -> dict[str, dict[str, Any]]:
        metric = outcome_metric(self.prepared)[0]
        results: dict[str, dict[str, Any]] = {}

        def keep(finished: Finished) -> None:   # a fidelity re-run's outcome replaces the first, as recorded
            results[finished.run.key] = _result(finished.run, finished.outcome, metric)

        executor = SerialExecutor(self.prepared, self.db_path, link_backend=self.link_backend,
                                  testbed_factory=self.factory)
        engine = Engine(self.prepared, self.db_path, executor, self.reporter, todo=pilot, on_finished=keep)
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


def _changed(serial: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]]) -> list[str]:
    """The runs that ended otherwise than serially (ok on one side only)."""
    return sorted(k for k in serial if other.get(k, {}).get("status") != serial[k]["status"]
                  and "ok" in (other.get(k, {}).get("status"), serial[k]["status"]))


def _paired(serial: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]]) -> dict[str, tuple[float, float]]:
    return {k: (serial[k]["value"], other[k]["value"]) for k in serial
            if k in other and serial[k]["value"] is not None and other[k]["value"] is not None}


def _median_ratio(pairs: list[tuple[float, float]], epsilon: float) -> float | None:
    """The median over (serial, other) pairs of (other + ε) ÷ (serial + ε), rounded as recorded; None without one."""
    ratios = [(b + epsilon) / (a + epsilon) for a, b in pairs if a + epsilon > 0]
    return round(statistics.median(ratios), 4) if ratios else None


def _biased(row: dict[str, Any]) -> bool:
    """The loaded pilot's median ratio to serial beyond the tolerance: a bias, whatever twins do."""
    return row.get("median_ratio") is not None and abs(row["median_ratio"] - 1) > RATIO_TOLERANCE


def compare(serial: dict[str, dict[str, Any]], loaded: dict[str, dict[str, Any]], epsilon: float) -> dict[str, Any]:
    """The loaded pilot against the serial one, paired by key: runs whose status differs, and over the runs ok
    on both sides the median ratio of (value + ε) and the Wilcoxon signed-rank p-value."""
    from scipy.stats import wilcoxon

    both = list(_paired(serial, loaded).values())
    differences = [b - a for a, b in both]
    try:
        p = float(wilcoxon(differences).pvalue) if any(differences) else 1.0
    except ValueError:  # too few pairs that differ
        p = 1.0
    return {"pairs": len(both), "changed_status": _changed(serial, loaded),
            "median_ratio": _median_ratio(both, epsilon),
            "wilcoxon_p": None if math.isnan(p) else round(p, 5)}


def against_twins(serial: dict[str, dict[str, Any]], loaded: dict[str, dict[str, Any]],
                  twins: dict[str, dict[str, Any]], epsilon: float) -> dict[str, Any]:
    """The loaded pilot and the serial twins, each against the serial pilot (see the module): their runs that ended
    otherwise, the one-sided Fisher p-value that the loaded pilot's are more frequent, and the one-sided Wilcoxon
    p-value that its |log ratio| to serial exceeds the twins' (paired by key, over the runs with three values)."""
    from scipy.stats import fisher_exact, wilcoxon

    flips, twin_flips = _changed(serial, loaded), _changed(serial, twins)
    n_loaded = sum(1 for k in serial if k in loaded)
    n_twins = sum(1 for k in serial if k in twins)
    table = [[len(flips), n_loaded - len(flips)], [len(twin_flips), n_twins - len(twin_flips)]]
    flips_p = float(fisher_exact(table, alternative="greater").pvalue) if flips else 1.0
    mine, theirs = _paired(serial, loaded), _paired(serial, twins)

    def stray(a: float, b: float) -> float:
        return abs(math.log((b + epsilon) / (a + epsilon))) if a + epsilon > 0 and b + epsilon > 0 else 0.0

    excess = [stray(*mine[k]) - stray(*theirs[k]) for k in mine if k in theirs]
    try:
        spread_p = float(wilcoxon(excess, alternative="greater").pvalue) if any(excess) else 1.0
    except ValueError:  # too few pairs that differ
        spread_p = 1.0
    return {"runs": n_twins, "changed_status": twin_flips, "flips_p": round(flips_p, 5),
            "spread_p": None if math.isnan(spread_p) else round(spread_p, 5),
            "median_ratio": _median_ratio(list(theirs.values()), epsilon)}


def summarise(jobs: int, results: dict[str, dict[str, Any]], serial: dict[str, dict[str, Any]] | None,
              epsilon: float, twins: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One row of the calibration: the worst p99s, the runs beyond a bound, the comparison (against the serial
    twins' own spread when they were measured), the verdict."""
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
        why += _outcome_reasons(row, None if twins is None else against_twins(serial, results, twins, epsilon))
    row["keeps_results"] = not why
    row["why"] = "; ".join(why)
    return row


def _outcome_reasons(row: dict[str, Any], twins: dict[str, Any] | None) -> list[str]:
    """Why the loaded pilot's outcomes differ from the serial ones: every difference without twins, only those
    beyond the twins' own with them (the median ratio's bias either way). Notes the twins in ``row``."""
    why = []
    if _biased(row):
        why.append(f"median ratio to serial {row['median_ratio']:.3f}")
    if twins is None:
        if row["changed_status"]:
            why.append(f"{len(row['changed_status'])} run(s) ended otherwise than serially")
        if row["wilcoxon_p"] is not None and row["wilcoxon_p"] < ALPHA:
            why.append(f"Wilcoxon p = {row['wilcoxon_p']:.2g} < {ALPHA:g}")
        return why
    row["twins"] = twins
    if twins["flips_p"] < ALPHA:
        why.append(f"{len(row['changed_status'])} run(s) ended otherwise than serially, serial twins "
                   f"{len(twins['changed_status'])} (Fisher p = {twins['flips_p']:.2g} < {ALPHA:g})")
    if twins["spread_p"] is not None and twins["spread_p"] < ALPHA:
        why.append(f"further from serial than the serial twins (Wilcoxon p = {twins['spread_p']:.2g} < {ALPHA:g})")
    return why


def outcomes_only(row: dict[str, Any]) -> bool:
    """A loaded pilot that failed by its runs' statuses or the spread of its metric alone, every run within its
    bounds and no bias beyond the tolerance: what the serial twins may explain."""
    return not row["keeps_results"] and not row["beyond_bound"] and not _biased(row) and "twins" not in row


class SerialTwins:
    """The pilot's runs once more, serially, on a network of their own and recorded nowhere: measured the first time
    a loaded pilot differs from the serial one by its outcomes alone, then kept (see the module)."""

    def __init__(self, prepared: Prepared, pilot: list[Run], link_backend: str | None,
                 factory: TestbedFactory) -> None:
        self.prepared, self.pilot, self.link_backend, self.factory = prepared, pilot, link_backend, factory
        self.results: dict[str, dict[str, Any]] | None = None

    def __call__(self) -> dict[str, dict[str, Any]]:
        if self.results is None:
            self.results = execute(self.prepared, self.pilot, [], 1, self.link_backend, self.factory)
        return self.results


def judge(jobs: int, loaded: dict[str, dict[str, Any]], serial: dict[str, dict[str, Any]], epsilon: float,
          twins: SerialTwins) -> dict[str, Any]:
    """A loaded pilot's row; against the serial twins (measured now if not yet) when its outcomes alone differ."""
    row = summarise(jobs, loaded, serial, epsilon)
    return summarise(jobs, loaded, serial, epsilon, twins()) if outcomes_only(row) else row


def cpu_seconds() -> float:
    """CPU time of this process and of the children it reaped (theirs included): a network's runs, the harness."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def wall_seconds() -> float:
    return time.monotonic()


def network_limit(cpu_s: float, wall_s: float, cpus: int) -> int | None:
    """The most networks whose runs fit in CPU_TARGET of ``cpus`` CPUs, one network having used ``cpu_s`` of CPU in
    ``wall_s`` (0 or 1: one network's runs take them already); None when the pilot was too short to measure."""
    if wall_s < MIN_MEASURED_S or cpu_s <= 0:
        return None
    return min(MAX_NETWORKS, math.floor(cpus * CPU_TARGET * wall_s / cpu_s))


def networks_to_try(limit: int | None, runs: int, candidates: tuple[int, ...] = CANDIDATES) -> list[int]:
    """The N > 1 to try in order: the doubling steps up to the CPU limit and the limit itself (2 at least: the pilot
    judges), never more networks than runs."""
    ceiling = min(runs, MAX_NETWORKS if limit is None else max(2, limit))
    steps = {jobs for jobs in candidates if 1 < jobs <= ceiling}
    if limit is not None and 1 < ceiling:
        steps.add(ceiling)
    return sorted(steps)


def calibrate(prepared: Prepared, link_backend: str | None, *, candidates: tuple[int, ...] = CANDIDATES,
              factory: TestbedFactory = MininetTestbed, pilot_runs: int = PILOT_RUNS,
              report: Callable[[dict[str, Any]], None] = lambda row: None, runs: list[Run] | None = None,
              serial_pilot: SerialPilot | None = None, cpus: int | None = None) -> dict[str, Any]:
    """Measure the serial pilot (drawn from `runs`, default the design's; run by `serial_pilot`, default
    unrecorded) and its CPU share, then each N in turn (``networks_to_try``, stopping after the first that changes
    the results), and choose the largest N before it (with a CPU model, ``fit_cpu``, the networks start runs by CPU).
    ``cpus``: the CPUs the networks share (default: this machine's usable ones)."""
    epsilon = outcome_metric(prepared)[1]
    pilot, fillers = pilot_of(prepared, pilot_runs, runs)
    cpu_before, wall_before = cpu_seconds(), wall_seconds()
    serial = (serial_pilot or unrecorded_serial_pilot(prepared, link_backend, factory))(pilot)
    cpu_s, wall_s = cpu_seconds() - cpu_before, wall_seconds() - wall_before
    cpus = cpus or len(all_cpus())
    cpu = fit_cpu(prepared, pilot, serial, cpu_s, cpus)
    limit = cpu.ceiling(prepared.runs, prepared.design, MAX_NETWORKS) if cpu else network_limit(cpu_s, wall_s, cpus)
    rows = [{**summarise(1, serial, None, epsilon), "tries": 1, "cpu_s": round(cpu_s, 2), "wall_s": round(wall_s, 2),
             "cpus": cpus, "network_limit": limit, "cpu_model": cpu.record() if cpu else None}]
    report(rows[-1])
    twins = SerialTwins(prepared, pilot, link_backend, factory)
    chosen = 1
    for jobs in networks_to_try(limit, len(prepared.runs), candidates):
        tries = 0
        while tries < TRIES:
            tries += 1
            loaded = execute(prepared, pilot, fillers, jobs, link_backend, factory, cpu)
            row = judge(jobs, loaded, serial, epsilon, twins)
            if row["keeps_results"]:
                break
        rows.append({**row, "tries": tries})
        report(rows[-1])
        if not row["keeps_results"]:
            break
        chosen = jobs
    return {**rule(prepared), "chosen": chosen, "pilot": [run.key for run in pilot], "rows": rows,
            "cpu_model": cpu.record() if cpu and chosen > 1 else None}


def fit_cpu(prepared: Prepared, pilot: list[Run], serial: dict[str, dict[str, Any]], cpu_s: float,
            cpus: int) -> CpuModel | None:
    """The CPU model (`jobs.CpuModel`) from the serial pilot's ok runs and its whole CPU; None if not fitted."""
    ok = [(run, serial[run.key]) for run in pilot if serial.get(run.key, {}).get("status") == "ok"]
    return fit([PilotRun(r.get("client_wall_s") or 0.0, run_bytes(run, prepared.design) * 8e-6, r.get("cpu_share"))
                for run, r in ok], cpu_s, cpus * CPU_TARGET)


def rule(prepared: Prepared) -> dict[str, Any]:
    """What a pilot is judged by, as recorded with the campaign."""
    metric, epsilon = outcome_metric(prepared)
    return {"metric": metric, "epsilon": epsilon,
            "endpoint_bound_ms": endpoint_timing.bound_ms(prepared.design.endpoint_bound_ms),
            "bound_ms": lateness.bound_ms(), "ratio_tolerance": RATIO_TOLERANCE, "alpha": ALPHA,
            "cpu_target": CPU_TARGET}
