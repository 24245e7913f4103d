"""The kernel program without a network: BPF_PROG_TEST_RUN verification against the reference, and the
per-packet cost benchmark."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fecbench.dropper.dropper import model_args, run_fecdrop
from fecbench.dropper.models import LossModel, reference_verdicts
from fecbench.inputs.errors import UserError, require_root


@dataclass
class Verification:
    ok: bool
    packets: int
    threads: int
    drops: int
    first_mismatch: int | None  # index of the first D[i] that differs, if any
    problems: list[str]
    info: dict[str, Any]

    def summary(self) -> str:
        if self.ok:
            return (f"ok: {self.packets} packets, {self.threads} thread(s), {self.drops} drops; "
                    "kernel verdicts equal the reference model")
        return "MISMATCH: " + "; ".join(self.problems)


def kernel_verdicts(model: LossModel, seed: int, stream: int, packets: int, threads: int = 1,
                    ge_table_len: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Feed `packets` test packets to a fresh (unattached) program from `threads` threads on distinct
    CPUs; return the verdict logged for each index (0/1, 255 = never logged) and the loader's summary."""
    require_root("running the BPF program (BPF_PROG_TEST_RUN)")
    if packets < 1 or packets > 20_000_000:
        raise UserError(f"packets must be in 1..20000000, not {packets}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "verdicts.bin"
        extra = {} if ge_table_len is None else {"ge_table_len": ge_table_len}
        info = json.loads(run_fecdrop("testrun", "--packets", str(packets), "--threads", str(threads),
                                      "--out", str(out), *model_args(model, seed, stream, tmp, **extra)))
        return np.fromfile(out, dtype=np.uint8), info


def verify(model: LossModel, seed: int, stream: int, packets: int, threads: int = 1,
           ge_table_len: int | None = None) -> Verification:
    got, info = kernel_verdicts(model, seed, stream, packets, threads, ge_table_len)
    want = reference_verdicts(model, seed, stream, packets)
    problems = []
    if info["index"] != packets:
        problems.append(f"the stream index ended at {info['index']}, not {packets}")
    for key in ("missing", "duplicates", "out_of_range"):
        if info[key]:
            problems.append(f"{info[key]} {key.replace('_', ' ')} verdict record(s)")
    diff = np.flatnonzero(got != want.astype(np.uint8))
    first = int(diff[0]) if diff.size else None
    if first is not None:
        problems.append(f"first mismatch at index {first}: kernel {int(got[first])}, reference {int(want[first])}"
                        f" ({diff.size} mismatches)")
    return Verification(not problems, packets, threads, int(want.sum()), first, problems, info)


def bench(repeat: int = 1_000_000) -> dict[str, Any]:
    """ns per packet (BPF_PROG_TEST_RUN, 1242-byte UDP packet) of the empty program and of each model."""
    require_root("the dropper benchmark (BPF_PROG_TEST_RUN)")
    if repeat < 1000:
        raise UserError("repeat must be at least 1000")
    return json.loads(run_fecdrop("bench", "--repeat", str(repeat)))
