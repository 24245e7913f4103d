"""A claim statistic: one object that says everything the harness asks about it.

``ClaimStatistic`` is the contract; each statistic is a subclass in the module of its family
(``pairs``, ``points``, ``runs``) and registered in ``statistics.REGISTRY``. What the rest of
``reproduce/`` asks of it, and nothing else:

- what it reads (``reads``): ``PAIRS`` (the claim's sample of ``verdicts.samples``: one row per unit of its
  draws, the label's and the baseline's run at one point, seed and size, their values with bounds),
  ``RUNS`` (each side's runs of the same draws, unpaired: ``Runs``) or ``FLOWS`` (the foreground flow's
  DCT of the runs with each background, as ``Runs``);
- what it needs from the plan: seeds per draw of a point (``seeds_per_point``: ``min_seeds`` for a
  statistic over points, else 1), points per draw (``points_per_observation``: a trend's two), and the draws
  before an interval (``min_for_interval``, ``first_block``); a draw is one observation of its sequence;
- the keys a claim may set for it (``params``: name, type, default, checks) besides the ones every
  claim has (``min_seeds``, ``loss_direction``: ``pack``);
- its estimand, written once (``estimand_text``: a formula over the claim's cells and an unlimited supply
  of seeds) and evaluated by one function (``estimand``): the page's number, the fixed-sample estimate's
  value and the bench's truth all come from it, and its confidence sequence covers it;
- its fixed-sample estimate with a bootstrap interval (``estimate``) and its anytime-valid form
  (``sequence``: a confidence sequence of ``sequential`` for the statistic as named, or None with
  ``no_sequence`` saying why);
- its words: what its estimate and its sequence count (``unit``, ``sequence_unit``), how the page
  describes it (``text``, ``describe``) and the reference line its figure draws (``figure_line``; the
  figure draws the estimate's ``samples``).

Samples carry a ``draw`` column: each row's draw in the claim's own sequence (``verdicts.draws``), planned
before any run, never an outcome; ``ordered`` sorts by it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from fecbench.inputs.specs import Section
from fecbench.verdicts.sequential import Sequence
from fecbench.verdicts.statistics import ties
from fecbench.verdicts.statistics.bootstrap import MIN_PAIRS, N_BOOT

#: What a statistic reads (``ClaimStatistic.reads``).
PAIRS, RUNS, FLOWS = "pairs", "runs", "flows"
#: ``Param.choices``: the names of the design's factors.
FACTORS = "the design's factors"


@dataclass
class Estimate:
    value: float
    low: float
    high: float
    n: int                    # pairs, points or runs used
    unit: str                 # "pairs", "points" or "runs"
    note: str = ""            # what was left out, why no interval
    samples: dict[str, np.ndarray] = field(default_factory=dict)   # what the claim's figure draws

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


@dataclass
class Runs:
    """Each side's values, unpaired, in drawn order: ``label``/``base`` their upper bounds (+inf: a censored
    duration, also the point value), ``label_lo``/``base_lo`` their lower bounds (``samples``)."""
    label: np.ndarray
    base: np.ndarray
    label_lo: np.ndarray | None = None
    base_lo: np.ndarray | None = None

    def lower(self, side: str) -> np.ndarray:
        value = self.label_lo if side == "label" else self.base_lo
        return np.asarray(self.label if side == "label" else self.base, float) if value is None \
            else np.asarray(value, float)


@dataclass(frozen=True)
class Param:
    """A key of a claim that a statistic reads: its type, default (``required``: none) and checks."""
    name: str
    kind: type
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] | str | None = None   # FACTORS: the design's factors
    min: float | None = None
    max: float | None = None

    def read(self, entry: Section, factors: list[str] | None) -> Any:
        """The key's value in a claim (a SpecError naming file and key if it is wrong); ``factors``: the
        design's factors (None: the design file is absent, any name passes)."""
        choices = factors if self.choices == FACTORS else self.choices
        default = {} if self.required else {"default": self.default}
        value = entry.get(self.name, self.kind, **default, choices=choices, min=self.min, max=self.max)
        return float(value) if self.kind is float and value is not None else value


def ordered(sample: pd.DataFrame) -> pd.DataFrame:
    """The sample in drawn order (``draw``; rows in their given order within a draw)."""
    if "draw" not in sample or sample.empty:
        return sample.reset_index(drop=True)
    return sample.sort_values("draw", kind="stable").reset_index(drop=True)


class ClaimStatistic(ABC):
    """One claim statistic (see the module). Subclasses set the class attributes and the two methods."""

    name: ClassVar[str]
    reads: ClassVar[str] = PAIRS
    unit: ClassVar[str] = "pairs"              # what the fixed-sample estimate counts
    sequence_unit: ClassVar[str] = "pairs"     # what its confidence sequence counts
    text: ClassVar[str]                        # the page's words: str.format with t, factor, q, seeds, label, baseline
    estimand_text: ClassVar[str]               # what it estimates, as a formula over the claim's cells and seeds
    params: ClassVar[tuple[Param, ...]] = ()
    needs_points: ClassVar[bool] = False       # over design points: min_seeds seeds of a point before others
    min_for_interval: ClassVar[int] = MIN_PAIRS
    points_per_observation: ClassVar[int] = 1  # points one observation of the sequence takes (a trend: 2)
    no_sequence: ClassVar[str] = ""            # why it has no anytime-valid interval (sequence gives None)
    census: ClassVar[bool] = False             # over every cell's own value (``points``), not random draws
    shares: ClassVar[bool] = False             # a share of hits: its ties have a margin (``ties``)
    means: ClassVar[bool] = False              # a mean (an average a passage states: reproduce/README.md, Averages)
    one_label: ClassVar[bool] = False          # reads the label's runs only (its level): the baseline is the label

    @abstractmethod
    def estimate(self, sample: Any, params: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> Estimate:
        """The statistic on ``sample`` (a frame of pairs, or ``Runs``) with its 95 % bootstrap interval
        (seeded: the same sample and seed give the same interval) and what its figure draws."""

    @abstractmethod
    def estimand(self, sample: Any, params: dict) -> float:
        """The written estimand (``estimand_text``) evaluated on ``sample``: the page's number from a claim's sample,
        the bench's truth from a large one (``validation.worlds``): one function for both."""

    @abstractmethod
    def sequence(self, sample: Any, params: dict, alpha: float) -> Sequence | None:
        """Its confidence sequence at level 1 − ``alpha`` over the observations in the order they came;
        None if it has none (``no_sequence`` says why)."""

    def read_params(self, entry: Section, factors: list[str] | None) -> dict[str, Any]:
        """The statistic's own keys of a claim (``params``), checked."""
        return {p.name: p.read(entry, factors) for p in self.params}

    def seeds_per_point(self, params: dict) -> int:
        """Seeds a point gets before the next point gets any: ``min_seeds`` over points, else 1."""
        return int(params.get("min_seeds", 3)) if self.needs_points else 1

    def first_block(self, params: dict) -> int:
        """Draws (``verdicts.draws``) before it can have an interval: 3 pairs or runs per side; over points, 3
        blocks of ``min_seeds`` seeds (4 pairs of points for a trend). A draw is one observation."""
        return self.min_for_interval

    def fewest_observations(self, params: dict, compare: str, threshold: float, tolerance: float,
                            alpha: float) -> float:
        """The fewest observations of its confidence sequence that could decide a claim (every one agreeing
        with the others: a lower bound); inf when it has no sequence."""
        return math.inf

    def describe(self, params: dict, label: str, baseline: str) -> str:
        """What it is, in the page's words."""
        words = self.text.format(t=params.get("ratio_threshold", 1.0), factor=params.get("factor"),
                                 q=params.get("q", 0.5), seeds=params.get("min_seeds", 3), label=label,
                                 baseline=baseline)
        return words + ties.text(params) if self.shares else words

    def figure_line(self, params: dict) -> float | None:
        """Where the claim's sample figure draws a reference line (None: none)."""
        return None
