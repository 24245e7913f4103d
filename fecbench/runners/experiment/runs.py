"""Runs of a campaign: enumeration, content-hashed keys, common-random-number loss seeds, order.

A run is (design point × implementation label × download size × repetition). Its key hashes its
content, so resuming a campaign finds the same keys and never writes a duplicate row. Its loss seed
depends only on the design seed, the point and the repetition — not on the implementation — so every
implementation meets the same loss pattern at the same (point, repetition): common random numbers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fecbench.dropper.models import MODELS
from fecbench.runners.experiment.design import Design, ImplEntry


def _canonical(value: object) -> object:
    """Plain JSON-able values: numpy scalars become Python ones (json writes floats exactly, by repr)."""
    return value.item() if hasattr(value, "item") else value


def point_values(values: dict[str, Any]) -> dict[str, Any]:
    return {str(k): _canonical(v) for k, v in sorted(values.items())}


def loss_seed(design_seed: int, point: int, repetition: int) -> int:
    """The loss seed of (point, repetition): 63 bits (fits SQLite's signed INTEGER), never 0."""
    digest = hashlib.sha256(f"fecbench-crn-v1:{design_seed}:{point}:{repetition}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1) or 1


def run_key(experiment_hash: str, values: dict[str, Any], impl: ImplEntry | tuple[str, dict[str, Any], str],
            workload: dict[str, Any], size: int | None, repetition: int) -> str:
    """sha256 of (experiment hash, point values, implementation name + args, label, workload, size, rep)."""
    name, args, label = (impl.name, impl.args, impl.label) if isinstance(impl, ImplEntry) else impl
    content = {"experiment": experiment_hash, "point": point_values(values), "impl": name,
               "args": {k: _canonical(v) for k, v in sorted(args.items())}, "label": label,
               "workload": workload, "size": size, "repetition": repetition}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


@dataclass
class Run:
    key: str
    index: int                    # position in execution order
    point: int
    values: dict[str, Any]        # the point's factor values
    impl: ImplEntry
    workload: str
    size: int | None
    repetition: int
    loss_seed: int

    @property
    def label(self) -> str:
        return self.impl.label

    def row(self, campaign_id: int) -> dict[str, Any]:
        """The runs-table columns fixed at planning time."""
        return {"key": self.key, "campaign_id": campaign_id, "point": self.point, "impl": self.impl.name,
                "label": self.impl.label, "impl_args": json.dumps(self.impl.args, sort_keys=True),
                "workload": self.workload, "size": self.size, "repetition": self.repetition,
                "loss_seed": self.loss_seed}


def enumerate_runs(design: Design, points: dict[int, dict[str, Any]], experiment_hash: str) -> list[Run]:
    """Every run of the design, in execution order (seeded shuffle for order = 'random')."""
    workload = design.workload.params()
    runs: list[Run] = []
    for point, values in sorted(points.items()):
        for repetition in range(design.repetitions):
            seed = loss_seed(design.seed, point, repetition)
            for impl in design.impls:
                for size in design.workload.sizes:
                    key = run_key(experiment_hash, values, impl, workload, size, repetition)
                    runs.append(Run(key=key, index=0, point=point, values=values, impl=impl,
                                    workload=design.workload.kind, size=size,
                                    repetition=repetition, loss_seed=seed))
    if design.order == "random":
        random.Random(f"fecbench-order:{design.seed}").shuffle(runs)
    for index, run in enumerate(runs):
        run.index = index
    return runs


def _first(values: dict[str, Any], names: tuple[str, ...], default: float) -> float:
    for name in names:
        if name in values:
            try:
                value = float(values[name])
            except (TypeError, ValueError):
                continue
            if math.isfinite(value) and value > 0:
                return value
    return default


def grace_s(timeout_s: float) -> float:
    """How much longer than timeout_s the harness waits for a client before it kills it: time for an
    implementation that gives up at timeout_s to close its connection and write its metrics."""
    return min(10.0, max(2.0, 0.05 * timeout_s))


#: The model's constants, measured on this project's 2-core machine (designs/README.md, "How long a
#: campaign takes"): the harness's own time per run once the links are set (server start, stopping,
#: statistics, the client process starting: 0.05-0.1 s); the delay before a lost handshake packet is
#: sent again (QUIC's first PTO); the bytes a download gets through in slow start before its losses
#: slow it down, and the constant of its loss-limited rate (packet × 8 / RTT × C / √loss: Mathis et al.
#: 1997 give 1.22 for Reno; 1.5 fitted fecq's CUBIC downloads of networking2019-uniform: measured ÷
#: model 0.92-1.15 per size over a pilot of 64 of its runs, and 0.90-1.10 per size, 0.92 ± 0.07 in all,
#: over 64 others; a run's own ratio varies by about 30 %, its losses being random). The model without
#: losses took 17.8 h for that design; its runs take about 60 h one after the other.
OVERHEAD_S = 0.1
HANDSHAKE_PTO_S = 1.0
PACKET_BYTES = 1200
SLOW_START_BYTES = 64_000
LOSS_RATE_CONSTANT = 1.5


def mean_loss(run: Run, design: Design) -> float:
    """The long-run loss rate of the run's first lossy link (0 without a loss model)."""
    loss = design.loss
    if MODELS[loss.model].file_key:
        return 0.0  # not read from its file once per run estimated
    from fecbench.inputs.errors import UserError

    try:
        return min(1.0, max(0.0, loss.model_at(run.values, 1 if loss.per_path() else None).loss_rate()))
    except (KeyError, TypeError, ValueError, UserError):
        return 0.0


@functools.lru_cache(maxsize=16)
def trace_rate(topology_path: str) -> float | None:
    """The slowest trace link's mean capacity (Mbit/s) in a topology whose rates are measured traces (None without
    one, or a trace chosen by a factor): what the duration model takes for the rate its points do not give."""
    from fecbench.emulation import load_topology
    from fecbench.inputs.errors import UserError
    from fecbench.inputs.traces import load_trace

    try:
        topo = load_topology(topology_path)
    except UserError:   # the design's own check says what is wrong with its topology
        return None
    files = [d.trace for link in topo.links for d in (link.forward, link.reverse) if isinstance(d.trace, Path)]
    rates = [load_trace(f if f.is_absolute() else Path(topology_path).parent / f).mean_mbit for f in files]
    return min(rates) if rates else None


def estimate_seconds(run: Run, design: Design, overhead_s: float = OVERHEAD_S, capped: bool = True) -> float:
    """A run's duration: harness overhead + a lost handshake packet's timeout (times its probability) +
    handshake, request and statistics RTTs + slow start + the transfer at the bottleneck rate, slowed
    beyond SLOW_START_BYTES to the loss-limited rate when that is lower; at most the design's time limit.
    A model: `fecbench bench campaign` measures how far a real design is from it (its pilot)."""
    owd_ms = _first(run.values, ("owd", "owd_1"), 20.0)
    bw_mbit = _first(run.values, ("bw", "bw_1"), trace_rate(str(design.topology_path)) or 10.0)
    rtt_s = 2 * owd_ms / 1000
    limit = design.timeout_s + grace_s(design.timeout_s) if capped else float("inf")
    if design.workload.kind == "messages":
        return min(limit, overhead_s + 3 * rtt_s + design.workload.duration)
    loss = mean_loss(run, design)
    # Competing flows: the first starts `lead` s before the foreground, and a bulk flow takes its share.
    flows = design.flows.instances(run.values) if design.flows else []
    lead = max([0.0, *(-f.start_s for f in flows)])
    rate_bps = bw_mbit * 1e6 / (1 + sum(1 for f in flows if f.stops_with_foreground))
    slow_bps = min(rate_bps, PACKET_BYTES * 8 / rtt_s * LOSS_RATE_CONSTANT / math.sqrt(loss)) if loss > 0 else rate_bps
    handshake = (1 - (1 - loss) ** 4) * HANDSHAKE_PTO_S
    if design.workload.kind == "reqresp":
        per_exchange = sum(design.workload.exchange_sizes(run.size)) * 8 / slow_bps
        return min(limit, overhead_s + handshake + 2 * rtt_s
                   + design.workload.exchanges * (1.5 * rtt_s + 1.2 * per_exchange))
    if design.workload.page_graph is not None:   # its critical path, 1.5 RTT and the bytes' time per download
        load_ms = design.workload.page_graph.modelled_load_ms(rtt_s * 1000, slow_bps / 8000, rtts=1.5)
        return min(limit, overhead_s + handshake + 2 * rtt_s + load_ms / 1000)
    size = run.size or 0
    slow_start_rtts = max(0.0, math.log2(max(1.0, size / 12000)))
    transfer = size * 8 / rate_bps + max(0, size - SLOW_START_BYTES) * 8 * (1 / slow_bps - 1 / rate_bps)
    return min(limit + lead, lead + overhead_s + handshake + (3 + slow_start_rtts) * rtt_s + transfer)
