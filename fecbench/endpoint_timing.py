"""How late a run's endpoints ran when they were ready to: summarised and judged, like `fecbench.lateness`
judges the delay elements.

During each run the scheduler tracer (`fecbench.schedlat`) counts, for the threads of the network's
endpoint group (`fecbench.cgroups`: server, client, whatever they start), how long each waited for a CPU:
from a wake-up (timer, packet, futex) to running (`wake`), and from being preempted while runnable to
running again (`preempt`). A run's summary:

- ``wakeup_p50_ms``, ``wakeup_p99_ms``, ``wakeup_max_ms``: the wake-up latency's quantiles (upper edges
  of the histogram buckets, never above the largest wait seen: at most 12.5 % above the true value);
- ``runq_share``: the time the run's threads spent runnable but waiting (wake-up and preemption waits,
  summed over threads, those that ended included) over the run's wall time: 0.5 means the endpoints
  together waited half as long as the run lasted;
- ``cpu_share`` and ``pressure_share`` where the cgroup reports them (v2 ``cpu.stat``, PSI): the CPU time
  the endpoints used, and the share of the run during which at least one of them waited, over wall time;
- ``ok``: ``wakeup_p99_ms`` within the bound. The bound is the design's ``endpoint_bound_ms`` if it sets
  one, else ``FECBENCH_ENDPOINT_BOUND_MS``, else `ENDPOINT_BOUND_MS`. A run above it is flagged as a
  failed fidelity check is (`judge`): status ``fidelity``, metrics kept, excluded from ratios, counted in
  ``fecbench status``, re-run by ``--retry fidelity``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fecbench import lateness

#: The default bound on a run's endpoint p99 wake-up latency (ms); designs/README.md says how it was chosen.
ENDPOINT_BOUND_MS = 2.0
ENV = "FECBENCH_ENDPOINT_BOUND_MS"


def bound_ms(design_bound: float | None = None) -> float:
    """The bound a run is judged by: the design's, else the environment's, else the default."""
    if design_bound is not None:
        return float(design_bound)
    return lateness.env_bound_ms(ENV, ENDPOINT_BOUND_MS)


def quantile_ns(buckets: Sequence[int], upper_ns: Sequence[int], max_ns: int, q: float) -> int | None:
    """The q-quantile of a histogram: the upper edge of the bucket it falls in, at most the largest value."""
    edges = [float(e) for e in upper_ns]
    value = lateness.quantile_us(list(buckets), edges, float(max_ns), q)
    return None if value is None else int(value)


def sparse(buckets: Sequence[int], upper_ns: Sequence[int]) -> list[list[int]]:
    """The non-empty buckets as [upper edge ns, count] pairs (what a run records: histograms of runs add up)."""
    return [[int(edge), int(count)] for edge, count in zip(upper_ns, buckets, strict=True) if count]


def summary(reading: dict[str, dict[str, Any]], upper_ns: Sequence[int], wall_ns: int,
            cpu_us: int | None = None, pressure_us: int | None = None,
            design_bound: float | None = None) -> dict[str, Any]:
    """A run's endpoint timing from its tracer slot (`schedlat.Slot.read`) and cgroup counters."""
    wake, preempt = reading["wake"], reading["preempt"]
    bound = bound_ms(design_bound)

    def ms(ns: int | None) -> float | None:
        return None if ns is None else round(ns / 1e6, 4)

    p99 = quantile_ns(wake["buckets"], upper_ns, wake["max_ns"], 0.99)
    waited = wake["sum_ns"] + preempt["sum_ns"]
    wall = max(wall_ns, 1)
    return {
        "wakeups": wake["count"],
        "wakeup_p50_ms": ms(quantile_ns(wake["buckets"], upper_ns, wake["max_ns"], 0.5)),
        "wakeup_p99_ms": ms(p99),
        "wakeup_max_ms": ms(wake["max_ns"]) if wake["count"] else None,
        "wakeup_mean_ms": ms(wake["sum_ns"] // wake["count"]) if wake["count"] else None,
        "preemptions": preempt["count"],
        "preempt_p99_ms": ms(quantile_ns(preempt["buckets"], upper_ns, preempt["max_ns"], 0.99)),
        "preempt_max_ms": ms(preempt["max_ns"]) if preempt["count"] else None,
        "runq_wait_ms": ms(waited),
        "wall_ms": ms(wall_ns),
        "runq_share": round(waited / wall, 5),
        "cpu_share": None if cpu_us is None else round(cpu_us * 1000 / wall, 5),
        "pressure_share": None if pressure_us is None else round(pressure_us * 1000 / wall, 5),
        "bound_ms": bound,
        "ok": None if p99 is None else p99 <= bound * 1e6,
        "wake_hist": sparse(wake["buckets"], upper_ns),
        "preempt_hist": sparse(preempt["buckets"], upper_ns),
    }


def merge_readings(readings: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Several tracer slots' readings as one (a run's network group and its competing flows' groups)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in ("wake", "preempt"):
        parts = [r[kind] for r in readings]
        out[kind] = {"count": sum(p["count"] for p in parts), "sum_ns": sum(p["sum_ns"] for p in parts),
                     "max_ns": max((p["max_ns"] for p in parts), default=0),
                     "buckets": [sum(b) for b in zip(*(p["buckets"] for p in parts), strict=True)]}
    return out


def merged_quantiles(histograms: Sequence[Sequence[Sequence[int]]], qs: Sequence[float]) -> dict[float, float | None]:
    """Quantiles (ms) of several runs' wake-up histograms together (sparse [upper ns, count] pairs)."""
    totals: dict[int, int] = {}
    for hist in histograms:
        for edge, count in hist:
            totals[int(edge)] = totals.get(int(edge), 0) + int(count)
    edges = sorted(totals)
    counts = [totals[e] for e in edges]
    top = edges[-1] if edges else 0
    return {q: None if not edges else round((quantile_ns(counts, edges, top, q) or 0) / 1e6, 4) for q in qs}


def judge(status: str, endpoints: dict[str, Any] | None, link_stats: list[dict[str, Any]],
          link_events: Sequence[dict[str, Any]] = ()) -> str | None:
    """Why a finished run's measurements are not to be trusted, or None: the endpoints' p99 wake-up latency
    or a delay element's p99 lateness above its bound, a link whose rate limiter or queue the kernel did not
    hold as asked, a link schedule change in force later than its bound. Judged for runs that ended ok or by
    a timeout (a timeout may be the load's doing); the caller gives such a run the status ``fidelity``."""
    if status not in ("ok", "timeout"):
        return None
    reasons = []
    if endpoints and endpoints.get("ok") is False:
        reasons.append(f"endpoints: p99 wake-up latency {endpoints['wakeup_p99_ms']:.3g} ms > bound "
                       f"{endpoints['bound_ms']:g} ms (the client and server waited for a CPU)")
    for stat in link_stats:
        late = (stat.get("delay") or {}).get("lateness") or {}
        if late.get("ok") is False:
            reasons.append(f"emulation: delay element p99 lateness {late['p99_us'] / 1000:.3g} ms > bound "
                           f"{late['bound_ms']:g} ms on {stat.get('link')} {stat.get('direction')}")
        wrong = (stat.get("delay") or {}).get("mismatch")
        if wrong:
            reasons.append(f"emulation: {stat.get('link')} {stat.get('direction')} not as asked: {'; '.join(wrong)}")
    schedule = lateness.schedule_summary(link_events)
    if schedule and not schedule["ok"]:
        reasons.append(f"emulation: link schedule change {schedule['worst']} in force {schedule['max_ms']:.3g} ms "
                       f"late > bound {schedule['bound_ms']:g} ms")
    return "; ".join(reasons) or None


def from_json(text: Any) -> dict[str, Any] | None:
    """A run's recorded endpoint timing (``endpoint_timing.json``), or None."""
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
