"""The claim statistics: each one object (``base.ClaimStatistic``: what it reads and needs from the plan, its
keys, its estimate with a bootstrap interval, its anytime-valid form, its words), in the module of its
family, registered here, once. Nothing else in ``reproduce/`` tests a statistic's name: it asks the
object (``get(claim.statistic)``, or ``Claim.stat``).

- ``base``: the contract, the samples (``Estimate``, ``Runs``, ``ordered``), a claim key (``Param``);
- ``bootstrap``: what the fixed-sample estimates share (percentile interval, Wilson floor, the
  verdict rule of a fixed-sample interval);
- ``pairs``: over pairs of runs (shares, median ratio, ratio and difference of medians, the paired sign);
- ``points``: over design points' own values, a census of the claim's cells (median, mean, share, spread, one
  label's level);
- ``blocks``: over blocks of ``min_seeds`` seeds at random cells (median, mean, restricted mean, share, trend);
- ``runs``: over each side's runs, unpaired (quantile ratio; competing flows' medians);
- ``exchangeability``: whether a claim's draws stayed alike over time (the verdicts' audit).

Adding a statistic: a class in its family's module (or a module of its own beside them) and its line
in ``REGISTRY``; a claim names it by ``name`` (``pack.STATISTICS`` are these names).
"""

from __future__ import annotations

from fecbench.inputs.errors import UserError
from fecbench.verdicts.statistics import blocks, exchangeability, pairs, points, runs
from fecbench.verdicts.statistics.base import FLOWS, PAIRS, RUNS, ClaimStatistic, Estimate, Param, Runs
from fecbench.verdicts.statistics.bootstrap import N_BOOT, verdict

#: Every claim statistic by name, in the order the pack format lists them.
REGISTRY: dict[str, ClaimStatistic] = {s.name: s for s in (
    pairs.SharePairsBelow(),
    pairs.SharePairsAbove(),
    pairs.MedianPairRatio(),
    pairs.RatioOfMedians(),
    pairs.DifferenceOfMedians(),
    pairs.SharePairsLess(),
    points.MedianPointRatio(),
    points.MeanPointRatio(),
    points.SharePointsBelow(),
    points.MedianPointSpreadRatio(),
    points.MedianPointLevel(),
    points.LowestPointLevel(),
    blocks.MedianBlockRatio(),
    blocks.MeanBlockRatio(),
    blocks.RestrictedMeanBlockRatio(),
    blocks.ShareBlocksBelow(),
    blocks.Trend(),
    runs.QuantileRatio(),
    runs.FlowRatioOfMedians(),
)}
NAMES = tuple(REGISTRY)


def get(name: str) -> ClaimStatistic:
    """The statistic a claim names (pack loading has checked the name)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(f"unknown claim statistic {name!r} (allowed: {', '.join(NAMES)})") from None


__all__ = ["FLOWS", "NAMES", "N_BOOT", "PAIRS", "REGISTRY", "RUNS", "ClaimStatistic", "Estimate", "Param", "Runs",
           "exchangeability", "get", "verdict"]
