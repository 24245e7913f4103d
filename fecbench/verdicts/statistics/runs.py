"""Statistics over each side's runs, unpaired (``Runs``: the label's and the baseline's values, +inf where a
run timed out, in the order the runs started).

- ``quantile_ratio``: the ``q`` quantile of the label's runs ÷ the baseline's;
- ``flow_ratio_of_medians``: the median foreground flow's DCT of runs whose background flows are the
  label ÷ that with the baseline's (issue #26's per-flow table: ``evaluate`` reads the flows of
  ``role``; every label of the design is run).

Interval: each side's runs resampled on their own. Anytime-valid: the q quantile of each side's runs,
at α/2 each, combined by interval arithmetic (``sequential.two_quantiles_censored``: a censored run's value
lies between its time limit and +∞).
"""

from __future__ import annotations

import math

import numpy as np

from fecbench.verdicts import sequential as sq
from fecbench.verdicts.statistics.base import FLOWS, RUNS, ClaimStatistic, Estimate, Param, Runs
from fecbench.verdicts.statistics.bootstrap import MIN_PAIRS, N_BOOT, divide, interval, quantile


def two_quantiles(runs: Runs, q: float, alpha: float) -> sq.Sequence:
    """q quantile of the label's runs ÷ the baseline's (each in drawn order, with their bounds)."""
    return sq.two_quantiles_censored((runs.lower("label"), np.asarray(runs.label, float)),
                                     (runs.lower("base"), np.asarray(runs.base, float)), q, alpha, "ratio")


class QuantileRatio(ClaimStatistic):
    name = "quantile_ratio"
    reads = RUNS
    unit = "runs"
    sequence_unit = "runs"
    text = "quantile {q:g} of the label ÷ that of the baseline (unpaired)"
    estimand_text = "Q_q(X) ÷ Q_q(Y): each side's q quantile over the claim's population (a uniform cell, one seed)"
    params = (Param("q", float, required=True, min=0.0, max=1.0),)

    def q(self, params: dict) -> float:
        return float(params["q"])

    def estimand(self, sample: Runs, params: dict) -> float:
        if min(len(sample.label), len(sample.base)) == 0:
            return math.nan
        q = self.q(params)
        return float(divide(quantile(np.asarray(sample.label, float), q), quantile(np.asarray(sample.base, float), q)))

    def estimate(self, sample: Runs, params: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> Estimate:
        q = self.q(params)
        label, base = sample.label, sample.base
        samples = {"label": label, "baseline": base}
        n = min(len(label), len(base))
        if n == 0:
            return Estimate(math.nan, math.nan, math.nan, 0, self.unit, "no runs on one side", samples)
        value = self.estimand(sample, params)
        if n < MIN_PAIRS:
            return Estimate(value, math.nan, math.nan, n, self.unit, f"{n} runs on a side: too few for an interval",
                            samples)
        rng = np.random.default_rng(seed)
        top = quantile(label[rng.integers(0, len(label), (n_boot, len(label)))], q)
        bottom = quantile(base[rng.integers(0, len(base), (n_boot, len(base)))], q)
        low, high = interval(divide(top, bottom))
        return Estimate(value, low, high, n, self.unit, "", samples)

    def sequence(self, sample: Runs, params: dict, alpha: float) -> sq.Sequence:
        return two_quantiles(sample, self.q(params), alpha)

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        # a bound on a ratio needs one side's quantile bounded above and the other's below, each side at α/2
        return sq.fewest_for_quantile(self.q(params), alpha / 2, both_sides=True)


class FlowRatioOfMedians(QuantileRatio):
    name = "flow_ratio_of_medians"
    reads = FLOWS
    text = "median foreground DCT with background {label} ÷ with background {baseline}"
    estimand_text = ("median(F_label) ÷ median(F_baseline): the foreground flow's DCT with each background, over the "
                     "claim's population")
    params = (Param("role", str, "foreground"),)

    def q(self, params: dict) -> float:
        return 0.5
