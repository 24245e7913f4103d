"""In-place changes to a running dropper, without resetting its stream: outages and loss steps.

`Dropper.set` rewrites the whole configuration and restarts the stream at index 0 (and drops the
verdict log), which is right between runs and wrong in the middle of one: the loss pattern would
restart after every handover. A schedule (fecbench.emulation.schedule) instead changes the live
configuration the way the loader itself does, through the instance's pinned, memory-mapped global
data (`bss`: `struct fd_config cfg` then the shared packet index, dropper/src/shared.h):

- an **outage** switches the instance to the uniform model with threshold 2^32 (drop everything)
  and back. Packets keep taking stream indices during the outage, so outside outages packet i gets
  exactly the verdict D[i] of the seeded model, as in a run without a schedule (a Gilbert-Elliott
  chain is a function of the index too); the outage drops are logged (verdict 1) like any other.
  The verdict of packet i is therefore ``D[i] or (i in an outage's index range)``, and each switch
  records the stream index at which it took effect, so every verdict log can be re-derived from the
  seed and the recorded ranges (`expected_verdicts`).
- a **loss step** (a model that `changes_in_place`: uniform) writes the new threshold: packet i then gets
  ``hash(seed, stream, i) < t(p_new)``, the same random number against a new threshold.

The loader derives `stats()["dropped"]` from the model in force, so outage drops are not in it: the runner
adds them (`drops_with_outages`, from the index ranges the schedule's events recorded, or the verdict log).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from fecbench.dropper.models import LossModel, reference_verdicts
from fecbench.dropper.models.base import threshold
from fecbench.host import bpfsys
from fecbench.inputs.errors import UserError

# struct fd_config (dropper/src/shared.h) and its place in the program's .bss (fecdrop.skel.h).
OFF_MODEL, OFF_SEED, OFF_STREAM, OFF_T0 = 0, 16, 24, 32   # OFF_T0: cfg.t[0], uniform's p
OFF_INDEX = 192              # next_index, aligned to 64 bytes after the 160-byte cfg
BSS_VALUE_SIZE = 200
MODEL_UNIFORM = 1            # its place in dropper/src/models.h's FD_MODELS
DROP_ALL = 1 << 32           # uniform: drop when u < t[0], u < 2^32


class LiveConfig:
    """The memory-mapped configuration of one attached dropper instance (its pin directory)."""

    def __init__(self, pin: str | Path, seed: int, stream: int) -> None:
        try:
            self._map = bpfsys.mmap_pinned(Path(pin) / "bss", BSS_VALUE_SIZE)
        except ValueError:
            raise UserError(f"dropper {pin}: its global data is not laid out as this fecbench expects "
                            "(another build of the dropper): rebuild with make -C dropper") from None
        except OSError as exc:
            raise UserError(f"dropper {pin}: cannot open its configuration ({exc.strerror})") from None
        # The seed and stream the harness set must be where we read them: a layout check.
        if (self._u64(OFF_SEED), self._u64(OFF_STREAM)) != (seed, stream):
            self.close()
            raise UserError(f"dropper {pin}: configuration does not match (seed, stream) = ({seed}, {stream})")
        self.saved = (self._u32(OFF_MODEL), self._u64(OFF_T0))

    def _u32(self, offset: int) -> int:
        return struct.unpack_from("<I", self._map, offset)[0]

    def _u64(self, offset: int) -> int:
        return struct.unpack_from("<Q", self._map, offset)[0]

    def index(self) -> int:
        """The stream index the next matching packet will take."""
        return self._u64(OFF_INDEX)

    def _write(self, model: int, t_p: int) -> tuple[int, int]:
        """Threshold first, then the model (each one aligned store): a packet sees the old or the new
        configuration, never a uniform model with the old threshold. Returns the index before and after."""
        before = self.index()
        struct.pack_into("<Q", self._map, OFF_T0, t_p)
        struct.pack_into("<I", self._map, OFF_MODEL, model)
        return before, self.index()

    def set(self, outage: bool = False, p: float | None = None) -> tuple[int, int]:
        """The configuration for a state of the link: every packet dropped during an outage, else the uniform
        model at `p`, else (p None) the configuration found when this object was made; from the next packet
        on (same stream). One write whatever changed, so a loss step during an outage waits for its end."""
        if outage:
            return self._write(MODEL_UNIFORM, DROP_ALL)
        if p is None:
            return self._write(*self.saved)
        if self.saved[0] != MODEL_UNIFORM:
            raise UserError("loss changes in place need the uniform loss model")
        return self._write(MODEL_UNIFORM, threshold(p))

    def state(self) -> tuple[int, int]:
        """The configuration in force: (model, threshold) as the kernel reads them."""
        return self._u32(OFF_MODEL), self._u64(OFF_T0)

    def changed(self) -> bool:
        return (self._u32(OFF_MODEL), self._u64(OFF_T0)) != self.saved

    def restore(self) -> tuple[int, int]:
        """Back to the configuration found when this object was made; the index before and after."""
        return self._write(*self.saved)

    def close(self) -> None:
        self._map.close()


def expected_verdicts(model: LossModel, seed: int, stream: int, n: int,
                      outages: list[tuple[int, int]]) -> np.ndarray:
    """The verdicts (1 = drop) of packets 0..n-1 under ``model`` with the given outage index ranges
    [start, end): what a verdict log must hold for a schedule with outages only."""
    verdicts = np.asarray(reference_verdicts(model, seed, stream, n), dtype=np.uint8).copy()
    for start, end in outages:
        verdicts[max(0, start):max(0, min(end, n))] = 1
    return verdicts


def drops_with_outages(model: LossModel, seed: int, stream: int, n: int, outages: list[tuple[int, int]]) -> int:
    """How many of packets 0..n-1 a dropper dropped, its model's and its outages' (`expected_verdicts`)."""
    return int(expected_verdicts(model, seed, stream, n, outages).sum())
