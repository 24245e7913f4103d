"""Gilbert-Elliott losses: a two-state Markov chain (Good, Bad), each state with its own loss rate.

Start in Good. For each packet, first the verdict in the current state (deliver when u_v < t(k) in Good,
when u_v < t(h) in Bad), then the transition (Good -> Bad when u_m < t(p); Bad -> Good when u_m < t(r)).
The seed papers' parameters: p = P(Good -> Bad), r = P(Bad -> Good), k = P(deliver | Good),
h = P(deliver | Bad); k = 1, h = 0 is the simple two-state model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fecbench.dropper.models.base import GE_TABLE_LEN, LossModel, Parameter, random_bits, threshold
from fecbench.inputs.errors import UserError


@dataclass(frozen=True)
class GilbertElliott(LossModel):
    p: float
    r: float
    k: float = 1.0
    h: float = 0.0
    allow_absorbing: bool = field(default=False, compare=False, repr=False)

    kind = "gilbert-elliott"
    loader_name = "ge"
    bench_goal = 1.6  # ns per packet over the empty tc program's, at most (`fecbench dropper bench`)
    parameters = (Parameter("p", "P(Good -> Bad)"), Parameter("r", "P(Bad -> Good)"),
                  Parameter("k", "P(deliver | Good)", 1.0), Parameter("h", "P(deliver | Bad)", 0.0))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.r == 0.0 and self.p > 0.0 and not self.allow_absorbing:
            raise UserError("loss model: r = 0 with p > 0 makes Bad absorbing (the link dies after the first "
                            "transition); pass allow_absorbing / --allow-absorbing if that is intended")

    @classmethod
    def _build(cls, values: dict[str, object], file: Path | None, allow_absorbing: bool) -> LossModel:
        return cls(**values, allow_absorbing=allow_absorbing)

    # --- theory ---
    def stationary(self) -> tuple[float, float]:
        """(P(Good), P(Bad)) in the long run (Good only when no transition can happen)."""
        if self.p + self.r == 0:
            return 1.0, 0.0
        return self.r / (self.p + self.r), self.p / (self.p + self.r)

    def loss_rate(self) -> float:
        good, bad = self.stationary()
        return good * (1 - self.k) + bad * (1 - self.h)

    def mean_burst(self) -> float:
        loss = self.loss_rate()
        if loss == 0:
            return 0.0
        # burst starts = P(D[i-1] = 0, D[i] = 1); verdict and transition bits are independent.
        pi = self.stationary()
        keep = (self.k, self.h)
        move = ((1 - self.p, self.p), (self.r, 1 - self.r))
        starts = sum(pi[s] * keep[s] * move[s][t] * (1 - keep[t]) for s in (0, 1) for t in (0, 1))
        return math.inf if starts == 0 else loss / starts

    def loss_rate_sigma(self, n: int) -> float:
        loss = self.loss_rate()
        var = loss * (1 - loss)
        good, bad = self.stationary()
        lam = 1 - self.p - self.r
        if lam < 1:  # the chain's memory adds the covariance of the states' loss rates
            var += 2 * ((1 - self.h) - (1 - self.k)) ** 2 * good * bad * lam / (1 - lam)
        return math.sqrt(var / n)

    # --- the verdicts ---
    def states(self, seed: int, stream: int, n: int) -> np.ndarray:
        bits = random_bits(seed, stream, 0, n)
        u_move = bits & np.uint64(0xFFFFFFFF)
        # s[i+1] = f_i(s[i]) with f_i(Good) = go_bad[i], f_i(Bad) = stay_bad[i]. Each f_i is a constant
        # (when both agree), the identity or a negation, so s[i+1] is the value of the last constant
        # step XOR the parity of the negations since: vectorised with an accumulate and a cumsum.
        go_bad = u_move < np.uint64(threshold(self.p))
        stay_bad = u_move >= np.uint64(threshold(self.r))
        constant = go_bad == stay_bad
        negation = go_bad & ~stay_bad
        idx = np.arange(n)
        last = np.maximum.accumulate(np.where(constant, idx, -1)) if n else idx
        flips = np.cumsum(negation, dtype=np.int64)
        base = np.where(last >= 0, go_bad[np.maximum(last, 0)], False)
        flips_before = np.where(last >= 0, flips[np.maximum(last, 0)], 0)
        after = base ^ (((flips - flips_before) & 1) == 1)
        states = np.empty(n, dtype=bool)
        if n:
            states[0] = False
            states[1:] = after[:-1]
        return states

    def verdicts(self, seed: int, stream: int, n: int) -> np.ndarray:
        u_verdict = random_bits(seed, stream, 0, n) >> np.uint64(32)
        keep = np.where(self.states(seed, stream, n), np.uint64(threshold(self.h)), np.uint64(threshold(self.k)))
        return u_verdict >= keep

    # --- the kernel loader: the chain's first packets pre-generated, the rest under the kernel's lock ---
    def loader_args(self, tmpdir: str, chain_table_len: int = GE_TABLE_LEN) -> list[str]:
        return [*super().loader_args(tmpdir), "--table-len", str(chain_table_len)]


def ge_from_loss_burst(loss: float, burst: float) -> tuple[float, float]:
    """(mean loss rate, mean burst length) -> (p, r) of the simple two-state model (k = 1, h = 0)."""
    if not 0 < loss < 1:
        raise UserError(f"mean loss must be in (0, 1), not {loss}")
    if burst < 1:
        raise UserError(f"mean burst length must be >= 1 packet, not {burst}")
    r = 1 / burst
    p = loss * r / (1 - loss)
    if p > 1:
        raise UserError(f"no two-state model has loss {loss} with bursts of {burst} (p would be {p:.3g} > 1)")
    return p, r
