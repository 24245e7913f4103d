"""Seeded, bit-reproducible packet losses: an eBPF tc program (dropper/) and its Python side.

    from fecbench.dropper import LossModel, Filter, Dropper, reference_verdicts
    with Dropper.attach("r1-eth1", netns=pid, model=LossModel.gilbert_elliott(0.05, 0.3), seed=7) as d:
        ...; d.set(seed=8); d.stats()
"""

from fecbench.dropper.dropper import Dropper, Filter
from fecbench.dropper.model import LossModel, burst_lengths, ge_from_loss_burst, reference_verdicts

__all__ = ["Dropper", "Filter", "LossModel", "reference_verdicts", "burst_lengths", "ge_from_loss_burst"]
