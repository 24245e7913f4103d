"""Loss models and the reference model: the verdict sequence D[i] the kernel program applies, bit for bit.

Every matching packet of a stream gets an index i = 0, 1, 2, ... and the verdict D[i] (True = drop),
a pure function of (model, seed, stream, i). The random bits of packet i are

    key     = mix64(mix64(seed ^ 0x6a09e667f3bcc909) ^ stream)
    x[i]    = mix64(key + (i + 1) * 0x9e3779b97f4a7c15)          (splitmix64's finaliser, mod 2^64)
    u_v[i]  = x[i] >> 32           decides the verdict
    u_m[i]  = x[i] & 0xffffffff    decides the Gilbert-Elliott transition

and probabilities are 32-bit thresholds t = round(q * 2^32) in [0, 2^32] ("event when u < t"), so
q = 0 never happens and q = 1 always does.

- uniform(p):  D[i] = u_v[i] < t(p).
- gilbert_elliott(p, r, k, h): start in Good. For each packet, first the verdict in the current state
  (deliver when u_v < t(k) in Good, when u_v < t(h) in Bad), then the transition (Good -> Bad when
  u_m < t(p); Bad -> Good when u_m < t(r)).
- trace(indices): D[i] = i is in the list.
- none(): never drops.

This module must stay identical to dropper/src/fecdrop.h and fecdrop.bpf.c (tests compare them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fecbench.errors import UserError

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
KEY_SALT = 0x6A09E667F3BCC909
TABLE_PACKETS = 1 << 24  # longest trace the kernel's decision table holds
ONE = 1 << 32  # threshold of probability 1

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64_int(z: int) -> int:
    """splitmix64's finaliser on a Python int (mod 2^64)."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def stream_key(seed: int, stream: int) -> int:
    return mix64_int(mix64_int(seed ^ KEY_SALT) ^ stream)


def random_bits(seed: int, stream: int, start: int, n: int) -> np.ndarray:
    """x[i] for i in [start, start + n) as uint64 (numpy's uint64 arithmetic wraps mod 2^64)."""
    key = np.uint64(stream_key(seed, stream))
    z = (np.arange(start, start + n, dtype=np.uint64) + np.uint64(1)) * np.uint64(GOLDEN) + key
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def threshold(q: float) -> int:
    """Probability -> 32-bit threshold in [0, 2^32] (resolution 2^-32; q * 2^32 is exact in binary)."""
    return int(round(q * ONE))


def _check_probability(name: str, value: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise UserError(f"loss model: {name} must be a number, not {value!r}") from None
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise UserError(f"loss model: {name} = {value} is outside [0, 1]")
    return value


@dataclass(frozen=True)
class LossModel:
    """A loss model: kind in none | uniform | gilbert-elliott | trace, with its parameters."""

    kind: str
    p: float = 0.0
    r: float = 1.0
    k: float = 1.0
    h: float = 0.0
    trace_indices: np.ndarray | None = field(default=None, compare=False, repr=False)
    trace_length: int = 0

    @classmethod
    def none(cls) -> LossModel:
        return cls("none")

    @classmethod
    def uniform(cls, p: float) -> LossModel:
        return cls("uniform", p=_check_probability("p", p))

    @classmethod
    def gilbert_elliott(cls, p: float, r: float, k: float = 1.0, h: float = 0.0,
                        allow_absorbing: bool = False) -> LossModel:
        """p = P(Good -> Bad), r = P(Bad -> Good), k = P(deliver | Good), h = P(deliver | Bad)."""
        p, r = _check_probability("p", p), _check_probability("r", r)
        k, h = _check_probability("k", k), _check_probability("h", h)
        if r == 0.0 and p > 0.0 and not allow_absorbing:
            raise UserError("loss model: r = 0 with p > 0 makes Bad absorbing (the link dies after the first "
                            "transition); pass allow_absorbing / --allow-absorbing if that is intended")
        return cls("gilbert-elliott", p=p, r=r, k=k, h=h)

    @classmethod
    def trace(cls, indices_or_path: object, length: int | None = None) -> LossModel:
        """Drop exactly the packets whose index is listed: a sequence of ints, a boolean bitmap (numpy
        bool array), or a path to a text file (one index per line, '#' comments) or a .npy file."""
        src = indices_or_path
        if isinstance(src, (str, Path)):
            path = Path(src)
            if not path.is_file():
                raise UserError(f"trace file {path} does not exist")
            if path.suffix == ".npy":
                src = np.load(path)
            else:
                try:
                    src = [int(line.split("#")[0]) for line in path.read_text().splitlines()
                           if line.split("#")[0].strip()]
                except ValueError as exc:
                    raise UserError(f"trace file {path}: {exc}") from None
        arr = np.asarray(src)
        if arr.dtype == bool:
            length = len(arr) if length is None else length
            arr = np.flatnonzero(arr)
        if arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0):
            raise UserError("trace: packet indices must be non-negative integers")
        indices = np.unique(arr.astype(np.uint64))
        end = int(indices[-1]) + 1 if indices.size else 0
        length = end if length is None else int(length)
        if length < end:
            raise UserError(f"trace: length {length} is shorter than the last index + 1 ({end})")
        if length > TABLE_PACKETS:
            raise UserError(f"trace: {length} packets exceed the kernel table ({TABLE_PACKETS} packets)")
        return cls("trace", trace_indices=indices, trace_length=length)

    # --- theory ---
    def loss_rate(self) -> float:
        if self.kind == "uniform":
            return self.p
        if self.kind == "gilbert-elliott":
            good, bad = self.stationary()
            return good * (1 - self.k) + bad * (1 - self.h)
        if self.kind == "trace":
            return len(self.trace_indices) / self.trace_length if self.trace_length else 0.0
        return 0.0

    def stationary(self) -> tuple[float, float]:
        """(P(Good), P(Bad)) in the long run (Good only when no transition can happen)."""
        if self.p + self.r == 0:
            return 1.0, 0.0
        return self.r / (self.p + self.r), self.p / (self.p + self.r)

    def mean_burst(self) -> float:
        """Expected length of a run of consecutive drops (inf when every packet is dropped)."""
        loss = self.loss_rate()
        if loss == 0:
            return 0.0
        if self.kind == "uniform":
            return math.inf if self.p == 1 else 1 / (1 - self.p)
        if self.kind == "gilbert-elliott":
            # burst starts = P(D[i-1] = 0, D[i] = 1); verdict and transition bits are independent.
            pi = self.stationary()
            keep = (self.k, self.h)
            move = ((1 - self.p, self.p), (self.r, 1 - self.r))
            starts = sum(pi[s] * keep[s] * move[s][t] * (1 - keep[t]) for s in (0, 1) for t in (0, 1))
            return math.inf if starts == 0 else loss / starts
        bits = reference_verdicts(self, 0, 0, self.trace_length)
        starts = int(bits[0]) + int(np.count_nonzero(bits[1:] & ~bits[:-1]))
        return loss * self.trace_length / starts

    def loss_rate_sigma(self, n: int) -> float:
        """Standard deviation of the loss rate measured over n packets (asymptotic, for checks)."""
        loss = self.loss_rate()
        var = loss * (1 - loss)
        if self.kind == "gilbert-elliott":
            good, bad = self.stationary()
            lam = 1 - self.p - self.r
            if lam < 1:
                var += 2 * ((1 - self.h) - (1 - self.k)) ** 2 * good * bad * lam / (1 - lam)
        return math.sqrt(var / n)

    def describe(self) -> str:
        if self.kind == "uniform":
            return f"uniform p={self.p:g}"
        if self.kind == "gilbert-elliott":
            return f"gilbert-elliott p={self.p:g} r={self.r:g} k={self.k:g} h={self.h:g}"
        if self.kind == "trace":
            return f"trace {len(self.trace_indices)} drops in {self.trace_length} packets"
        return "none"

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"model": self.kind}
        if self.kind == "uniform":
            out["p"] = self.p
        elif self.kind == "gilbert-elliott":
            out.update(p=self.p, r=self.r, k=self.k, h=self.h)
        elif self.kind == "trace":
            out.update(drops=int(len(self.trace_indices)), length=self.trace_length)
        return out


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


def reference_states(model: LossModel, seed: int, stream: int, n: int) -> np.ndarray:
    """Gilbert-Elliott state (False Good, True Bad) in which packet i gets its verdict."""
    if model.kind != "gilbert-elliott":
        return np.zeros(n, dtype=bool)
    bits = random_bits(seed, stream, 0, n)
    u_move = bits & np.uint64(0xFFFFFFFF)
    # s[i+1] = f_i(s[i]) with f_i(Good) = go_bad[i], f_i(Bad) = stay_bad[i]. Each f_i is a constant
    # (when both agree), the identity or a negation, so s[i+1] is the value of the last constant
    # step XOR the parity of the negations since: vectorised with an accumulate and a cumsum.
    go_bad = u_move < np.uint64(threshold(model.p))
    stay_bad = u_move >= np.uint64(threshold(model.r))
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


def reference_verdicts(model: LossModel, seed: int, stream: int, n: int) -> np.ndarray:
    """D[0..n): True = drop; bit-identical to the kernel program for the same (model, seed, stream)."""
    seed, stream = int(seed) & MASK64, int(stream) & MASK64
    if model.kind == "none" or n == 0:
        return np.zeros(n, dtype=bool)
    if model.kind == "trace":
        out = np.zeros(n, dtype=bool)
        idx = model.trace_indices[model.trace_indices < min(n, model.trace_length)]
        out[idx.astype(np.int64)] = True
        return out
    u_verdict = random_bits(seed, stream, 0, n) >> np.uint64(32)
    if model.kind == "uniform":
        return u_verdict < np.uint64(threshold(model.p))
    states = reference_states(model, seed, stream, n)
    keep = np.where(states, np.uint64(threshold(model.h)), np.uint64(threshold(model.k)))
    return u_verdict >= keep


def burst_lengths(verdicts: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive drops."""
    v = np.concatenate(([False], np.asarray(verdicts, dtype=bool), [False])).astype(np.int8)
    edges = np.diff(v)
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
