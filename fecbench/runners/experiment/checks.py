"""Checks before the first run (no root, no network, nothing written):

- each distinct argument set of a design is validated by its implementation itself, through the
  descriptor's optional `[check] argv` commands (quic-impls/README.md): a command that exits non-zero
  refuses the design as a whole (exit 2), naming the value, the implementation and the design line;
- the design's `timeout_s` against each run's minimum duration on its link (handshake and request
  RTTs, a queue's worth of delay, the bytes at the bottleneck rate; a messages run's duration): below
  SAFE_MULTIPLE × that minimum for some point, the design is refused (naming the points) unless the
  user accepts it deliberately (`fecbench run --accept-short-timeout`);
- at a point with uniform losses, `timeout_s` against the expected completion of a run without FEC, the slowest
  label (`runs.estimate_seconds`: the loss-limited rate of a congestion-controlled transfer, measured within
  ±10 % of fecq's and rQUIC's baseline downloads under uniform losses; bursty and replayed losses are not
  checked, the model was never compared with runs under them): a run's time varies about that expectation by a factor
  e^(RUN_SPREAD·Z), so a limit T cuts off a share 1 − Φ(ln(T / expected) / RUN_SPREAD) of those runs; above
  CUT_OFF_SHARE the design is refused the same way. A limit the baseline cannot meet censors its runs, and a
  claim about how a gain changes with the setting then cannot be decided at all.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import Any

from fecbench.inputs.errors import UserError
from fecbench.pages.graph import PageGraph
from fecbench.runners.experiment.argv_template import render
from fecbench.runners.experiment.design import Design, ImplEntry
from fecbench.runners.experiment.prepare import Prepared
from fecbench.runners.experiment.runs import mean_loss

# timeout_s must be at least this multiple of a run's minimum duration (slow starts, losses, retransmissions).
SAFE_MULTIPLE = 1.5
# A lossy run's time ÷ the duration model's expectation varies by about 30 % (runs.py, the model's constants):
# the standard deviation of its logarithm. At most this share of the baseline's runs may reach timeout_s.
RUN_SPREAD = 0.3
CUT_OFF_SHARE = 0.05
# The loss model under which the duration model was compared with real runs.
CHECKED_LOSS_MODEL = "uniform"
# How long an implementation's check command may take.
CHECK_TIMEOUT_S = 30.0
# Addresses an argument check sees (documentation ranges, RFC 5737): no network exists yet.
_CHECK_CLIENT = "192.0.2.{}"
_CHECK_SERVER = "198.51.100.1"


def min_duration_s(kind: str, size: int | None, rtt_ms: float, rate_mbit: float | None,
                   duration_s: float = 0.0, exchanges: int = 1, page: PageGraph | None = None) -> float:
    """The least time one run can take: the handshake (1 RTT), the request (1 RTT) and a queue's worth
    of delay (a one-BDP buffer: 1 RTT), plus the bytes at the bottleneck rate (no rate limit: none);
    a messages run lasts its duration after the handshake; a reqresp run of `exchanges` sequential
    exchanges of `size` bytes (request + response) takes 1 RTT and its bytes' time per exchange; a page load,
    its critical path with 1 RTT and its bytes' time per download (PageGraph.modelled_load_ms)."""
    rtt_s = max(0.0, rtt_ms) / 1000
    if kind == "messages":
        return 2 * rtt_s + duration_s
    if kind == "page" and page is not None:
        return 2 * rtt_s + page.modelled_load_ms(rtt_ms, rate_mbit * 1e3 / 8 if rate_mbit else None) / 1000
    transfer = (size or 0) * 8 / (rate_mbit * 1e6) if rate_mbit else 0.0
    return 2 * rtt_s + exchanges * (rtt_s + transfer)


def cut_off_share(timeout_s: float, expected_s: float) -> float:
    """The share of runs expected to reach `timeout_s` when their times vary as e^(RUN_SPREAD·Z) about
    `expected_s`."""
    if expected_s <= 0:
        return 0.0
    return 1 - NormalDist().cdf(math.log(timeout_s / expected_s) / RUN_SPREAD)


def limit_for(expected_s: float) -> float:
    """The least timeout_s that cuts off at most CUT_OFF_SHARE of runs expected to take `expected_s`."""
    return expected_s * math.exp(NormalDist().inv_cdf(1 - CUT_OFF_SHARE) * RUN_SPREAD)


def expected_baseline_s(prepared: Prepared) -> dict[tuple[int, int | None], float]:
    """(point, size) → the duration model's expected time of a run without FEC there, at the lossy points of
    transfers (not messages: they last their duration)."""
    design = prepared.design
    out: dict[tuple[int, int | None], float] = {}
    if design.workload.kind == "messages" or design.loss.model != CHECKED_LOSS_MODEL:
        return out
    for run in prepared.runs:
        where = (run.point, run.size)
        if where not in out and run.impl.supports(run.workload) and mean_loss(run, design) > 0:
            out[where] = prepared.estimate(run, capped=False)
    return out


def short_timeouts(prepared: Prepared) -> list[dict[str, Any]]:
    """The (point, size) pairs whose minimum duration × SAFE_MULTIPLE exceeds the design's timeout_s, or
    whose runs without FEC would reach it more often than CUT_OFF_SHARE (lossy points)."""
    design = prepared.design
    expected = expected_baseline_s(prepared)
    out: list[dict[str, Any]] = []
    for point in sorted(prepared.points):
        rtt = prepared.rtt_ms.get(point, 0.0)
        rate = prepared.rate_mbit.get(point)
        for size in design.workload.sizes:
            workload = design.workload
            per_exchange = sum(workload.exchange_sizes(size)) if workload.kind == "reqresp" else size
            least = min_duration_s(workload.kind, per_exchange, rtt, rate, workload.duration,
                                   workload.exchanges if workload.kind == "reqresp" else 1, workload.page_graph)
            row = {"point": point, "size": size, "min_s": least, "needs_s": SAFE_MULTIPLE * least,
                   "values": prepared.points[point]}
            if (point, size) in expected:
                row["expected_s"] = expected[(point, size)]
                row["cut_off"] = cut_off_share(design.timeout_s, row["expected_s"])
                row["needs_s"] = max(row["needs_s"], limit_for(row["expected_s"]))
            if design.timeout_s < row["needs_s"]:
                out.append(row)
    return out


def _point_text(row: dict[str, Any]) -> str:
    values = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in row["values"].items())
    what = f"{row['size']} B" if row["size"] is not None else "messages"
    text = f"point {row['point']} ({values}), {what}: at least {row['min_s']:.1f} s"
    if "expected_s" in row:
        text += (f", without FEC about {row['expected_s']:.0f} s at its loss rate ({100 * row['cut_off']:.0f} % of "
                 "those runs would reach the limit)")
    return text + f", needs timeout_s ≥ {row['needs_s']:.0f} s"


def check_timeouts(prepared: Prepared, *, accept: bool = False, warn: Callable[[str], Any] = print) -> None:
    """Refuse (UserError, exit 2) a design whose timeout_s is too short for some point, unless `accept`."""
    short = short_timeouts(prepared)
    if not short:
        return
    design = prepared.design
    listed = "\n  ".join(_point_text(row) for row in short[:12])
    more = f"\n  … and {len(short) - 12} more" if len(short) > 12 else ""
    head = (f"{design.path}: design.timeout_s = {design.timeout_s:g} s is below {SAFE_MULTIPLE:g}× the minimum "
            f"duration (handshake and request RTTs, a queue's delay, size / bandwidth) or cuts off more than "
            f"{100 * CUT_OFF_SHARE:g} % of the runs without FEC (their expected time at the loss rate, "
            f"runs varying by {100 * RUN_SPREAD:g} % about it) of {len(short)} (point, size) pair(s):\n  "
            f"{listed}{more}")
    if accept:
        warn(f"{head}\nthose runs may end timeout (--accept-short-timeout)")
        return
    raise UserError(f"{head}\nraise timeout_s, or pass --accept-short-timeout to run it anyway "
                    "(those runs may end timeout)")


# --- the implementations' own argument checks ---------------------------------------------------------

def _check_values(design: Design, prepared: Prepared, run_dir: Path) -> dict[str, Any]:
    """Placeholder values for a check command: the design's workload, documentation addresses."""
    paths = prepared.topology.paths
    workload = design.workload
    clients = [_CHECK_CLIENT.format(i + 1) for i in range(paths)]
    return {"server_address": _CHECK_SERVER, "server_addresses": ",".join([_CHECK_SERVER] * paths),
            "client_address": clients[0], "client_addresses": ",".join(clients), "port": design.port,
            "workload": workload.kind, "size": workload.sizes[0] if workload.sizes[0] is not None else "",
            "rate": workload.rate, "packets": workload.packets, "duration": f"{workload.duration:g}",
            "buffer": workload.buffer, **workload.placeholders(workload.sizes[0]),
            "metrics_path": str(run_dir / "metrics.json"),
            "download_path": str(run_dir / "download"), "run_dir": str(run_dir), "www_dir": str(run_dir / "www"),
            "seed": 1, "timeout_s": f"{design.timeout_s:g}", "page_file": workload.page_file(run_dir)}


def run_check(entry: ImplEntry, prepared: Prepared) -> str | None:
    """Run the descriptor's check commands for one argument set; None when all pass, else what they said."""
    descriptor = entry.descriptor
    with tempfile.TemporaryDirectory(prefix="fecbench-check-") as tmp:
        values = {**_check_values(prepared.design, prepared, Path(tmp)), "dir": str(descriptor.dir),
                  **{k: str(v) for k, v in descriptor.require_binaries().items()}}
        arg_lists = descriptor.arg_lists(entry.args, values)
        for template in descriptor.check_argv:
            argv = render(template, values, arg_lists)
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, cwd=tmp,
                                      stdin=subprocess.DEVNULL, check=False)
            except subprocess.TimeoutExpired:
                return f"{' '.join(argv)}: no answer within {CHECK_TIMEOUT_S:g} s"
            except OSError as exc:
                return f"{' '.join(argv)}: {exc}"
            if done.returncode != 0:
                said = (done.stderr.strip() or done.stdout.strip() or "(no message)")[-800:]
                return f"exit status {done.returncode}: {said}"
    return None


def _impl_line(text: str, index: int, value: str | None) -> int | None:
    """The design line of the index-th [[impl]] (the line holding `value` in it, if any)."""
    lines = text.splitlines()
    headers = [i for i, line in enumerate(lines) if re.match(r"^\s*\[\[\s*impl\s*\]\]", line)]
    if index >= len(headers):
        return None
    start = headers[index]
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^\s*\[", lines[i])), len(lines))
    if value is not None:
        for i in range(start, end):
            if value in lines[i]:
                return i + 1
    return start + 1


def _rejected(design: Design, index: int, entry: ImplEntry, said: str) -> str:
    written = (design.data.get("impl") or [{}])[index].get("args", {}) if index < len(design.data.get("impl", [])) \
        else {}
    named = [(k, str(v)) for k, v in written.items()
             if re.search(rf"(?<![\w.:,-]){re.escape(str(v))}(?![\w.:,-])", said)]
    line = _impl_line(design.text, index, named[0][1] if named else None)
    what = ", ".join(f"{k} = {v!r}" for k, v in named) if named else \
        f"the arguments {json.dumps(entry.args, sort_keys=True)}"
    where = f"{design.path}:{line}" if line else str(design.path)
    return f"{where}: [[impl]] {entry.label!r}: implementation {entry.name!r} rejects {what}: {said}"


def check_impl_args(prepared: Prepared) -> None:
    """Each distinct (implementation, arguments) of the design, checked by the implementation's own
    `[check]` commands; any rejection refuses the whole design (UserError, exit 2), before anything runs."""
    design = prepared.design
    checked: set[tuple[str, str]] = set()
    problems = []
    for index, entry in enumerate(design.impls):
        if not entry.descriptor.check_argv or not entry.supports(design.workload.kind):
            continue  # an implementation without the workload runs nothing (its runs are `unsupported`)
        if entry.descriptor.missing_binaries() is not None:
            continue  # a dry run of a design whose implementation is not built (prepare warned)
        key = (str(entry.descriptor.path), json.dumps(entry.args, sort_keys=True, default=str))
        if key in checked:
            continue
        checked.add(key)
        said = run_check(entry, prepared)
        if said is not None:
            problems.append(_rejected(design, index, entry, said))
    if problems:
        raise UserError("\n".join(problems) + "\nthe design is refused as a whole: nothing was run or written")


def validate(design_path: str | Path, *, accept_short_timeout: bool = False, dry_run: bool = False) -> Prepared:
    """The one validation pass every command runs before anything else: the design as a whole
    (`prepare`: structure, topology, loss, flows, what reads each factor and in which unit), its time
    limit against each run's minimum duration, and each argument set by its implementation's own check.
    Returns the validated campaign; what a user should know but may go ahead with is in its `warnings`
    (on a dry run, an implementation that is not built is one of them)."""
    from fecbench.runners.experiment.prepare import prepare

    prepared = prepare(design_path, require_built=not dry_run)
    check_timeouts(prepared, accept=accept_short_timeout, warn=prepared.warnings.append)
    check_impl_args(prepared)
    design = prepared.design
    for entry in design.impls:
        if not entry.supports(design.workload.kind):
            prepared.warnings.append(f"{entry.label}: implementation {entry.name!r} does not declare workload "
                                     f"{design.workload.kind!r}: its runs are recorded unsupported")
    return prepared
