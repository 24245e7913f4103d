"""Uniform (Bernoulli) losses: D[i] = u_v[i] < t(p), every packet independently."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fecbench.dropper.models.base import LossModel, Parameter, threshold, verdict_bits


@dataclass(frozen=True)
class Uniform(LossModel):
    p: float

    kind = "uniform"
    loader_name = "uniform"
    bench_goal = 1.3  # ns per packet over the empty tc program's, at most (`fecbench dropper bench`)
    parameters = (Parameter("p", "loss rate"),)
    changes_in_place = True  # a schedule's loss step writes a new threshold for the same random bits

    def loss_rate(self) -> float:
        return self.p

    def mean_burst(self) -> float:
        if self.p == 0:
            return 0.0
        return math.inf if self.p == 1 else 1 / (1 - self.p)

    def verdicts(self, seed: int, stream: int, n: int) -> np.ndarray:
        return verdict_bits(seed, stream, n) < np.uint64(threshold(self.p))
