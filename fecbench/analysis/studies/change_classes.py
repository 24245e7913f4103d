"""Which pairs a comparison judges besides all of a group's (`fecbench compare --margin`, issue 68): the runs
FEC is for, and the tail; and how such a subset of pairs is summarised. Pure functions of the pairs and of A's
runs, but for ``loss_records`` (a database's losses, through ``traces.losses``).

Loss classes. A pair's class is its A run's: B's run has the same key and loss seed (the dropper decides packet n
by seed, stream and n), so the class says which losses the pair shares, and what B's stack made of them is what
is compared. From the data sender's own accounting where the stack keeps one (the typed metrics ``lost``: packets
the sender declared lost, less those it found spurious where it says, and ``recovered``: source packets FEC
rebuilt), which counts packets that carried data or other ack-eliciting frames (a handshake or probe packet
too), never an ACK-only packet or a repair symbol:

- ``losses declared``: the sender declared a packet lost (and sent its data again);
- ``losses rebuilt``: FEC rebuilt a lost packet and the sender declared none;
- ``no loss``: neither (the link may still have dropped an ACK-only packet or a repair symbol).

A run whose stack keeps neither count is classed by the link's drops in the data's direction (the loss model's,
a schedule's outages, the bottleneck's queue; a download's data flows server to client, an upload's client to
server, any other workload's either way), which count every packet, ACK-only and repair ones too: ``link
drops`` when there is one, else ``no loss``. Losses among a transfer's last packets (``studies.loss_position``,
from verdict logs) are not a class yet. Where twins diverge (as timing moves, the n-th drop hits another packet:
designs/README.md, "Twins"), A's class picks the pairs in which A met the loss: a lossy class then leans towards
"better" and the lossless one towards "worse", and the spread it brings widens their intervals.

The tail: the worst fifth of the pairs (⌊n/5⌋), ranked by the geometric mean √(A·B) of the pair's two values
(their sum for a count; the largest first, the smallest where larger is better). Not by A's value alone: a pair
chosen because A was slow reads faster in B by chance (regression to the mean: a twin that jumped in A would
read "better"); the pair's mean treats both sides alike, so an unchanged build's tail stays centred on 1.

A class or the tail is summarised by the geometric mean of its pairs' ratios B ÷ A (the mean of the differences
B − A for a count), with a Student-t interval of the mean log ratio (difference), as bounds where timeouts censor
a value (the lower end from the pairs' lower bounds, the upper from their upper ones). Not a bootstrap of the
median: with a few pairs it returns their range at any level (3 pairs: [min, max], which holds the median only
75 % of the time), while the t interval widens as the pairs disagree, so a class of 3 pairs decides only when
they agree. It is exact for normal log ratios; a twin that jumps widens it. A class is judged only when it is not
all of its group's pairs (the median judges those); ``pools``: a label's classes and tail over its groups pooled
(ratios carry no unit), where a regression of the few lossy runs of each group adds up; a class only one group has
is left to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fecbench.analysis import ratios, results, stats
from fecbench.analysis.results import DbLike
from fecbench.analysis.studies import change_verdicts as cv
from fecbench.analysis.traces import losses
from fecbench.inputs.directions import DATA_DIRECTION, LINK_DIRECTIONS

DECLARED, REBUILT, DROPPED, NO_LOSS = "losses declared", "losses rebuilt", "link drops", "no loss"
CLASSES = (DECLARED, REBUILT, DROPPED, NO_LOSS)
#: How a class reads in compare's output.
TITLES = {DECLARED: "lossy runs (losses declared)", REBUILT: "lossy runs (losses FEC rebuilt)",
          DROPPED: "lossy runs (link drops)", NO_LOSS: "runs without loss"}
TAIL_PART = 5        # the tail is the worst 1/TAIL_PART of the pairs
TAIL = "tail (worst fifth)"
#: The direction of a workload's data, as link_stats names it (client to server: forward); other workloads: both.
#: The directions whose drops change a transfer's class: its data's (other workloads: both).
DATA_DIRECTIONS = {w: (DATA_DIRECTION[w],) for w in ("download", "upload")}


def loss_records(db: DbLike) -> pd.DataFrame:
    """Per run of a database: ``declared`` (losses the data sender declared, less its spurious ones; NaN where the
    stack does not say) and ``drops`` (the link's drops in the data's direction, every cause; NaN without link
    records), indexed by run key."""
    found = losses.run_losses(db)
    workloads = dict(results.rows(db, "runs", ["key", "workload"]))
    rows = []
    for record in found.to_dict("records"):
        directions = DATA_DIRECTIONS.get(workloads.get(record["run_key"]) or "", LINK_DIRECTIONS)
        counts = [record[f"{cause}_{d}"] for d in directions for cause in ("dropper", "outage", "queue")]
        counts = [c for c in counts if c is not None and not pd.isna(c)]
        declared = record["declared_lost"]
        spurious = record["spurious"]
        spurious = 0.0 if spurious is None or pd.isna(spurious) else float(spurious)
        declared = math.nan if declared is None or pd.isna(declared) else float(declared) - spurious
        rows.append({"key": record["run_key"], "declared": declared,
                     "drops": float(sum(counts)) if counts else math.nan})
    return pd.DataFrame(rows, columns=["key", "declared", "drops"]).set_index("key")


def loss_classes(frame: pd.DataFrame, records: pd.DataFrame | None = None) -> pd.Series:
    """Each run's loss class (see above), indexed by run key; None where nothing says (no count, no link record).
    ``frame``: a ``results.load`` frame; ``records``: ``loss_records`` of its database (spurious losses taken off,
    the link's drops for a stack without counts), or None (the frame's ``lost`` and ``recovered`` only)."""
    def column(name: str, source: pd.DataFrame) -> pd.Series:
        values = source[name] if name in source else pd.Series(math.nan, index=source.index)
        return pd.to_numeric(values, errors="coerce").astype(float)

    runs = frame.set_index("key")
    declared, recovered = column("lost", runs), column("recovered", runs)
    drops = pd.Series(math.nan, index=runs.index)
    if records is not None:
        known = records.reindex(runs.index)
        declared = column("declared", known).where(column("declared", known).notna(), declared)
        drops = column("drops", known)
    counted = declared.notna() | recovered.notna()
    found = pd.Series(None, index=runs.index, dtype=object)
    # The first test that holds names the class: the stack's counts before the link's drops.
    for test, name in ((drops == 0, NO_LOSS), (drops > 0, DROPPED), (counted, NO_LOSS), (recovered > 0, REBUILT),
                       (declared > 0, DECLARED)):
        found[test.to_numpy()] = name
    return found


def tail(a: np.ndarray, b: np.ndarray, kind: str, larger_first: bool = True) -> np.ndarray:
    """The tail's pairs as a mask: the worst ⌊n/5⌋ by √(A·B) (a ratio's) or A + B (a count's), the largest first
    unless ``larger_first`` is False; ``a`` and ``b`` the pairs' values (a censored one at its lower bound)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.log(a) + np.log(b) if kind == "ratio" else a + b
    score = np.nan_to_num(score, nan=-np.inf)
    order = np.argsort(-score if larger_first else score, kind="stable")
    mask = np.zeros(a.size, dtype=bool)
    mask[order[:a.size // TAIL_PART]] = True
    return mask


def mean_interval(low: np.ndarray, high: np.ndarray, kind: str, level: float) -> tuple[stats.Bounds, stats.Bounds]:
    """The summary of a subset of pairs (see above) as bounds, and its Student-t interval at ``level``: the
    geometric mean of the ratios (``kind`` ratio) or the mean of the differences; NaN with fewer than 2 pairs."""
    from scipy.stats import t as student

    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    if low.size < 2:
        return stats.NAN_BOUNDS, stats.NAN_BOUNDS
    log = kind == "ratio"
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = (np.log(low), np.log(high)) if log else (low, high)
    quantile = float(student.ppf(1 - (1 - level) / 2, low.size - 1))

    def end(values: np.ndarray, sign: int) -> tuple[float, float]:
        if not np.all(np.isfinite(values)):     # a censored bound: -inf (ratio 0) or +inf, and so is its end
            infinite = float(values[~np.isfinite(values)][0])
            return infinite, infinite
        centre = float(np.mean(values))
        return centre, centre + sign * quantile * float(np.std(values, ddof=1)) / math.sqrt(values.size)

    (est_low, ci_low), (est_high, ci_high) = end(lo, -1), end(hi, 1)
    back = (lambda x: float(np.exp(x))) if log else float
    return (back(est_low), back(est_high)), (back(ci_low), back(ci_high))


@dataclass
class Pool:
    """A label's paired groups pooled: their classes and tail over all their pairs."""

    label: str
    groups: list[str]
    parts: list[cv.Statistic] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.label} ({len(self.groups)} groups pooled)"

    def as_json(self) -> dict[str, Any]:
        return {"pool": self.name, "label": self.label, "groups": self.groups,
                "moved": [s.name for s in self.parts if s.verdict in cv.MOVED],
                "statistics": [s.as_json() for s in self.parts]}


@dataclass
class Pairs:
    """A set of pairs as the statistics take them: each pair's change as bounds (``low``, ``high``), each side's
    value (a censored one at its lower bound: ``a``, ``b``) and A's run key, the pairs without a change left out."""

    low: np.ndarray
    high: np.ndarray
    a: np.ndarray
    b: np.ndarray
    keys: np.ndarray

    @classmethod
    def of(cls, used: pd.DataFrame, kind: str) -> Pairs:
        a_to = used["outcome"].isin(ratios.BASELINE_TIMED_OUT).to_numpy()
        b_to = used["outcome"].isin(ratios.LABEL_TIMED_OUT).to_numpy()
        a = stats.placements(used["baseline_value"], a_to, used["baseline_limit"])[0]
        b = stats.placements(used["value"], b_to, used["limit"])[0]
        if kind == "ratio":
            low, high = used["ratio_low"].to_numpy(float), used["ratio_high"].to_numpy(float)
        else:
            low = high = (used["value"] - used["baseline_value"]).to_numpy(float)
        keep = ~(np.isnan(low) | np.isnan(high))
        return cls(low[keep], high[keep], a[keep], b[keep], used["baseline_key"].to_numpy(object)[keep])

    @classmethod
    def join(cls, sets: Sequence[Pairs]) -> Pairs:
        return cls(*(np.concatenate([getattr(s, f) for s in sets]) for f in ("low", "high", "a", "b", "keys")))

    def subset(self, mask: np.ndarray) -> Pairs:
        return Pairs(self.low[mask], self.high[mask], self.a[mask], self.b[mask], self.keys[mask])


def part(name: str, pairs: Pairs, kind: str) -> cv.Statistic:
    """A class or the tail of a set of pairs, its interval computed at the family's level."""
    stat = cv.Statistic(name, "geometric-mean ratio" if kind == "ratio" else "mean difference", n=len(pairs.low),
                        reference=float(np.median(pairs.a)) if len(pairs.a) else math.nan)
    stat.change = mean_interval(pairs.low, pairs.high, kind, 0.5)[0]

    def compute(level: float) -> None:
        stat.interval = mean_interval(pairs.low, pairs.high, kind, level)[1]
    stat.compute = compute
    return stat


def parts(pairs: Pairs, loss: pd.Series, kind: str, metric: str, skip: Sequence[str] = ()) -> list[cv.Statistic]:
    """Each loss class of the pairs that is not all of them (nor in ``skip``), and their tail (from ``MIN_PAIRS``
    pairs in it)."""
    of_pair = loss.reindex(pairs.keys).to_numpy(object)
    found = []
    for name in CLASSES:
        mask = of_pair == name
        if 0 < mask.sum() < len(mask) and name not in skip:
            found.append(part(TITLES[name], pairs.subset(mask), kind))
    worst = tail(pairs.a, pairs.b, kind, larger_first=cv.LARGER_IS_WORSE.get(metric) is not False)
    if worst.sum() >= cv.MIN_PAIRS:       # from 15 pairs on: a tail that can be judged
        found.append(part(TAIL, pairs.subset(worst), kind))
    return found


def pools(paired: dict[str, list[tuple[str, Pairs]]], loss: pd.Series, kind: str, metric: str) -> list[Pool]:
    """A label's classes and tail over all its paired groups' pairs, for a label with more than one; a class only
    one of its groups has is left to that group (the same pairs)."""
    found = []
    for label, sets in sorted(paired.items()):
        if len(sets) < 2:
            continue
        held = [set(loss.reindex(p.keys).dropna()) for _, p in sets]
        alone = [name for name in CLASSES if sum(name in mine for mine in held) < 2]
        found.append(Pool(label, [name for name, _ in sets],
                          parts(Pairs.join([p for _, p in sets]), loss, kind, metric, skip=alone)))
    return found
