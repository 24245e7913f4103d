"""Seeded, bit-reproducible packet losses: an eBPF tc program (dropper/) and its Python side.

    from fecbench.dropper import GilbertElliott, Filter, Dropper, reference_verdicts
    with Dropper.attach("r1-eth1", netns=pid, model=GilbertElliott(0.05, 0.3), seed=7) as d:
        ...; d.set(seed=8); d.stats()

The loss models are registered in fecbench.dropper.models (one module each).
"""

from fecbench.dropper.dropper import Dropper, Filter
from fecbench.dropper.models import (
    MODELS,
    GilbertElliott,
    LossModel,
    NoLoss,
    Trace,
    Uniform,
    burst_lengths,
    ge_from_loss_burst,
    model_class,
    reference_verdicts,
)

__all__ = ["Dropper", "Filter", "LossModel", "MODELS", "NoLoss", "Uniform", "GilbertElliott", "Trace", "model_class",
           "reference_verdicts", "burst_lengths", "ge_from_loss_burst"]
