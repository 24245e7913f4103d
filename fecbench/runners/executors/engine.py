"""The campaign engine: the one cycle every campaign goes through, whatever executes its runs.

select runs -> an executor starts them where it can -> each start and outcome is recorded (Recorder)
-> progress -> summary. Executors (serial: this process, one network; Dask: workers on many hosts)
only decide where a run executes and hand back what happened; they never touch the database, so how
a run is recorded is written once, here.

A circuit breaker watches each implementation label (one argument set): when its first
`breaker_runs` runs of this campaign all end `failed` the same way (the error's first line, digits
aside), its remaining runs are taken off the queue (they stay pending, run again by the next
`fecbench run`), and the breaker is recorded (the `breakers` table: `fecbench status`, the summary).

The executor is started before the database is opened: a network that cannot be built or a cluster
that cannot be used leaves no database behind. Ctrl-C (or SIGTERM) records the runs in flight as
`interrupted` (redone by the next `fecbench run`) and tears the executor down.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fecbench.records.status import Status
from fecbench.runners.executors.progress import Reporter, RichReporter, counts_text
from fecbench.runners.executors.quiet import FIDELITY_RERUNS, Quiet, wait_for_quiet
from fecbench.runners.executors.selection import RunQueue, runs_to_do
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.recorder import Recorder, check_free_space, impls_fingerprint, now_iso, read_statuses
from fecbench.timekeeping.checks import FLAGGED

if TYPE_CHECKING:
    from types import FrameType

# Consecutive harness errors (not implementation failures) after which the campaign stops.
MAX_HARNESS_ERRORS = 5
POLL_S = 0.5
# The circuit breaker: a label whose first BREAKER_RUNS runs all fail the same way is stopped (0: never).
BREAKER_RUNS = 5


# --- what executors and the engine exchange ---------------------------------------------------------

@dataclass
class Started:
    run: Run
    host: str           # where it executes (runs.host)
    backend: str        # the link backend there (runs.link_backend)


@dataclass
class Finished:
    run: Run
    outcome: Outcome
    harness_error: bool = False       # a fault of fecbench or the network, not of the implementation
    duration_s: float | None = None   # measured where it ran (default: since the engine recorded its start)
    # The executor runs it once more in this campaign (its worker was lost with it): why. The engine records this
    # outcome, keeps it aside (earlier_outcomes) and counts only the outcome of the run's next attempt.
    again: str | None = None


@dataclass
class Tail:
    """A network is idle, the queue empty, other runs still in flight (``Engine(fill_tail=...)`` may give more):
    each run in flight (key -> seconds since it started), the keys the engine starts or runs again itself, and how
    many networks have nothing to do."""
    running: dict[str, float]
    held: set[str]
    idle: int


class Executor(Protocol):
    """Where runs execute. Used as a context manager: leaving it tears everything down."""

    name: str

    def start(self, todo: list[Run]) -> None:
        """Build networks / set up workers. A UserError here stops the campaign before the database exists."""

    def backend(self) -> str: ...
    def host_info(self) -> dict[str, Any]: ...
    def host_info_changed(self) -> bool: ...
    def busy(self) -> bool:
        """Runs in flight, or lost runs it will run once more (`Finished.again`)."""

    def dispatch(self, queue: RunQueue) -> list[Started]:
        """Take the runs it can start now from the queue."""

    def collect(self, timeout: float) -> list[Finished]:
        """Runs finished (or lost with a worker) within `timeout` seconds."""

    def cancel(self, reason: str) -> list[Finished]:
        """Stop what is in flight; those runs, as `interrupted` outcomes."""

    def abort_reason(self) -> str | None: ...
    def __enter__(self) -> Executor: ...
    def __exit__(self, *exc: object) -> None: ...


# --- the cycle --------------------------------------------------------------------------------------

@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) end the campaign like Ctrl-C: runs in flight interrupted, network torn down."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass
class Breaker:
    """A label the circuit breaker stopped: its first `runs` runs all ended `status` with `error`."""
    label: str
    runs: int
    status: str
    error: str
    skipped: int                      # runs taken off the queue (still pending)

    def text(self) -> str:
        return (f"{self.label}: its first {self.runs} runs all ended {self.status} ({self.error}); "
                f"{self.skipped} more not run (pending; fix the cause, then run again)")


def failure_signature(outcome: Outcome) -> str:
    """How a run failed, for the circuit breaker: the error's first line, digits aside."""
    first = (outcome.error or "").split("\n")[0][:200]
    return re.sub(r"[0-9]+(\.[0-9]+)?", "#", first)


@dataclass
class Summary:
    total: int
    selected: int
    counts: Counter
    interrupted: bool = False
    aborted: str | None = None
    breakers: list[Breaker] = field(default_factory=list)
    out_of_time: int = 0              # runs left pending because the campaign reached its stop time
    retried: int = 0                  # re-runs of fidelity-flagged runs at the end (a run may be re-run twice)
    rounds: list[dict[str, Any]] = field(default_factory=list)   # each round of re-runs: runs, wait, outcome
    rerun_skipped: int = 0            # flagged runs a round did not reach before the stop time (still flagged)


class Engine:
    """Runs a prepared campaign's selected runs on an executor and records every start and outcome."""

    def __init__(self, prepared: Prepared, db_path: Path, executor: Executor, reporter: Reporter | None = None,
                 breaker_runs: int = BREAKER_RUNS, sample: int | None = None, only: list[Run] | None = None,
                 stop_at: float | None = None, todo: list[Run] | None = None,
                 fidelity_reruns: int = FIDELITY_RERUNS, on_finished: Callable[[Finished], None] | None = None,
                 quiet_wait: Callable[[], Quiet] = wait_for_quiet, asked: str | None = None, twins: bool = False,
                 fill_tail: Callable[[Tail], list[Run]] | None = None) -> None:
        self.prepared, self.db_path, self.executor = prepared, db_path, executor
        self.reporter = reporter or RichReporter()
        self.recorder: Recorder | None = None
        self.started_at: dict[str, float] = {}
        self.harness_errors = 0
        self.breaker_runs = breaker_runs
        self.first_failures: dict[str, list[tuple[str, str]]] = {}   # label -> (status, signature) so far
        self.breaker_settled: set[str] = set()                        # labels past their first runs
        self.queue: RunQueue | None = None
        self.sample = sample
        # `only`: these runs, in this order (those of them still to do), instead of the design's own order;
        # `stop_at` (time.monotonic()): no run starts after it, the rest stay pending (a time budget).
        self.only, self.stop_at = only, stop_at
        # `todo`: the runs a caller already selected (runs_to_do); otherwise the engine selects them.
        # `fidelity_reruns`: rounds of re-runs of the runs this campaign flagged (0: they stay flagged), each after
        # `quiet_wait` (`quiet.wait_for_quiet`).
        self.todo, self.fidelity_reruns, self.quiet_wait = todo, fidelity_reruns, quiet_wait
        # Finished runs to run again -> why (kept in earlier_outcomes as each starts again: one never reached keeps
        # its outcome) and whether this campaign's summary counted it (a re-run of a flagged run).
        self.again_why: dict[str, tuple[str, bool]] = {}
        self.asked = asked or "asked for by --retry or a reproduction"   # why finished runs in `retry` run again
        self.twins = twins   # the runs are twins (`fecbench run --twins`): recorded beside their runs (TwinRecorder)
        # `on_finished`: told of every outcome once recorded (the calibration's serial pilot reads them).
        self.on_finished = on_finished
        # `fill_tail`: more runs for networks the queue left idle while others finish (a reproduction's allocator).
        self.fill_tail, self.networks = fill_tail, 0
        self.retry: set[str] = set()
        self.before: dict[str, str] = {}
        self.finished_statuses: dict[str, str] = {}
        self.runs_done, self.run_seconds, self.estimated_seconds = 0, 0.0, 0.0
        self.durations: list[float] = []       # of the runs finished, in the order they finished
        self.build_s = 0.0                     # building the networks (or setting up the workers)
        self.estimated_wall_s: float | None = None   # the estimate printed at the start
        self.selected = 0                      # runs selected (a fidelity-flagged one may run again)
        self.summary = Summary(total=0, selected=0, counts=Counter())   # the current run()'s

    def run(self, retry: set[str]) -> Summary:
        prepared = self.prepared
        # The finished runs asked for again (--retry, a reproduction's second run of a failed or flagged run):
        # each one's outcome is kept aside before it runs (earlier_outcomes), never overwritten unseen.
        before = self.before = read_statuses(self.db_path) if retry else {}
        self.retry = retry
        todo = self.todo if self.todo is not None else runs_to_do(prepared, self.db_path, retry, self.sample,
                                                                   self.only)
        summary = self.summary = Summary(total=len(prepared.runs), selected=len(todo), counts=Counter())
        self.selected = len(todo)
        if not todo:
            return summary
        check_free_space(self.db_path.resolve().parent)
        with sigterm_as_interrupt(), self.executor as executor:
            started, wall = now_iso(), time.monotonic()
            executor.start(todo)  # networks and workers first: if they fail, no database is touched
            self.build_s = time.monotonic() - wall
            from fecbench.runners.experiment.estimate import remember
            from fecbench.runners.run.recorder import TwinRecorder

            self.recorder = (TwinRecorder if self.twins else Recorder).open(
                self.db_path, prepared, executor.backend(), executor.host_info(), impls_fingerprint(prepared.design))
            remember(self.db_path)   # later estimates on this machine learn from it, wherever it is
            self.again_why = {run.key: (f"{before[run.key]}: run again ({self.asked})", False)
                              for run in todo if before.get(run.key) in retry}
            try:
                self._cycle(todo, summary)
                self._retry_fidelity(todo, summary)
            except KeyboardInterrupt:
                self._record_all(executor.cancel("interrupted (Ctrl-C or SIGTERM)"), summary)
                raise
            finally:
                if summary.aborted:
                    self._record_all(executor.cancel(f"campaign stopped: {summary.aborted}"), summary)
                self._record_session(started, time.monotonic() - wall)
                self.recorder.close()
        return summary

    def _retry_fidelity(self, todo: list[Run], summary: Summary) -> None:
        """Runs this campaign flagged (`FLAGGED`: a check of timekeeping.checks found that the network or the
        endpoints did not keep to the design) run again at its end, one at a time once the machine is quieter
        (`quiet`), in up to `fidelity_reruns` rounds: each attempt's outcome is kept (earlier_outcomes) as it
        starts again, the last one is the run's."""
        for round_no in range(1, self.fidelity_reruns + 1):
            again = [run for run in todo if self.finished_statuses.get(run.key) == FLAGGED]
            if not again or summary.aborted or summary.out_of_time or self._past_stop():
                break
            quiet = self.quiet_wait()
            why = (f"fidelity: re-run {round_no} of at most {self.fidelity_reruns} at the end of the campaign, one "
                   f"at a time ({quiet.text()})")
            self.again_why = {run.key: (why, True) for run in again}
            self.reporter.say(f"re-running {len(again)} fidelity-flagged run(s), round {round_no} of at most "
                              f"{self.fidelity_reruns}, one at a time ({quiet.text()}; --reruns 0: keep them "
                              "flagged)")
            before = summary.retried
            self._cycle(again, summary, one_at_a_time=True)
            still = sum(self.finished_statuses.get(run.key) == FLAGGED for run in again)
            not_reached = len(self.again_why)          # the stop time came first: still flagged, not re-run
            summary.rerun_skipped += not_reached
            summary.rounds.append({"round": round_no, "runs": len(again), "ran": summary.retried - before,
                                   "still_flagged": still, "not_reached": not_reached,
                                   "waited_s": round(quiet.waited_s, 1), "pressure": quiet.pressure})
            self.again_why = {}
        summary.counts = +summary.counts   # drop the zero counts

    def _past_stop(self) -> bool:
        return self.stop_at is not None and time.monotonic() >= self.stop_at

    def _record_session(self, started: str, wall_s: float) -> None:
        """This campaign process's share of the campaign, for later estimates (runners.experiment.estimate)."""
        executor = self.executor
        assert self.recorder is not None
        from fecbench.runners.experiment.estimate import schedule_seconds

        calibrated = getattr(executor, "calibration", None) is not None
        jobs = getattr(executor, "jobs", 1)
        extra = {"build_s": self.build_s, "scheduled_s": schedule_seconds(self.durations, jobs),
                 "estimated_wall_s": self.estimated_wall_s, "selected": self.selected,
                 "fidelity_reruns": {"budget": self.fidelity_reruns, "rounds": self.summary.rounds}}
        starts = getattr(executor, "starts", None)
        if starts is not None and starts.record() is not None:
            extra["cpu_budget"] = starts.record()     # what the flags did to --jobs auto's CPU budget
        self.recorder.session(started_at=started, wall_s=wall_s, jobs=jobs,
                              executor="jobs auto" if calibrated else executor.name, runs=self.runs_done,
                              run_s=self.run_seconds, estimate_s=self.estimated_seconds, json=json.dumps(extra))

    def _cycle(self, todo: list[Run], summary: Summary, one_at_a_time: bool = False) -> None:
        """Run ``todo`` to the end (or the stop time): as many at once as the executor takes, or with
        ``one_at_a_time`` (re-runs of flagged runs), the next only once none is in flight."""
        executor = self.executor
        queue = self.queue = RunQueue(todo)
        name = self.prepared.design.name
        if not one_at_a_time:
            from fecbench.runners.experiment.estimate import estimate_campaign

            estimate = estimate_campaign(self.prepared, todo, getattr(executor, "jobs", 1), self.db_path)
            self.estimated_wall_s = estimate.wall_s
            self.reporter.say(f"{len(todo)} run(s) to do on {executor.name}, {estimate.text()}")
        with self.reporter.bar(name if not one_at_a_time else f"{name} (re-runs)", len(todo)) as progress:
            done_runs, left_out = 0, 0
            while (queue or executor.busy()) and not summary.aborted:
                if self.stop_at is not None and queue and time.monotonic() >= self.stop_at:
                    drained = len(queue.drain())
                    left_out += drained
                    if not one_at_a_time:   # pending runs; a re-run not reached stays flagged (again_why)
                        summary.out_of_time += drained
                for started in self._dispatch(queue, one_at_a_time):
                    run = started.run
                    progress.update(description=f"{name} [{run.label} p{run.point} r{run.repetition}]")
                done = executor.collect(POLL_S)
                done_runs += sum(f.again is None for f in done)   # a lost run counts when it ends again
                self._record_all(done, summary)
                if done and not queue and not one_at_a_time and executor.busy():
                    self._fill(queue, todo, summary)
                progress.update(completed=done_runs, counts=counts_text(summary.counts),
                                total=len(todo) - sum(b.skipped for b in summary.breakers) - left_out)
                if executor.host_info_changed():
                    assert self.recorder is not None
                    self.recorder.update_host(executor.host_info())
                summary.aborted = summary.aborted or executor.abort_reason()

    def _dispatch(self, queue: RunQueue, one_at_a_time: bool) -> list[Started]:
        """Start what the executor takes from ``queue`` (one run, none in flight, with ``one_at_a_time``): a re-run
        keeps its earlier outcome aside first; each start recorded."""
        executor = self.executor
        if one_at_a_time:
            if executor.busy() or not queue:
                return []
            single = RunQueue([queue.pop_next()])
            started = executor.dispatch(single)
            queue.put_back(single.drain())
        else:
            started = executor.dispatch(queue)
        assert self.recorder is not None
        for each in started:
            why, counted = self.again_why.pop(each.run.key, (None, False))
            if why is not None:
                self.recorder.keep_earlier(each.run, why)
            if counted:
                self.summary.counts[FLAGGED] -= 1   # its outcome is the new attempt's
                self.summary.retried += 1
            self.recorder.started(each.run, each.backend, each.host)
            self.started_at[each.run.key] = time.monotonic()
        self.networks = max(self.networks, len(self.started_at))
        return started

    def _fill(self, queue: RunQueue, todo: list[Run], summary: Summary) -> None:
        """Runs ``fill_tail`` gives for the networks now idle, queued (and added to ``todo``, pending first): not
        those held, nor of a label the breaker stopped; a finished one asked for again keeps its outcome aside."""
        if self.fill_tail is None or summary.aborted or self._past_stop():
            return
        now = time.monotonic()
        running = {key: now - started for key, started in self.started_at.items()}
        held = set(running) | {run.key for run in todo if self.finished_statuses.get(run.key) == FLAGGED}
        stopped = {breaker.label for breaker in summary.breakers}
        more = [run for run in self.fill_tail(Tail(running, held, max(0, self.networks - len(running))))
                if run.key not in held and run.label not in stopped]
        if not more:
            return
        assert self.recorder is not None
        self.recorder.add_pending(self.prepared, more)
        for run in more:
            status = self.finished_statuses.get(run.key, self.before.get(run.key))
            if status in self.retry:
                self.again_why[run.key] = (f"{status}: run again ({self.asked})", False)
        queue.add(more)
        todo.extend(more)
        summary.selected += len(more)
        self.selected += len(more)
        self.reporter.say(f"{len(more)} more run(s) for the idle network(s) while {len(running)} run(s) finish")

    def _record_all(self, done: list[Finished], summary: Summary) -> None:
        for finished in done:
            self._record(finished, summary)

    def _record(self, finished: Finished, summary: Summary) -> None:
        assert self.recorder is not None
        started = self.started_at.pop(finished.run.key, time.monotonic())
        duration = finished.duration_s if finished.duration_s is not None else time.monotonic() - started
        self.recorder.finished(finished.run, finished.outcome, duration)
        if finished.again is not None:
            self.recorder.keep_earlier(finished.run, finished.again)
            return
        if self.on_finished is not None:
            self.on_finished(finished)
        status = finished.outcome.status
        self.finished_statuses[finished.run.key] = status
        if status != Status.INTERRUPTED:
            self.runs_done += 1
            self.run_seconds += duration
            self.durations.append(duration)
            self.estimated_seconds += self.prepared.estimate(finished.run)
        summary.counts[status] += 1
        if status == Status.INTERRUPTED:
            summary.interrupted = True
        self.harness_errors = self.harness_errors + 1 if finished.harness_error else 0
        if self.harness_errors >= MAX_HARNESS_ERRORS and not summary.aborted:
            summary.aborted = f"{self.harness_errors} harness errors in a row, last: {finished.outcome.error}"
        if status != Status.INTERRUPTED and not finished.harness_error:
            self._watch(finished, summary)

    def _watch(self, finished: Finished, summary: Summary) -> None:
        """The circuit breaker: the first `breaker_runs` runs of a label, all failed the same way, stop it."""
        label = finished.run.label
        if self.breaker_runs <= 0 or label in self.breaker_settled:
            return
        seen = self.first_failures.setdefault(label, [])
        seen.append((finished.outcome.status, failure_signature(finished.outcome)))
        if finished.outcome.status != Status.FAILED or len(set(seen)) > 1:
            self.breaker_settled.add(label)     # not all the same failure: the label runs to the end
            return
        if len(seen) < self.breaker_runs:
            return
        self.breaker_settled.add(label)
        dropped = self.queue.drop_label(label) if self.queue is not None else []
        error = (finished.outcome.error or "").split("\n")[0][:200]
        breaker = Breaker(label=label, runs=len(seen), status=finished.outcome.status, error=error,
                          skipped=len(dropped))
        summary.breakers.append(breaker)
        assert self.recorder is not None
        self.recorder.breaker(breaker.label, breaker.runs, breaker.status, breaker.error, breaker.skipped)
        self.reporter.say(f"[red]circuit breaker: {breaker.text()}[/]")


def summary_done(summary: Summary) -> int:
    return sum(summary.counts.values())
