"""The loss models, registered once: each is one module (its parameters, theory, verdicts and loader
arguments) here and one file in dropper/src/models/; everything else asks the model.

To add one: its module here, one line in MODELS, its C file and one line in dropper/src/models.h, and a
case in tests/test_loss_models.py's examples (see ARCHITECTURE.md, "Where to add").
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fecbench.dropper.models.base import LossModel, Parameter
from fecbench.dropper.models.gilbert_elliott import GilbertElliott, ge_from_loss_burst
from fecbench.dropper.models.none import NoLoss
from fecbench.dropper.models.trace import Trace
from fecbench.dropper.models.uniform import Uniform
from fecbench.inputs.errors import UserError

MODELS: dict[str, type[LossModel]] = {m.kind: m for m in (NoLoss, Uniform, GilbertElliott, Trace)}


def model_class(kind: str) -> type[LossModel]:
    try:
        return MODELS[kind]
    except KeyError:
        raise UserError(f"unknown loss model {kind!r} (known: {', '.join(MODELS)})") from None


def expected_loss(kind: str, params: Mapping[str, object]) -> float:
    """The long-run loss rate of a recorded model and parameters (NaN for an unknown model)."""
    cls = MODELS.get(kind)
    return float("nan") if cls is None else cls.expected_loss(params)


def reference_verdicts(model: LossModel, seed: int, stream: int, n: int) -> np.ndarray:
    """D[0..n): True = drop; bit-identical to the kernel program for the same (model, seed, stream)."""
    return model.verdicts(int(seed) & ((1 << 64) - 1), int(stream) & ((1 << 64) - 1), n)


def burst_lengths(verdicts: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive drops."""
    v = np.concatenate(([False], np.asarray(verdicts, dtype=bool), [False])).astype(np.int8)
    edges = np.diff(v)
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


__all__ = ["MODELS", "LossModel", "Parameter", "NoLoss", "Uniform", "GilbertElliott", "Trace", "model_class",
           "expected_loss", "reference_verdicts", "burst_lengths", "ge_from_loss_burst"]
