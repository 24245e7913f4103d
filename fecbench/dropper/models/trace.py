"""Trace replay: D[i] = i is in the list of packet indices to drop (a recorded or hand-made pattern)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fecbench.dropper.models.base import GE_TABLE_LEN, TABLE_PACKETS, LossModel
from fecbench.inputs.errors import UserError


@dataclass(frozen=True)
class Trace(LossModel):
    indices: np.ndarray = field(compare=False, repr=False)
    length: int

    kind = "trace"
    loader_name = "trace"
    bench_goal = 1.3  # ns per packet over the empty tc program's, at most (`fecbench dropper bench`)
    file_key = "file"

    @classmethod
    def load(cls, indices_or_path: object, length: int | None = None) -> Trace:
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
        return cls(indices, length)

    @classmethod
    def _build(cls, values: dict[str, object], file: Path | None, allow_absorbing: bool) -> LossModel:
        if file is None:
            raise UserError("loss model trace needs a file of packet indices (file = ... / --file)")
        return cls.load(file)

    @classmethod
    def expected_loss(cls, params: Mapping[str, object]) -> float:
        return math.nan  # a record keeps no indices

    @classmethod
    def from_readback(cls, thresholds: Mapping[str, int]) -> LossModel | None:
        return None  # the kernel's table holds the indices, not the file they came from

    def loss_rate(self) -> float:
        return len(self.indices) / self.length if self.length else 0.0

    def mean_burst(self) -> float:
        if self.loss_rate() == 0:
            return 0.0
        bits = self.verdicts(0, 0, self.length)
        starts = int(bits[0]) + int(np.count_nonzero(bits[1:] & ~bits[:-1]))
        return self.loss_rate() * self.length / starts

    def verdicts(self, seed: int, stream: int, n: int) -> np.ndarray:
        out = np.zeros(n, dtype=bool)
        out[self.indices[self.indices < min(n, self.length)].astype(np.int64)] = True
        return out

    def describe(self) -> str:
        return f"trace {len(self.indices)} drops in {self.length} packets"

    def as_dict(self) -> dict[str, object]:
        return {"model": self.kind, "drops": int(len(self.indices)), "length": self.length}

    def loader_args(self, tmpdir: str, chain_table_len: int = GE_TABLE_LEN) -> list[str]:
        path = Path(tmpdir) / "trace.u64"
        self.indices.astype("<u8").tofile(path)
        return ["--model", self.loader_name, "--trace", str(path), "--table-len", str(self.length)]
