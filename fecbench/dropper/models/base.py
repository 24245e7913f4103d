"""What every loss model is: the random bits its verdicts are drawn from, its parameters, and the
questions the rest of fecbench asks it (long-run loss, mean burst, words, the loader's arguments).

Every matching packet of a stream gets an index i = 0, 1, 2, ... and the verdict D[i] (True = drop),
a pure function of (model, seed, stream, i). The random bits of packet i are

    key     = mix64(mix64(seed ^ 0x6a09e667f3bcc909) ^ stream)
    x[i]    = mix64(key + (i + 1) * 0x9e3779b97f4a7c15)          (splitmix64's finaliser, mod 2^64)
    u_v[i]  = x[i] >> 32           decides the verdict
    u_m[i]  = x[i] & 0xffffffff    decides a state transition (Gilbert-Elliott)

and probabilities are 32-bit thresholds t = round(q * 2^32) in [0, 2^32] ("event when u < t"), so
q = 0 never happens and q = 1 always does. Each model's module says how it turns these bits into
verdicts; it must stay bit-identical to its C file in dropper/src/models/ (tests compare them).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from fecbench.inputs.errors import UserError

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
KEY_SALT = 0x6A09E667F3BCC909
TABLE_PACKETS = 1 << 24  # longest sequence the kernel's decision table holds
ONE = 1 << 32  # threshold of probability 1
GE_TABLE_LEN = 1 << 21  # packets a chain model pre-generates per set(); later ones use the kernel's locked chain

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


def verdict_bits(seed: int, stream: int, n: int) -> np.ndarray:
    """u_v[0..n): the 32 bits that decide each packet's verdict."""
    return random_bits(seed, stream, 0, n) >> np.uint64(32)


def threshold(q: float) -> int:
    """Probability -> 32-bit threshold in [0, 2^32] (resolution 2^-32; q * 2^32 is exact in binary)."""
    return int(round(q * ONE))


@dataclass(frozen=True)
class Parameter:
    """A probability a model takes: its name (in designs, the CLI and records), what it means, and its
    default (None: required)."""

    name: str
    meaning: str
    default: float | None = None

    def check(self, value: object) -> float:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise UserError(f"loss model: {self.name} must be a number, not {value!r}") from None
        if not 0.0 <= number <= 1.0 or math.isnan(number):
            raise UserError(f"loss model: {self.name} = {number} is outside [0, 1] (a probability)")
        return number


class LossModel(ABC):
    """A loss model. Subclasses are frozen dataclasses whose fields are their parameters, registered in
    fecbench.dropper.models; nothing outside a model's module tests which model it is."""

    kind: ClassVar[str]                       # its name in designs, records, stats and the CLI
    loader_name: ClassVar[str]                # `fecdrop --model` (dropper/src/models/)
    parameters: ClassVar[tuple[Parameter, ...]] = ()   # the loader's thresholds, in its order
    file_key: ClassVar[str | None] = None     # the design key / CLI option of a model read from a file
    changes_in_place: ClassVar[bool] = False  # a link schedule may change its loss during a run
    bench_goal: ClassVar[float | None] = None  # its kernel cost over the empty program's, at most

    # --- building ---
    @classmethod
    def from_params(cls, params: Mapping[str, object], file: Path | None = None,
                    allow_absorbing: bool = False) -> LossModel:
        """The model from its parameters by name (defaults filled in); unknown or missing names refused."""
        known = {p.name for p in cls.parameters}
        unknown = sorted(set(params) - known)
        if unknown:
            takes = ", ".join(sorted(known)) or "no parameters"
            raise UserError(f"loss model {cls.kind}: unknown parameter(s) {', '.join(unknown)} (it takes {takes})")
        values = {}
        for p in cls.parameters:
            value = params.get(p.name, p.default)
            if value is None:
                raise UserError(f"loss model {cls.kind} needs {p.name} ({p.meaning})")
            values[p.name] = value
        if file is not None and not cls.file_key:
            raise UserError(f"loss model {cls.kind} reads no file")
        return cls._build(values, file, allow_absorbing)

    @classmethod
    def _build(cls, values: dict[str, object], file: Path | None, allow_absorbing: bool) -> LossModel:
        """The model from its parameters' values (checked by the constructor) and its file, if it reads one."""
        return cls(**values)

    def __post_init__(self) -> None:
        """Each parameter checked and stored as a number (a subclass's dataclass constructor calls this)."""
        for parameter in self.parameters:
            object.__setattr__(self, parameter.name, parameter.check(getattr(self, parameter.name)))

    @classmethod
    def expected_loss(cls, params: Mapping[str, object]) -> float:
        """The long-run loss rate of a recorded parameter set (NaN when it cannot be told)."""
        try:
            return cls.from_params(params, allow_absorbing=True).loss_rate()
        except UserError:
            return math.nan

    # --- theory ---
    @abstractmethod
    def loss_rate(self) -> float:
        """Long-run share of packets dropped."""

    @abstractmethod
    def mean_burst(self) -> float:
        """Expected length of a run of consecutive drops (0 without drops, inf when every packet is dropped)."""

    def loss_rate_sigma(self, n: int) -> float:
        """Standard deviation of the loss rate measured over n packets (asymptotic, for checks); independent
        verdicts unless a model says otherwise."""
        loss = self.loss_rate()
        return math.sqrt(loss * (1 - loss) / n)

    # --- the verdicts ---
    @abstractmethod
    def verdicts(self, seed: int, stream: int, n: int) -> np.ndarray:
        """D[0..n): True = drop; bit-identical to the kernel program for the same (seed, stream)."""

    def states(self, seed: int, stream: int, n: int) -> np.ndarray:
        """The state (False Good, True Bad) in which packet i gets its verdict: Good for stateless models."""
        return np.zeros(n, dtype=bool)

    # --- words and records ---
    def values(self) -> dict[str, float]:
        return {p.name: getattr(self, p.name) for p in self.parameters}

    def describe(self) -> str:
        return " ".join([self.kind, *(f"{name}={value:g}" for name, value in self.values().items())])

    def as_dict(self) -> dict[str, object]:
        return {"model": self.kind, **self.values()}

    # --- the kernel loader ---
    def loader_args(self, tmpdir: str, chain_table_len: int = GE_TABLE_LEN) -> list[str]:
        """`fecdrop`'s model options: its name and its thresholds, computed here once."""
        args = ["--model", self.loader_name]
        for name, value in self.values().items():
            args += ["--t", f"{name}={threshold(value)}"]
        return args

    @classmethod
    def from_readback(cls, thresholds: Mapping[str, int]) -> LossModel | None:
        """The model in force, from the thresholds the kernel holds (None when they do not say it all)."""
        return cls.from_params({name: t / ONE for name, t in thresholds.items()}, allow_absorbing=True)

