"""Runs of a campaign: enumeration, content-hashed keys, common-random-number loss seeds, order.

A run is (design point × implementation label × download size × repetition). Its key hashes its
content, so resuming a campaign finds the same keys and never writes a duplicate row. Its loss seed
depends only on the design seed, the point and the repetition — not on the implementation — so every
implementation meets the same loss pattern at the same (point, repetition): common random numbers.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from fecbench.runners.design import Design, ImplEntry


def _canonical(value: Any) -> Any:
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


def estimate_seconds(run: Run, design: Design, overhead_s: float = 0.5) -> float:
    """A rough duration: harness overhead + handshake and request RTTs + transfer at the bottleneck rate."""
    owd_ms = _first(run.values, ("owd", "owd_1", "delay"), 20.0)
    bw_mbit = _first(run.values, ("bw", "bw_1"), 10.0)
    rtt_s = 2 * owd_ms / 1000
    if design.workload.kind == "messages":
        return overhead_s + 3 * rtt_s + design.workload.duration
    if design.workload.kind == "reqresp":
        per_exchange = sum(design.workload.exchange_sizes(run.size)) * 8 / (bw_mbit * 1e6)
        return overhead_s + 2 * rtt_s + design.workload.exchanges * (1.5 * rtt_s + 1.2 * per_exchange)
    transfer = (run.size or 0) * 8 / (bw_mbit * 1e6)
    slow_start_rtts = max(1.0, math.log2(max(2.0, (run.size or 0) / 12000)))
    return overhead_s + (3 + slow_start_rtts) * rtt_s + 1.2 * transfer
