"""How long a campaign will take here: the duration model (runners.experiment.runs.estimate_seconds) corrected by
what this machine has measured, divided by the networks that run at once.

- Once some of the campaign's own runs are done (its database), a run's estimate is what they measured: the
  median duration of its point's runs of the same label, workload and size (other repetitions), else the model
  times the median of measured ÷ modelled over the campaign's runs of that label, workload and size (3 or more).
- Otherwise each run's estimate is the model times the median of measured ÷ modelled duration of the ok runs of
  the same implementation and workload in this machine's results databases (results/*.sqlite, every database
  a campaign of this machine wrote wherever it is: the machine's list of them, FECBENCH_HISTORY, default
  ~/.cache/fecbench/databases.txt, and the campaign's own), preferring runs done with the same number of
  networks at once (a busy machine makes every run longer); 3 runs or more, else all implementations' runs
  of the workload, else 1.
- The campaign's wall time: building its networks, then its runs handed out in order to the first free
  of N networks (list scheduling of the estimates), times how much longer earlier campaigns here took
  than the same scheduling of their own measured runs (waiting for results, checks between runs: the
  sessions table, with the same N where there is one), else the scheduling alone (said so), times the
  runs they did per run selected (fidelity-flagged runs are run again at the end).
- A run whose estimate reaches the design's time limit would end `timeout`: said, with the runs; a
  campaign over 12 h is said too, with the `--sample` and `--jobs` choices that would fit.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from fecbench.host.paths import RESULTS_DIR, user_cache_file
from fecbench.inputs.errors import UserError
from fecbench.records.run_records import measured_durations, sessions_and_durations
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run

MIN_RUNS = 3                 # measured runs needed to trust a factor
LONG_S = 12 * 3600.0         # a campaign longer than this gets a word and the choices that fit
JOB_CHOICES = (2, 4, 8, 16)


#: Building one network (Mininet, delay elements, droppers) when none was measured here.
BUILD_S = 1.0


def schedule_seconds(durations: list[float], jobs: int) -> float:
    """The wall time of runs handed out in order to the first free of `jobs` networks."""
    slots = [0.0] * max(1, jobs)
    for seconds in durations:
        slots[slots.index(min(slots))] += seconds
    return max(slots)


@dataclass
class History:
    """What earlier campaigns on this machine measured."""
    ratios: dict[tuple[str, str, int | None], list[float]] = field(default_factory=lambda: defaultdict(list))
    slowdown: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))  # jobs -> wall ÷ schedule
    again: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))  # jobs -> runs done ÷ selected
    build: list[float] = field(default_factory=list)          # seconds per network built
    auto_jobs: dict[str, int] = field(default_factory=dict)   # design name -> the N `--jobs auto` chose last

    def factor(self, impl: str, workload: str, jobs: int) -> tuple[float, int]:
        """measured ÷ modelled for this implementation and workload (same jobs first); runs it rests on."""
        for key in ((impl, workload, jobs), (impl, workload, None), ("*", workload, jobs), ("*", workload, None)):
            values = self.ratios.get(key, [])
            if len(values) >= MIN_RUNS:
                return median(values), len(values)
        return 1.0, 0

    def slower(self, jobs: int) -> tuple[float, bool]:
        """Wall time ÷ the scheduled runs of earlier campaigns with `jobs` networks (else any); measured?"""
        values = self.slowdown.get(jobs) or [v for values in self.slowdown.values() for v in values]
        return (median(values), jobs in self.slowdown) if values else (1.0, False)

    def runs_again(self, jobs: int) -> float:
        """Runs done per run selected with `jobs` networks (fidelity-flagged runs run again at the end)."""
        values = self.again.get(jobs) or [v for values in self.again.values() for v in values]
        return median(values) if values else 1.0

    def build_s(self, jobs: int) -> float:
        return jobs * (median(self.build) if self.build else BUILD_S)


@dataclass
class MeasuredDurations:
    """What the campaign's own runs already done measured (its database): durations per point, label, workload and
    size, and measured ÷ modelled per label, workload and size."""
    at_point: dict[tuple, list[float]] = field(default_factory=lambda: defaultdict(list))
    ratios: dict[tuple, list[float]] = field(default_factory=lambda: defaultdict(list))
    runs: int = 0

    def seconds(self, prepared: Prepared, run: Run) -> float | None:
        """The run's estimate from the campaign's own measured runs, or None when they say nothing of it."""
        same = self.at_point.get((run.label, run.workload, run.size, run.point))
        if same:
            return median(same)
        ratios = self.ratios.get((run.label, run.workload, run.size), [])
        return prepared.estimate(run) * median(ratios) if len(ratios) >= MIN_RUNS else None


def measured_here(prepared: Prepared, db_path: Path | None) -> MeasuredDurations:
    """The campaign's runs its database holds a duration of (ok, timeout or flagged)."""
    measured = MeasuredDurations()
    durations = measured_durations(db_path) if db_path is not None and db_path.is_file() else {}
    for run in prepared.runs if durations else []:
        seconds = durations.get(run.key)
        if seconds is None:
            continue
        measured.runs += 1
        measured.at_point[(run.label, run.workload, run.size, run.point)].append(seconds)
        model = prepared.estimate(run)
        if model > 0:
            measured.ratios[(run.label, run.workload, run.size)].append(seconds / model)
    return measured


def _read(db: Path, history: History) -> None:
    sessions, rows = sessions_and_durations(db)
    jobs_of = {}
    for runner, jobs, executor, wall_s, extra, name, runs in sessions:
        jobs_of[runner] = jobs
        extra = json.loads(extra or "{}")
        build, scheduled = extra.get("build_s"), extra.get("scheduled_s")
        if build is not None and jobs:
            history.build.append(build / jobs)
        if wall_s and scheduled and build is not None:
            history.slowdown[int(jobs)].append((wall_s - build) / scheduled)
        if extra.get("selected") and runs:
            history.again[int(jobs)].append(runs / extra["selected"])
        if executor == "jobs auto" and name:
            history.auto_jobs[name] = int(jobs)
    for impl, workload, duration, estimate, runner in rows:
        jobs = jobs_of.get(runner)
        keys = {(impl, workload, None), ("*", workload, None)}
        if jobs is not None:
            keys |= {(impl, workload, jobs), ("*", workload, jobs)}
        for key in keys:
            history.ratios[key].append(duration / estimate)


HISTORY_ENV = "FECBENCH_HISTORY"


def history_path() -> Path:
    """The machine's list of the databases its campaigns wrote (one path a line)."""
    return user_cache_file(HISTORY_ENV, "databases.txt")


def remember(db: Path) -> None:
    """A campaign's database, added to the machine's list (once): later estimates learn from it wherever it is.
    A list that cannot be written (another user's, a read-only home) costs the estimates, never the campaign."""
    path = history_path()
    entry = str(db.resolve())
    try:
        known = path.read_text().splitlines() if path.exists() else []
        if entry not in known:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as out:
                out.write(entry + "\n")
    except OSError:
        pass


def machine_history(db_path: Path | None = None, results: Path = RESULTS_DIR) -> History:
    """Every results database of this machine: its results folder's, those its campaigns wrote elsewhere (the
    machine's list, `history_path`), and the campaign's own."""
    history = History()
    dbs = sorted(results.glob("*.sqlite")) if results.is_dir() else []
    try:
        listed = [Path(line) for line in history_path().read_text().splitlines() if line.strip()]
    except OSError:
        listed = []
    seen = {d.resolve() for d in dbs}
    for db in [*listed, *([db_path] if db_path is not None else [])]:
        if db.exists() and db.resolve() not in seen:
            seen.add(db.resolve())
            dbs.append(db)
    for db in dbs:
        try:
            _read(db, history)
        except (sqlite3.Error, UserError):   # a file that is no (longer a) results database: nothing to learn
            continue
    return history


@dataclass
class CampaignEstimate:
    runs: int
    jobs: int
    serial_s: float               # the runs one after the other
    wall_s: float                 # with `jobs` networks
    measured_runs: int            # runs of this machine the factors rest on
    slowdown_measured: bool       # the wall ÷ schedule factor comes from campaigns with this N
    warnings: list[str] = field(default_factory=list)
    own_runs: int = 0             # the campaign's own runs done whose durations the estimates use
    per_run: dict[str, float] = field(default_factory=dict)   # run key -> its estimate (s)

    def text(self) -> str:
        basis = (f"corrected by {self.measured_runs} runs measured on this machine" if self.measured_runs
                 else "the model alone (no runs measured on this machine yet)")
        if self.own_runs:
            basis = (f"from the {self.own_runs} run(s) of this campaign already measured (their point's runs of "
                     f"the same label and size, else their label and size)"
                     + ("" if not self.measured_runs else f", else {basis}"))
        at_once = "" if self.jobs == 1 else f" with {self.jobs} networks"
        basis += "" if self.slowdown_measured else f" (no campaign with {self.jobs} network(s) measured here yet)"
        return (f"estimated {_duration(self.wall_s)} for {self.runs} run(s){at_once}, {basis}"
                + (f"; one after the other {_duration(self.serial_s)}" if self.jobs > 1 else ""))


def duration_text(seconds: float) -> str:
    """A duration as the estimates say it: s under 2 min, min under 1.5 h, else h."""
    return _duration(seconds)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def run_seconds(prepared: Prepared, run: Run, history: History, jobs: int,
                own: MeasuredDurations | None = None) -> tuple[float, float, int]:
    """(estimate, uncapped estimate, runs measured on this machine: 0 when `own`, the campaign's own measured runs,
    gave it) of one run with `jobs` networks busy."""
    seconds = own.seconds(prepared, run) if own is not None and run.impl.supports(run.workload) else None
    if seconds is not None:
        return seconds, seconds, 0
    factor, measured = history.factor(run.impl.name, run.workload, jobs)
    return prepared.estimate(run) * factor, prepared.estimate(run, capped=False) * factor, measured


def estimate_campaign(prepared: Prepared, todo: list[Run], jobs: int | None, db_path: Path | None = None,
                      history: History | None = None) -> CampaignEstimate:
    """The campaign's estimate with `jobs` networks (None: `--jobs auto`, the N it chose last, else 1)."""
    history = history if history is not None else machine_history(db_path)
    warnings: list[str] = []
    if jobs is None:
        chosen = history.auto_jobs.get(prepared.design.name)
        if chosen is None:
            warnings.append("--jobs auto: no earlier calibration of this design here; estimated for one network "
                            "(the calibration runs first: --dry-run says what it runs and about how long)")
        jobs = chosen or 1
    seconds, limit_hits, measured, durations = 0.0, defaultdict(list), 0, []
    limit = prepared.design.timeout_s
    own = measured_here(prepared, db_path)
    per_run: dict[str, float] = {}
    for run in todo:
        estimate, uncapped, used = run_seconds(prepared, run, history, jobs, own)
        seconds += estimate
        durations.append(estimate)
        per_run[run.key] = estimate
        measured = max(measured, used)
        if run.impl.supports(run.workload) and uncapped >= limit:
            limit_hits[(run.label, run.size)].append(uncapped)
    for (label, size), values in sorted(limit_hits.items(), key=lambda kv: str(kv[0])):
        what = f"{size} B" if size is not None else "messages"
        spread = f"{min(values):.0f}" + (f"–{max(values):.0f}" if round(max(values)) > round(min(values)) else "")
        warnings.append(f"{len(values)} run(s) of {label}, {what} are estimated at {spread} s, at or beyond "
                        f"design.timeout_s = {limit:g} s: they would end timeout (raise timeout_s)")
    wall = wall_seconds(durations, jobs, history)
    result = CampaignEstimate(runs=len(todo), jobs=jobs, serial_s=seconds, wall_s=wall, measured_runs=measured,
                              slowdown_measured=history.slower(jobs)[1], warnings=warnings,
                              own_runs=own.runs if per_run and own.runs else 0, per_run=per_run)
    if wall > LONG_S:
        result.warnings.append(_long_advice(result, history, durations))
    return result


def wall_seconds(durations: list[float], jobs: int, history: History) -> float:
    """Building `jobs` networks, then the runs scheduled on them, slowed as earlier campaigns here were."""
    jobs = max(1, min(jobs, len(durations)))
    again = history.runs_again(jobs)
    return history.build_s(jobs) + schedule_seconds(durations, jobs) * history.slower(jobs)[0] * again


def _long_advice(result: CampaignEstimate, history: History, durations: list[float]) -> str:
    sample = int(len(durations) * LONG_S / result.wall_s)
    walls = {n: wall_seconds(durations, n, history) for n in JOB_CHOICES if n > result.jobs}
    fits = [n for n, wall in walls.items() if wall <= LONG_S]
    jobs = (f", or --jobs {fits[0]} (about {_duration(walls[fits[0]])}"
            + ("" if history.slower(fits[0])[1] else "; not measured here: --jobs auto checks what this machine "
               "keeps accurate") + ")") if fits else ""
    return (f"this campaign is estimated at {_duration(result.wall_s)}, more than {LONG_S / 3600:.0f} h: "
            f"--sample {max(1, sample)} runs a pilot that fits{jobs}; a run can be stopped (Ctrl-C) and resumed")


#: The host counts a projection is given for (`fecbench plan`, a reproduction's page).
HOST_COUNTS = (1, 2, 5, 10, 20)


def on_hosts(durations: list[float], per_host: int, hosts: int, history: History) -> float:
    """Wall time of runs whose estimates are `durations` on `hosts` hosts like this one, each running `per_host`
    networks: list-scheduled on hosts × per_host networks, slowed as campaigns with `per_host` networks were here
    (the hosts share nothing but the coordinator, whose cost per run is tens of milliseconds: designs/README.md,
    "Many hosts, measured")."""
    networks = max(1, min(hosts * per_host, len(durations)))
    again = history.runs_again(per_host)
    return (history.build_s(per_host) + schedule_seconds(durations, networks) * history.slower(per_host)[0] * again)


def hosts_text(seconds_for: dict[int, float]) -> str:
    """'with H hosts like this one: T' for each host count."""
    return "; ".join(f"with {h} host{'s' if h > 1 else ''} like this one: {_duration(s)}"
                     for h, s in sorted(seconds_for.items()))


def hosts_projection(prepared: Prepared, todo: list[Run], jobs: int | None, db_path: Path | None = None,
                     counts: tuple[int, ...] = HOST_COUNTS) -> tuple[float, dict[int, float], int]:
    """The campaign's machine time (its runs one after the other, at this machine's measured durations) and its
    wall time on H hosts like this one, each with the networks it would run here (`jobs`; None: what `--jobs auto`
    chose last for the design, else 1); those networks per host."""
    history = machine_history(db_path)
    per_host = jobs if jobs is not None else history.auto_jobs.get(prepared.design.name, 1)
    own = measured_here(prepared, db_path)
    durations = [run_seconds(prepared, run, history, per_host, own)[0] for run in todo]
    return sum(durations), {h: on_hosts(durations, per_host, h, history) for h in counts}, per_host
