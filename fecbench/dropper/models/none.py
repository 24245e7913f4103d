"""No loss: the dropper counts packets and drops none."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fecbench.dropper.models.base import LossModel


@dataclass(frozen=True)
class NoLoss(LossModel):
    kind = "none"
    loader_name = "none"

    def loss_rate(self) -> float:
        return 0.0

    def mean_burst(self) -> float:
        return 0.0

    def verdicts(self, seed: int, stream: int, n: int) -> np.ndarray:
        return np.zeros(n, dtype=bool)
