"""A campaign: prepare (plan + validate everything), then execute every run into the database.

prepare() needs neither root nor a network: it parses the design, loads the topology, makes the
plan, checks every point against the topology and the loss section, and enumerates the runs.
execute() builds the topology once, reconfigures it per run, re-seeds the droppers with the run's
loss seed, runs the implementation's server and client, and records everything (see fecbench.db).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import shutil
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench import __version__
from fecbench import db as dbmod
from fecbench.errors import SpecError, UserError
from fecbench.runners import procs
from fecbench.runners.design import Design, parse_design
from fecbench.runners.metrics import MetricsError, collect_metrics, partial_metrics
from fecbench.runners.runs import Run, enumerate_runs, estimate_seconds
from fecbench.specs import load_toml

# link_stats column -> the dropper's counter name.
_DROPPER_NAMES = {"ge_good": "good", "ge_bad": "bad", "gso_seen": "gso"}
RETRYABLE = ("failed", "timeout", "unsupported", "fidelity", "interrupted")
# Consecutive harness errors (not implementation failures) after which the campaign stops.
MAX_HARNESS_ERRORS = 5


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Prepared:
    design: Design
    topology: Any
    topology_text: str
    space: Any
    plan: Any
    points: dict[int, dict[str, Any]]
    factor_types: dict[str, str]
    experiment_hash: str
    runs: list[Run]
    rtt_ms: dict[int, float] = field(default_factory=dict)       # per point, path 1
    rate_mbit: dict[int, float | None] = field(default_factory=dict)

    def estimate(self, run: Run) -> float:
        rtt = self.rtt_ms.get(run.point)
        rate = self.rate_mbit.get(run.point)
        values = dict(run.values)
        if rtt is not None:
            values = {**values, "owd": rtt / 2}
        if rate:
            values["bw"] = rate
        probe = Run(**{**run.__dict__, "values": values})
        return estimate_seconds(probe, self.design)


def _path_of(topology: Any, link: str) -> int | None:
    """The 1-based path a link belongs to, or None if it is on no path or on several."""
    paths = [i + 1 for i in range(topology.paths) if any(spec.id == link for spec, _ in topology.path_links(i))]
    return paths[0] if len(paths) == 1 else None


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def prepare(design_path: str | Path) -> Prepared:
    """Validate the whole design (implementations, planner, topology, loss) and enumerate its runs."""
    from fecbench.designs import make_plan, parse_space
    from fecbench.topologies import load_topology

    design = parse_design(design_path)
    topology = load_topology(design.topology_path)
    topology_text = Path(design.topology_path).read_text()
    space = parse_space(design.space, paths=topology.paths)
    for entry in design.impls:
        entry.descriptor.check_paths(entry.args, topology.paths, design.path, f"impl.{entry.label}.args")
    plan = make_plan(space, design.seed)
    frame = plan.points
    factor_names = list(space.factor_names)

    factor_types: dict[str, str] = {}
    for name in frame.columns:
        kind = frame[name].dtype.kind
        factor_types[str(name)] = "REAL" if kind in "biuf" else "TEXT"
    points = {int(idx): {str(k): _plain(v) for k, v in row.items()} for idx, row in frame.iterrows()}

    # Every factor the topology and the loss section use must come from the space (or a topology default).
    defaults = getattr(topology, "defaults", {}) or {}
    for name in sorted(topology.factors()):
        if name not in factor_names and name not in defaults:
            raise SpecError(design.path, "space.factors",
                            f"the topology {design.topology_path} uses factor {name!r}, which the space does "
                            "not define", factor_names)
    lossy = topology.lossy_links()
    links = design.loss.links if design.loss.links is not None else lossy
    for link in links:
        if link not in lossy:
            raise SpecError(design.path, "loss.links", f"no lossy link {link!r} in {design.topology_path} "
                            "(droppers sit on links marked loss = true)", lossy)
    if design.loss.model != "none" and not links:
        raise SpecError(design.path, "loss.model", f"the topology {design.topology_path} has no lossy link "
                        "(mark one with loss = true, or list links in loss.links)")
    link_paths = {link: _path_of(topology, link) for link in links}
    for link, path in link_paths.items():
        if design.loss.per_path() and path is None:
            raise SpecError(design.path, "loss", f"'{{path}}' is used but link {link!r} is not on exactly one path")
        for key, name in design.loss.factor_refs(path).items():
            if name not in factor_names:
                raise SpecError(design.path, f"loss.{key}", f"unknown factor {name!r}", factor_names)

    rtt_ms: dict[int, float] = {}
    rate_mbit: dict[int, float | None] = {}
    for point, values in points.items():
        try:
            resolved = topology.resolve(values)
        except UserError as exc:
            raise SpecError(design.path, f"point {point}", f"the topology rejects this point: {exc}") from None
        for path in set(link_paths.values()):
            for name, value in design.loss.values(values, path).items():
                if not 0.0 <= value <= 1.0 or math.isnan(value):
                    raise SpecError(design.path, f"loss.{name}",
                                    f"point {point}: probability {value!r} outside [0, 1]")
        rtt_ms[point] = topology.configured_rtt(0, resolved)
        rate_mbit[point] = topology.path_rate(0, resolved)

    # The parsed topology, not its text: editing a comment must not orphan the results already obtained.
    experiment_hash = design.experiment_hash(json.dumps(load_toml(design.topology_path), sort_keys=True,
                                                        default=str))
    runs = enumerate_runs(design, points, experiment_hash)
    return Prepared(design=design, topology=topology, topology_text=topology_text, space=space, plan=plan,
                    points=points, factor_types=factor_types, experiment_hash=experiment_hash, runs=runs,
                    rtt_ms=rtt_ms, rate_mbit=rate_mbit)


# --- the database side ------------------------------------------------------------------------

def open_campaign(prepared: Prepared, conn: sqlite3.Connection, link_backend: str,
                  host_info: dict[str, Any], impls_info: dict[str, Any]) -> int:
    """Find this design's campaign row (same design text) or create one; add points and pending runs."""
    from fecbench.cli import git_sha

    design = prepared.design
    with dbmod.transaction(conn):
        campaign_id = dbmod.find_campaign(conn, design.hash)
        if campaign_id is None:
            campaign_id = dbmod.insert_campaign(
                conn, name=design.name, design_path=str(design.path), design_text=design.text,
                design_hash=design.hash, fecbench_version=__version__, git_sha=git_sha(), created_at=now_iso(),
                host_json=host_info, impls_json=impls_info, plan_json=_manifest(prepared.plan),
                seed=design.seed, repetitions=design.repetitions, topology=str(design.topology_path),
                link_backend=link_backend)
        else:
            dbmod.update_campaign(conn, campaign_id, host_json=host_info, impls_json=impls_info,
                                  link_backend=link_backend, git_sha=git_sha())
        dbmod.ensure_factor_columns(conn, prepared.factor_types)
        dbmod.insert_points(conn, campaign_id, ({"point": p, **v} for p, v in prepared.points.items()))
        dbmod.insert_pending_runs(conn, (run.row(campaign_id) for run in prepared.runs))
    return campaign_id


def _manifest(plan: Any) -> dict[str, Any]:
    manifest = getattr(plan, "manifest", {}) or {}
    return json.loads(json.dumps(manifest, default=str))


def select_runs(prepared: Prepared, statuses: dict[str, str], retry: set[str]) -> list[Run]:
    """Runs still to do: never finished (pending/interrupted), plus the statuses asked for by --retry."""
    todo_statuses = {"pending", "interrupted"} | set(retry)
    return [run for run in prepared.runs if statuses.get(run.key, "pending") in todo_statuses]


def parse_retry(text: str | None) -> set[str]:
    if not text:
        return set()
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    unknown = wanted - set(RETRYABLE)
    if unknown:
        raise UserError(f"--retry: unknown status {sorted(unknown)[0]!r} (allowed: {', '.join(RETRYABLE)})")
    return wanted


# --- one run ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    status: str
    error: str | None = None
    metrics: dict[str, Any] | None = None
    client_wall_ms: float | None = None
    server_log: str | None = None
    client_log: str | None = None
    link_stats: list[dict[str, Any]] = field(default_factory=list)
    fidelity: list[dict[str, Any]] = field(default_factory=list)
    verdict_logs: list[tuple[str, str, bytes]] = field(default_factory=list)
    link_events: list[dict[str, Any]] = field(default_factory=list)   # a link schedule's applied changes


class Executor:
    """Runs the selected runs of a prepared campaign on one network, recording each in the database."""

    def __init__(self, prepared: Prepared, conn: sqlite3.Connection, net: Any, log_root: Path,
                 keep_logs: bool = False) -> None:
        self.prepared, self.conn, self.net = prepared, conn, net
        self.design = prepared.design
        self.log_root, self.keep_logs = log_root, keep_logs
        self.fidelity_cache: dict[int, list[dict[str, Any]]] = {}
        self.host = os.uname().nodename
        self.binaries = {e.label: e.descriptor.require_binaries() for e in self.design.impls}
        self.loss_links = (self.design.loss.links if self.design.loss.links is not None
                           else prepared.topology.lossy_links())
        self.processes: list[procs.Process] = []
        self.link_paths = {link: _path_of(prepared.topology, link) for link in self.loss_links}

    # Each (link, direction) gets its own dropper stream, so the patterns of links are independent
    # but all fixed by the run's loss seed.
    def streams(self) -> list[tuple[str, str, int]]:
        out = []
        for i, link in enumerate(self.loss_links):
            for direction in self.design.loss.directions:
                out.append((link, direction, 2 * i + (0 if direction == "forward" else 1)))
        return out

    def loss_model(self, values: dict[str, Any], link: str) -> Any:
        from fecbench.dropper import LossModel

        loss = self.design.loss
        params = loss.values(values, self.link_paths[link])
        if loss.model == "uniform":
            return LossModel.uniform(params["p"])
        if loss.model == "gilbert-elliott":
            return LossModel.gilbert_elliott(params["p"], params["r"], params["k"], params["h"])
        if loss.model == "trace":
            return LossModel.trace(str(loss.trace_file))
        return LossModel.none()

    def configure(self, run: Run) -> list[dict[str, Any]]:
        """Shape the links for this run's point, check fidelity, then re-seed every dropper with the run's
        loss seed. The fidelity pings cross the droppers too, so they run with losses off and the
        droppers are reset afterwards: every run's stream starts at packet 0 (common random numbers)."""
        self.net.configure(run.values)
        fidelity: list[dict[str, Any]] = []
        if self.design.fidelity != "off":
            cached = self.fidelity_cache.get(run.point) if self.design.fidelity == "per-point" else None
            if cached is None:
                self.set_losses(None, 0)
                cached = [dict(row) for row in self.net.fidelity(rate_probe=self.design.fidelity_rate)]
                for i, row in enumerate(cached):
                    row.setdefault("path", i + 1)
                self.fidelity_cache[run.point] = cached
            fidelity = cached
        self.set_losses(run.values, run.loss_seed)
        return fidelity

    def set_losses(self, values: dict[str, Any] | None, seed: int) -> None:
        """Set (and reset) every dropper this design uses: the design's model, or no loss (values None)."""
        if self.design.loss.model == "none":
            return
        from fecbench.dropper import LossModel

        for link, direction, stream in self.streams():
            model = LossModel.none() if values is None else self.loss_model(values, link)
            self.net.set_loss(link, direction, model, seed=seed, stream=stream)

    def placeholders(self, run: Run, run_dir: Path) -> dict[str, Any]:
        entry = run.impl
        workload = self.design.workload
        addresses = [str(a) for a in self.net.client_addresses]
        servers = list(getattr(getattr(self.net, "plan", None), "server_addresses", None) or [])
        servers = [str(a) for a in servers] or [str(self.net.server_address)] * len(addresses)
        values: dict[str, Any] = {
            "dir": str(entry.descriptor.dir), "server_address": str(self.net.server_address),
            "client_address": addresses[0], "client_addresses": ",".join(addresses),
            "server_addresses": ",".join(servers),
            "port": self.design.port + run.index % 1000, "workload": run.workload,
            "size": run.size if run.size is not None else "", "rate": workload.rate,
            "packets": workload.packets, "duration": f"{workload.duration:g}", "buffer": workload.buffer,
            "metrics_path": str(run_dir / "metrics.json"), "download_path": str(run_dir / "download"),
            "run_dir": str(run_dir), "www_dir": str(run_dir / "www"), "seed": run.loss_seed,
            "timeout_s": f"{self.design.timeout_s:g}",
        }
        values.update({key: str(path) for key, path in self.binaries[entry.label].items()})
        return values

    def execute(self, run: Run) -> Outcome:
        """Run one (point, implementation, size, repetition); never raises for an implementation fault."""
        from fecbench.runners.descriptor import render
        from fecbench.topologies.schedule_apply import ScheduleApplier

        descriptor = run.impl.descriptor
        run_dir = self.log_root / run.key[:16]
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        fidelity = self.configure(run)
        bad = [row for row in fidelity if row.get("ok") is not None and not row.get("ok")]
        if bad:
            text = "; ".join(f"path {row['path']}: RTT {row.get('rtt_measured_ms')} ms measured, "
                             f"{row.get('rtt_configured_ms')} ms configured" for row in bad)
            return Outcome(status="fidelity", error=f"network does not match the design: {text}",
                           fidelity=fidelity)

        values = self.placeholders(run, run_dir)
        arg_lists = descriptor.arg_lists(run.impl.args, values)
        if descriptor.server_files and run.size is not None:
            www = run_dir / "www"
            www.mkdir()
            (www / str(run.size)).write_bytes(os.urandom(run.size))
        timeout = self.design.timeout_s
        server_env = {k: v.format_map(values) for k, v in descriptor.server_env.items()}
        client_env = {k: v.format_map(values) for k, v in descriptor.client_env.items()}
        server = client = applier = None
        failed_setup = self.setup(descriptor, values, run_dir)
        if failed_setup:
            return Outcome(status="failed", error=failed_setup, fidelity=fidelity)
        try:
            server = procs.start("server", render(descriptor.server_argv, values, arg_lists), run_dir,
                                 host=self.net.server, env=server_env, cwd=run_dir)
            self.processes.append(server)
            not_ready = procs.wait_ready(server, descriptor.ready_pattern, descriptor.ready_delay_s, timeout)
            if not_ready:
                server.stop()
                status = "unsupported" if server.popen.returncode == 127 else "failed"
                return Outcome(status=status, error=not_ready, server_log=server.log_tail(), fidelity=fidelity)
            # The design's link schedule (if any) counts its time from the client's start.
            applier = ScheduleApplier.for_run(self.design.schedule, self.net, run.loss_seed, timeout)
            client = procs.start("client", render(descriptor.client_argv[run.workload], values, arg_lists),
                                 run_dir, host=self.net.client, env=client_env, cwd=run_dir)
            self.processes.append(client)
            code = client.wait(timeout)
            link_events = applier.stop() if applier else []
            server_code = server.poll()
            client.stop()
            server.stop()
        finally:
            if applier is not None:
                applier.stop()  # undo the schedule's changes whatever happened
            for process in (client, server):
                if process is not None:
                    process.stop()
                    with contextlib.suppress(ValueError):
                        self.processes.remove(process)

        outcome = Outcome(status="ok", client_wall_ms=client.wall_ms, server_log=server.log_tail(),
                          client_log=client.log_tail(), fidelity=fidelity, link_events=link_events)
        outcome.link_stats = self.link_stats(run)
        if self.design.verdict_log:
            outcome.verdict_logs = self.verdict_logs()
        if code is None:
            outcome.status, outcome.error = "timeout", f"client still running after {timeout:g} s (killed)"
        elif code == 127:
            outcome.status, outcome.error = "unsupported", "client exited with status 127 (unsupported combination)"
        elif code != 0:
            outcome.status, outcome.error = "failed", f"client exited with status {code}"
            outcome.metrics = partial_metrics(descriptor, values)
            reason = (outcome.metrics or {}).get("error")
            if isinstance(reason, str) and reason.strip():
                outcome.error += f": {reason.strip()[:500]}"
        elif server_code is not None:
            outcome.status, outcome.error = "failed", f"server exited with status {server_code} during the run"
        else:
            try:
                outcome.metrics = collect_metrics(descriptor, run, values, client)
            except MetricsError as exc:
                outcome.status, outcome.error = "failed", f"metrics: {exc}"
        return outcome

    def setup(self, descriptor: Any, values: dict[str, Any], run_dir: Path) -> str | None:
        """Run the descriptor's `[server] setup` commands (e.g. make a certificate) in the run folder,
        on the server host; None when they all succeed, else why the run failed."""
        from fecbench.runners.descriptor import render

        for i, template in enumerate(descriptor.server_setup):
            argv = render(template, values, {})
            process = procs.start(f"setup{i}", argv, run_dir, host=self.net.server, cwd=run_dir)
            self.processes.append(process)
            try:
                code = process.wait(self.design.timeout_s)
            finally:
                process.stop(grace_s=0.5)
                self.processes.remove(process)
            if code != 0:
                what = f"still running after {self.design.timeout_s:g} s" if code is None \
                    else f"exited with status {code}"
                return f"server setup command {argv[0]} {what}: {process.output()[-500:]}"
        return None

    def link_stats(self, run: Run) -> list[dict[str, Any]]:
        """The network's per link and direction statistics, flattened to the link_stats columns."""
        rows = []
        streams = {(link, direction): stream for link, direction, stream in self.streams()}
        for stat in self.net.link_stats():
            key = (stat.get("link"), stat.get("direction"))
            dropper = stat.get("dropper") or {}
            row: dict[str, Any] = {"link": stat.get("link"), "direction": stat.get("direction")}
            for column in dbmod.LINK_STAT_COLUMNS:
                value = dropper.get(_DROPPER_NAMES.get(column, column), dropper.get(column))
                row[column] = int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            if key in streams:
                # "path": the 1-based client-server path the link is on (per-path traffic analyses).
                row["model"] = {"model": self.design.loss.model,
                                "params": self.design.loss.values(run.values, self.link_paths[key[0]]),
                                "seed": run.loss_seed, "stream": streams[key], "path": self.link_paths[key[0]],
                                "dropper": dropper}
            elif dropper:
                row["model"] = {"model": "none", "dropper": dropper}
            row["delay"] = {k: v for k, v in stat.items() if k not in ("link", "direction", "dropper")}
            rows.append(row)
        return rows

    def enable_verdict_logs(self) -> None:
        """Re-attach the design's droppers with a verdict log (the network attaches them without one)."""
        from fecbench.dropper import Dropper, LossModel

        droppers = getattr(self.net, "droppers", {})
        for link, direction, _stream in self.streams():
            old = droppers.get((link, direction))
            if old is None or getattr(old, "log", False):
                continue
            netns, _dev = self.net.loss_point(link, direction)
            old.detach()
            droppers[(link, direction)] = Dropper.attach(
                old.dev, netns=netns, direction=old.direction, model=LossModel.none(), seed=0, stream=0,
                name=f"{old.name.split('-', 1)[-1]}L", log=True)

    def verdict_logs(self) -> list[tuple[str, str, bytes]]:
        """Each dropper's verdict log of this run (index, verdict, state, len), as .npy bytes."""
        import io

        import numpy as np

        logs = []
        droppers = getattr(self.net, "droppers", {})
        for link, direction, _stream in self.streams():
            dropper = droppers.get((link, direction))
            if dropper is None or not getattr(dropper, "log", False):
                continue
            buffer = io.BytesIO()
            np.save(buffer, dropper.verdict_log(), allow_pickle=False)
            logs.append((link, direction, buffer.getvalue()))
        return logs

    def stop_all(self) -> None:
        for process in list(self.processes):
            process.stop(grace_s=0.5)
        self.processes.clear()


# --- the campaign loop ------------------------------------------------------------------------

@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) end the campaign like Ctrl-C: current run interrupted, network torn down."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass
class Summary:
    total: int
    selected: int
    counts: Counter
    interrupted: bool = False
    aborted: str | None = None


def run_campaign(prepared: Prepared, db_path: Path, *, retry: set[str], link_backend: str | None,
                 keep_logs: bool = False, console: Any = None) -> Summary:
    """Execute the campaign (root): build the network once, run every selected run, record each."""
    from rich.console import Console

    from fecbench.runners.hostinfo import fingerprint
    from fecbench.topologies import Network

    console = console or Console()
    design = prepared.design
    todo = select_runs(prepared, read_statuses(db_path), retry)
    summary = Summary(total=len(prepared.runs), selected=len(todo), counts=Counter())
    if not todo:
        return summary
    impls_info = impls_fingerprint(design)
    log_root = db_path.resolve().parent / f"{db_path.stem}.logs"
    check_free_space(db_path.resolve().parent)
    # The network first: if it cannot be built, no database is created or touched.
    with sigterm_as_interrupt(), Network(prepared.topology, todo[0].values, backend=link_backend) as net:
        backend = str(net.backend)
        conn = dbmod.connect(db_path)
        try:
            open_campaign(prepared, conn, backend, fingerprint(backend), impls_info)
            executor = Executor(prepared, conn, net, log_root, keep_logs)
            if design.verdict_log and design.loss.model != "none":
                executor.enable_verdict_logs()
            _loop(executor, todo, summary, backend, console)
        finally:
            conn.close()
    return summary


def impls_fingerprint(design: Design) -> dict[str, Any]:
    """What a campaign records about its implementations (versions, descriptors, binary hashes)."""
    return {e.label: {"name": e.name, "args": e.args, **e.descriptor.fingerprint()} for e in design.impls}


MIN_FREE_BYTES = 50 * 10**6


def check_free_space(folder: Path, minimum: int = MIN_FREE_BYTES) -> None:
    """Refuse to start a campaign on a (nearly) full disk: runs write logs and the database grows.
    Creates nothing (the folder's nearest existing ancestor is measured): a campaign refused later,
    e.g. for a link backend this kernel lacks, leaves no trace."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < minimum:
        raise UserError(f"{folder}: only {free / 1e6:.1f} MB free, a campaign needs at least "
                        f"{minimum / 1e6:.0f} MB (results database and run logs)")


def read_statuses(db_path: Path) -> dict[str, str]:
    """key -> status of the runs already in a results database (empty if it does not exist yet)."""
    if not db_path.exists():
        return {}
    conn = dbmod.open_readonly(db_path)  # a UserError if it is not a database this fecbench can use
    try:
        return dict(conn.execute("SELECT key, status FROM runs").fetchall())
    except sqlite3.Error as exc:
        raise UserError(f"{db_path}: cannot use this results database: {exc}") from None
    finally:
        conn.close()


def progress_bar(console: Any) -> Any:
    """The campaign's rich progress bar: description, bar, done/total, status counts, elapsed, ETA."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console, transient=False)


def run_one(executor: Executor, run: Run) -> tuple[Outcome, bool]:
    """Execute one run, turning a harness fault into a `failed` outcome; (outcome, harness_error).
    The local loop and the Dask workers both execute runs through this function."""
    run_dir = executor.log_root / run.key[:16]
    try:
        outcome = executor.execute(run)
    except KeyboardInterrupt:
        executor.stop_all()
        raise
    except Exception as exc:  # a harness or network fault: record it, go on (bounded by the caller)
        executor.stop_all()
        return Outcome(status="failed", error=f"harness: {type(exc).__name__}: {exc}"), True
    if outcome.status == "ok" and not executor.keep_logs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return outcome, False


def _loop(executor: Executor, todo: list[Run], summary: Summary, backend: str, console: Any) -> None:
    conn, counts = executor.conn, summary.counts
    estimates = [executor.prepared.estimate(run) for run in todo]
    progress = progress_bar(console)
    harness_errors = 0
    with progress:
        console.print(f"{len(todo)} run(s) to do, estimated {sum(estimates) / 60:.1f} min")
        task = progress.add_task(executor.design.name, total=len(todo), counts="")
        for run in todo:
            progress.update(task, description=f"{executor.design.name} [{run.label} p{run.point} r{run.repetition}]")
            started_wall = time.monotonic()
            _db_write(dbmod.start_run, conn, run.key, now_iso(), backend, executor.host)
            try:
                outcome, harness_error = run_one(executor, run)
            except KeyboardInterrupt:
                _finish(conn, run, Outcome(status="interrupted", error="interrupted (Ctrl-C or SIGTERM)"),
                        started_wall)
                counts["interrupted"] += 1
                summary.interrupted = True
                raise
            harness_errors = harness_errors + 1 if harness_error else 0
            _finish(conn, run, outcome, started_wall)
            counts[outcome.status] += 1
            progress.update(task, advance=1, counts=_counts_text(counts))
            if harness_errors >= MAX_HARNESS_ERRORS:
                summary.aborted = f"{harness_errors} harness errors in a row, last: {outcome.error}"
                break


def _db_write(function: Any, *args: Any, **kwargs: Any) -> None:
    """A database write; failing to record (disk full, database gone) stops the campaign with a clear error."""
    try:
        function(*args, **kwargs)
    except sqlite3.Error as exc:
        raise UserError(f"cannot write the results database ({exc}); the campaign stopped (free some disk "
                        "space, then run the same command again to resume)") from None


def _finish(conn: sqlite3.Connection, run: Run, outcome: Outcome, started_wall: float,
            duration_s: float | None = None) -> None:
    """Record a run's outcome; duration_s: measured where the run executed (default: since started_wall)."""
    if duration_s is None:
        duration_s = time.monotonic() - started_wall
    _db_write(dbmod.finish_run, conn, run.key, status=outcome.status, error=outcome.error,
              server_log_tail=outcome.server_log, client_log_tail=outcome.client_log,
              finished_at=now_iso(), duration_s=duration_s,
              metrics=outcome.metrics, client_wall_ms=outcome.client_wall_ms,
              link_stats=outcome.link_stats, fidelity=outcome.fidelity, verdict_logs=outcome.verdict_logs,
              link_events=outcome.link_events)


def _counts_text(counts: Counter) -> str:
    colours = {"ok": "green", "failed": "red", "timeout": "yellow", "unsupported": "blue",
               "fidelity": "magenta", "interrupted": "red"}
    return " ".join(f"[{colours.get(k, 'white')}]{k} {v}[/]" for k, v in sorted(counts.items()))
