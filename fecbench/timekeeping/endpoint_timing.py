"""How late a run's endpoints ran when they were ready to: summarised and judged, like `fecbench.timekeeping.lateness`
judges the delay elements.

During each run the scheduler tracer (`fecbench.timekeeping.schedlat`) counts, for the threads of the network's
endpoint group (`fecbench.host.cgroups`: server, client, whatever they start), how long each waited for a CPU:
from a wake-up (timer, packet, futex) to running (`wake`), and from being preempted while runnable to
running again (`preempt`). A run's summary:

- ``wakeup_p50_ms``, ``wakeup_p99_ms``, ``wakeup_max_ms``: the wake-up latency's quantiles (upper edges
  of the histogram buckets, never above the largest wait seen: at most 12.5 % above the true value);
- ``runq_share``: the time the run's threads spent runnable but waiting (wake-up and preemption waits,
  summed over threads, those that ended included) over the run's wall time: 0.5 means the endpoints
  together waited half as long as the run lasted;
- ``cpu_share`` and ``pressure_share`` where the cgroup reports them (v2 ``cpu.stat``, PSI): the CPU time
  the endpoints used, and the share of the run during which at least one of them waited, over wall time;
- ``excess_ms``: the time during which at least one of the endpoints' threads waited beyond the bound (the
  union over threads of each wait's part beyond it, wake-ups and preemptions, from the tracer's spans of the
  waits of 1 ms or more), and ``excess_share``, that over the run's wall time: the most the endpoints'
  lateness could have added to the run's times (the transfer falls behind only while a thread on its path
  waits too long, and waits of several threads at once delay it once). ``excess_summed_ms`` is the same
  waits summed over threads (each wait at its histogram bucket's upper edge, never above the largest wait
  seen): what a run was judged by before (issue 67), and what it is judged by when the spans do not hold
  every long wait (more than the tracer keeps, a bound below 1 ms; ``excess_rule`` says which; ``long_waits``:
  how many waits of 1 ms or more there were);
- ``ok``: ``excess_share`` within `EXCESS_SHARE` (1 %, ``FECBENCH_EXCESS_SHARE`` replaces it). The bound is
  the design's ``endpoint_bound_ms`` if it sets one, else ``FECBENCH_ENDPOINT_BOUND_MS``, else
  `ENDPOINT_BOUND_MS`. A run above it is flagged as a failed fidelity check is (`judge`): status
  ``fidelity``, metrics kept, excluded from ratios, counted in ``fecbench status``, re-run at the end of
  its campaign and by ``--retry fidelity`` (the `endpoints` check of `fecbench.timekeeping.checks`).

Why not the p99 wake-up latency (the flag until issue 48): a 30 ms run has a few hundred wake-ups, so its
"p99" is one of its largest few, and one late wake-up anywhere flagged it whatever it changed, while a run
of 400 wake-ups whose 3 waited 12 ms each (36 ms on an 800 ms run) passed. The quantiles stay recorded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fecbench.timekeeping import checks, lateness

#: The default bound on an endpoint's wait for a CPU (ms): the part of each wait beyond it counts as excess;
#: designs/README.md says how it was chosen.
ENDPOINT_BOUND_MS = 2.0
ENV = "FECBENCH_ENDPOINT_BOUND_MS"
#: A run is flagged when its endpoints' excess waits add up to more than this share of its wall time: 1 %, below
#: the spread of a download's time between re-runs of the same key on a quiet machine (designs/README.md, "When
#: a run is flagged").
EXCESS_SHARE = 0.01
EXCESS_ENV = "FECBENCH_EXCESS_SHARE"


def excess_share_limit() -> float:
    """The share of a run's wall time its excess waits may reach: the environment's, else `EXCESS_SHARE`."""
    return lateness.env_share(EXCESS_ENV, EXCESS_SHARE)


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


def excess_ns(buckets: Sequence[int], upper_ns: Sequence[int], max_ns: int, bound_ns: float) -> int:
    """The waits of a histogram beyond ``bound_ns``, added up: each bucket's count times its upper edge (never
    above the largest wait seen) less the bound (an upper bound on the true sum)."""
    total = 0.0
    for edge, count in zip(upper_ns, buckets, strict=True):
        value = min(float(edge), float(max_ns))
        if count and value > bound_ns:
            total += count * (value - bound_ns)
    return int(total)


def union_excess_ns(reading: dict[str, Any], bound_ns: float) -> int | None:
    """The time during which at least one thread waited beyond ``bound_ns`` (the union over threads of each
    wait's part after its first ``bound_ns``), from the tracer's spans of long waits; None where the spans do
    not hold every such wait (a reading without spans, more long waits than kept, a bound below the waits
    kept, a span half written), which the summed excess then stands for."""
    spans, seen = reading.get("spans"), reading.get("spans_seen")
    if spans is None or seen != len(spans) or bound_ns < reading.get("span_min_ns", float("inf")):
        return None
    if any(end <= start for start, end in spans):
        return None
    late = sorted((start + bound_ns, end) for start, end in spans if end - start > bound_ns)
    total, covered = 0.0, float("-inf")
    for start, end in late:
        if end > covered:
            total += end - max(start, covered)
            covered = end
    return int(total)


def sparse(buckets: Sequence[int], upper_ns: Sequence[int]) -> list[list[int]]:
    """The non-empty buckets as [upper edge ns, count] pairs (what a run records: histograms of runs add up)."""
    return [[int(edge), int(count)] for edge, count in zip(upper_ns, buckets, strict=True) if count]


def summary(reading: dict[str, Any], upper_ns: Sequence[int], wall_ns: int,
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
    summed = sum(excess_ns(kind["buckets"], upper_ns, kind["max_ns"], bound * 1e6) for kind in (wake, preempt))
    union = union_excess_ns(reading, bound * 1e6)
    excess = summed if union is None else min(union, summed)
    limit = excess_share_limit()
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
        "excess_ms": ms(excess),
        "excess_share": round(excess / wall, 5),
        "excess_summed_ms": ms(summed),
        "excess_rule": "summed" if union is None else "union",
        "long_waits": reading.get("spans_seen"),
        "excess_limit": limit,
        "ok": None if not wake["count"] + preempt["count"] else excess <= limit * wall,
        "wake_hist": sparse(wake["buckets"], upper_ns),
        "preempt_hist": sparse(preempt["buckets"], upper_ns),
    }


def merge_readings(readings: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several tracer slots' readings as one (a run's network group and its competing flows' groups): their
    long waits' spans together, so that waits of two groups at once count once."""
    out: dict[str, Any] = {}
    if all("spans" in r for r in readings):
        out.update(spans=[span for r in readings for span in r["spans"]],
                   spans_seen=sum(r["spans_seen"] for r in readings),
                   span_min_ns=max(r["span_min_ns"] for r in readings))
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
    """Why a finished run's measurements are not to be trusted, or None: the checks after a run of
    `fecbench.timekeeping.checks` (the endpoints' waits beyond their bound adding up to more than their share of
    the run, a delay element that delayed frames beyond its bound, a link whose rate limiter or queue the kernel
    did not hold as asked, a link schedule change in force later than its bound), their reasons joined. Judged
    for runs that ended ok or by a timeout; the caller gives such a run the status ``fidelity``."""
    return checks.untrusted(checks.Measured(status=status, endpoints=endpoints, link_stats=link_stats,
                                            link_events=link_events))


def from_json(text: Any) -> dict[str, Any] | None:
    """A run's recorded endpoint timing (``endpoint_timing.json``), or None."""
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
