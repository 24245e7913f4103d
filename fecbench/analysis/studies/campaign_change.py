"""Two campaigns of one design compared on a metric, group by group, against a margin (`fecbench compare A B
--margin 5%`, issues 60 and 68): did the results move, in all runs, in the runs FEC is for, in the tail?

Groups. Runs are grouped by label, size and the factors the user names (``by``: a factor of the design, or
``point``); a label of B may stand for one of A (``labels``: A's label -> B's). A group only one side has is
said, and counts as a difference.

Paired, by run key. Where the two campaigns share run keys, a run of A and the run of B with the same key and
loss seed are one pair: the same design point, implementation arguments, size and repetition, on the same
seeded losses (common random numbers), so the change is measured run by run. The pairs are those of
``fecbench.analysis.ratios.pairs`` (A the baseline, B the label, each run's condition its key): the report's
own accounting, so a run that failed, was flagged (``fidelity``, endpoints or emulation late), was interrupted
or unsupported is left out with its pair and counted per side, and a timeout of a duration metric is a value
censored at the design's ``timeout_s``. The statistics of a paired group:

- all runs: for a duration or other real-valued metric (``dct_ms``, ``handshake_ms``, ...) the median over pairs
  of the per-pair ratio B ÷ A, as bounds where timeouts censor it (``fecbench.analysis.stats``), with a seeded
  percentile bootstrap interval over pairs (``stats.bootstrap_median`` of the ratios' lower bounds for the
  interval's lower end, of their upper bounds for its upper end); for a count (an integer metric:
  ``repair_sent``, ``recovered``, ``lost``, ...) the median over pairs of the difference B − A (a timeout cannot
  bound a count: left out), its bootstrap interval likewise;
- each loss class of its pairs that is not all of them (a pair's class is its A run's: losses declared, losses
  rebuilt by FEC, no loss; link drops where the stack keeps no loss counts) and its tail (the worst fifth of its
  pairs by √(A·B)): the geometric mean of the class's ratios (the mean of its differences), with a Student-t
  interval (``studies.change_classes`` says why, and how a class is told).

A label with several paired groups (sizes, ``by`` values) also has its classes and tail over all its pairs
pooled (ratios carry no unit): a regression confined to the few lossy runs of each group shows there.

Unpaired. A group whose runs share no key (another label, other implementation arguments) compares each
side's runs on the conditions both ran (``results.load``'s ``network``: the point, links, loss and
workload): the ratio (or difference) of the two medians, censored as above, each side's bootstrap interval of
its median at half the error level and the two combined (lower end over upper end), which holds the ratio at
least at the stated level; no classes (a class is a pair's). A group with neither a key nor a condition in
common is not the same design (a UserError: exit 2).

Verdicts (``studies.change_verdicts``: the band, each metric's direction, a shift inside the margin, a change at
the margin). Every statistic of one comparison with an interval shares one error level, Bonferroni: each
interval at 1 − (1 − level)/m. A group is **worse** (better; larger or smaller without a direction) when any of
its statistics is, and names which; otherwise its verdict is its median's: **same within margin** (with its
shift where the interval excludes 1), **at the margin**, or **not enough data** with how many more pairs (or
runs per side) would decide it if the spread stayed as it is (an interval's width shrinks as one over the square
root of the sample). A class or tail whose interval leaves out no change without deciding against the margin
**moved, size undecided**: its group, "same within margin" by its median, is undecided (exit 3) and the output
names the class (a 10 % slower recovery read "equivalent" before: ci-recipes/README.md); a class or tail left
undecided with no change inside its interval leaves the group's verdict to its median: at lossy points twins jump
(designs/README.md, "Twins"), so a few lossy pairs rarely bound a change within the margin, though they show one
beyond it. A pooled statistic that moved makes the comparison differ too (undecided, by an unsized move).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fecbench.analysis import ratios, results, stats
from fecbench.analysis.studies import change_classes as classes
from fecbench.analysis.studies import change_verdicts as cv
from fecbench.inputs.errors import UserError, did_you_mean

# The verdicts' names and helpers, as compare's callers know them (studies.change_verdicts).
METRICS, LARGER_IS_WORSE, MIN_PAIRS = cv.METRICS, cv.LARGER_IS_WORSE, cv.MIN_PAIRS
Margin, Statistic, kind_of, band, verdict, more_needed = cv.Margin, cv.Statistic, cv.kind_of, cv.band, cv.verdict, \
    cv.more_needed
SAME, NOT_ENOUGH, AT_MARGIN, TOO_FEW, MOVED_UNSIZED = cv.SAME, cv.NOT_ENOUGH, cv.AT_MARGIN, cv.TOO_FEW, cv.MOVED_UNSIZED
#: Exit statuses of `fecbench compare` (2 is every UserError's: bad input).
EQUIVALENT, DIFFERS, BAD_INPUT, UNDECIDED = 0, 1, 2, 3
ONLY_A, ONLY_B = "only in A", "only in B"
DIFFERENT = (*cv.MOVED, ONLY_A, ONLY_B)
UNDECIDED_VERDICTS = (NOT_ENOUGH, AT_MARGIN, MOVED_UNSIZED)
GROUP_FACTORS = ("point",)    # besides the design's factors, what `by` may name


@dataclass
class Group:
    """One group's comparison: its median (``median``: all its pairs) and its classes and tail (``parts``)."""

    label: str
    label_b: str
    size: int | None
    by: dict[str, Any]
    mode: str = "paired"                   # paired | unpaired | only in A | only in B
    median: Statistic = field(default_factory=lambda: Statistic(cv.ALL, ""))
    parts: list[Statistic] = field(default_factory=list)
    a_median: stats.Bounds = stats.NAN_BOUNDS
    b_median: stats.Bounds = stats.NAN_BOUNDS
    verdict: str = NOT_ENOUGH              # worse/better/... when any statistic moved, else the median's
    needs: str = ""
    left_out: dict[str, dict[str, int]] = field(default_factory=lambda: {"a": {}, "b": {}})
    exclusions_p: float | None = None      # Fisher's p when the sides lost runs at different rates

    # The median's numbers under the names compare has always given them.
    n = property(lambda self: self.median.n)
    change = property(lambda self: self.median.change)
    interval = property(lambda self: self.median.interval)
    band = property(lambda self: self.median.band)

    @property
    def moved(self) -> list[Statistic]:
        return [s for s in (self.median, *self.parts) if s.verdict in cv.MOVED]

    @property
    def name(self) -> str:
        parts = [self.label if self.label == self.label_b else f"{self.label} (B: {self.label_b})"]
        if self.size is not None:
            parts.append(_size_text(self.size))
        parts += [f"{k}={_value_text(v)}" for k, v in self.by.items()]
        return " ".join(parts)

    def as_json(self) -> dict[str, Any]:
        def bounds(values: tuple[float, float]) -> list[float | str | None]:
            return [cv.number(x) for x in values]

        return {"group": self.name, "label": self.label, "label_b": self.label_b, "size": self.size,
                "by": {k: _value_text(v) for k, v in self.by.items()}, "mode": self.mode, "n": self.n,
                "a_median": bounds(self.a_median), "b_median": bounds(self.b_median), "change": bounds(self.change),
                "interval": bounds(self.interval), "band": bounds(self.band), "verdict": self.verdict,
                "median_verdict": self.median.verdict,
                "shift": self.median.shift or None, "moved": [s.name for s in self.moved], "needs": self.needs,
                "statistics": [s.as_json() for s in (self.median, *self.parts)],
                "left_out": self.left_out, "exclusions_differ_p": self.exclusions_p}


def _size_text(size: int) -> str:
    for unit, scale in (("MB", 1_000_000), ("kB", 1000)):
        if size >= scale and size % (scale // 10 or 1) == 0:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _value_text(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@dataclass
class ChangeComparison:
    """Every group's comparison (and every label's pooled classes), and what they rest on."""

    metric: str
    kind: str
    margin: Margin
    level: float
    groups: list[Group]
    pools: list[classes.Pool] = field(default_factory=list)
    judged: int = 0                        # the statistics sharing the error level

    @property
    def each_level(self) -> float:
        return cv.family_level(self.level, self.judged)

    @property
    def moved(self) -> list[tuple[str, Statistic]]:
        """(group or pool, statistic) of every statistic that moved."""
        return [(g.name, s) for g in self.groups for s in g.moved] + \
            [(p.name, s) for p in self.pools for s in p.parts if s.verdict in cv.MOVED]

    @property
    def exit_code(self) -> int:
        verdicts = {g.verdict for g in self.groups}
        if verdicts & set(DIFFERENT) or self.moved:
            return DIFFERS
        unsized = any(s.verdict == MOVED_UNSIZED for p in self.pools for s in p.parts)
        return UNDECIDED if verdicts & set(UNDECIDED_VERDICTS) or unsized else EQUIVALENT

    @property
    def outcome(self) -> str:
        return {EQUIVALENT: "equivalent", DIFFERS: "differs", UNDECIDED: "undecided"}[self.exit_code]

    @property
    def direction(self) -> str:
        return cv.direction(self.metric)

    @property
    def statistic(self) -> str:
        if self.kind == "ratio":
            return "median of the paired ratios B ÷ A (unpaired: ratio of medians)"
        return "median of the paired differences B − A (unpaired: difference of medians)"

    @property
    def parts_statistic(self) -> str:
        mean = "geometric mean of the ratios" if self.kind == "ratio" else "mean of the differences"
        return (f"loss classes (a pair's is its A run's) and the tail (the worst fifth of the pairs by "
                f"{'√(A·B)' if self.kind == 'ratio' else 'A + B'}): the {mean}, Student-t interval")

    @property
    def error_rule(self) -> str:
        return (f"{(1 - self.level) * 100:g} % family-wise over the {self.judged} statistics judged (Bonferroni: "
                f"each interval at {self.each_level * 100:.4g} %)")

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "statistic": self.statistic, "classes_and_tail": self.parts_statistic,
                "margin": str(self.margin), "level": self.level,
                "family": {"rule": "Bonferroni", "error": round(1 - self.level, 12), "judged": self.judged,
                           "each_level": self.each_level, "text": self.error_rule},
                "direction": self.direction, "outcome": self.outcome, "exit_code": self.exit_code,
                "moved": [f"{where}, {s.text()}" for where, s in self.moved],
                "groups": [g.as_json() for g in self.groups], "pools": [p.as_json() for p in self.pools]}


def _needs(group: Group, kind: str, unit: str) -> str:
    if group.median.verdict == AT_MARGIN:
        return f"more {unit} would narrow its interval around the margin's edge, not off it"
    if group.median.verdict != NOT_ENOUGH:
        return ""
    if group.n < MIN_PAIRS:
        return f"at least {MIN_PAIRS - group.n} more {unit}: an interval needs {MIN_PAIRS}"
    if any(math.isnan(x) for x in group.interval):
        return "runs that end: too many timed out on both sides for an interval"
    more = more_needed(group.n, group.change, group.interval, group.band, log=kind == "ratio")
    if more is None:
        return "more runs that end (timeouts leave the interval open)" if math.isinf(group.interval[1]) \
            else f"many more {unit}: the change sits at the margin's edge"
    return f"about {more} more {unit}"


# --- the data ----------------------------------------------------------------------------------------------------

#: The columns ``_usable`` adds (``ratios.pairs`` makes its own of some of these names).
USABLE_COLUMNS = ("finished", "censored", "usable", "why", "limit", "value")


def _usable(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Each run's value and its censoring, as ``ratios.pairs`` takes a run: ok with the metric, or a timeout of a
    duration metric (censored at timeout_s); ``why`` names the rest (its status)."""
    scale = ratios.CENSORED_METRICS.get(metric)
    finished = (frame["status"] == "ok") & frame[metric].notna()
    censored = (frame["status"] == "timeout") & bool(scale)
    why = frame["status"].astype(object).fillna("no status").where(frame["status"] != "ok", f"ok without {metric}")
    limit = frame["timeout_s"].astype(float) * scale if scale and "timeout_s" in frame else math.nan
    return frame.assign(finished=finished, censored=censored, usable=finished | censored,
                        why=why.where(~(finished | censored), ""), limit=limit,
                        value=frame[metric].where(finished).astype(float))


def prepare(frame_a: pd.DataFrame, frame_b: pd.DataFrame, metric: str, by: Sequence[str],
            labels: dict[str, str]) -> tuple[pd.DataFrame, list[str]]:
    """Both sides' runs in one frame: ``side`` A or B, ``group_label`` (B's label mapped to A's), ``condition``
    (results' network), the group columns; a UserError for an unknown factor or label."""
    factors = list(dict.fromkeys([*frame_a.attrs.get("factors", []), *frame_b.attrs.get("factors", [])]))
    allowed = [*GROUP_FACTORS, *factors]
    columns = []
    for name in by:
        column = name if name in frame_a.columns and name in allowed else f"factor_{name}"
        if name not in allowed and column not in factors:
            raise UserError(f"--by {name!r}: not a factor of the design{did_you_mean(name, allowed)} "
                            f"(allowed: {', '.join(allowed)})")
        if column not in frame_a.columns or column not in frame_b.columns:
            raise UserError(f"--by {name!r}: a factor of one campaign only: not the same design")
        columns.append(column)
    for a_label, b_label in labels.items():
        if a_label not in set(frame_a["label"]) or b_label not in set(frame_b["label"]):
            raise UserError(f"--label {a_label}={b_label}: A has labels {', '.join(sorted(set(frame_a['label'])))}"
                            f"; B has {', '.join(sorted(set(frame_b['label'])))}")
    back = {b: a for a, b in labels.items()}
    sides = [frame_a.assign(side="A", group_label=frame_a["label"]),
             frame_b.assign(side="B", group_label=frame_b["label"].map(lambda x: back.get(x, x)))]
    both = pd.concat(sides, ignore_index=True)
    both = _usable(both.assign(condition=both["network"]), metric)
    both.attrs["factors"] = factors
    return both, columns


def _paired_rows(both: pd.DataFrame, metric: str, columns: list[str]) -> pd.DataFrame:
    """``ratios.pairs`` of B against A where each run's condition is its key (so runs pair by key and loss seed)."""
    frame = both.drop(columns=list(USABLE_COLUMNS)).assign(network=both["key"], label=both["side"])
    frame.attrs["factors"] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", results.UnpairedWarning)
        return ratios.pairs(frame, baseline="A", by=["group_label", *columns], metric=metric, labels=["B"])


def key_pairs(frame_a: pd.DataFrame, frame_b: pd.DataFrame, metric: str = "dct_ms") -> pd.DataFrame:
    """The runs of B paired with A's by run key, as ``ratios.pairs`` of B against A: the pairs ``compare`` takes
    its paired change from (``group_label`` each run's label, ``size``), for ``fecbench report --against``."""
    both, columns = prepare(frame_a, frame_b, metric, [], {})
    return _paired_rows(both, metric, columns)


def _counts(runs: pd.DataFrame) -> dict[str, int]:
    return {str(k): int(v) for k, v in runs.loc[~runs["usable"], "why"].value_counts().sort_index().items()}


def _boot(values: np.ndarray, seed: int, n_boot: int, level: float) -> stats.Bounds:
    return stats.bootstrap_median(values, n_boot=n_boot, level=level, seed=seed, min_values=MIN_PAIRS)


def _paired(group: Group, pairs: pd.DataFrame, kind: str, seed: int, n_boot: int) -> classes.Pairs:
    """The group's median (its interval computed at the family's level) from its pairs; the pairs for its parts."""
    used = pairs[pairs["outcome"] != "excluded"]
    a_to = used["outcome"].isin(ratios.BASELINE_TIMED_OUT).to_numpy()
    b_to = used["outcome"].isin(ratios.LABEL_TIMED_OUT).to_numpy()
    group.a_median = stats.median_bounds(used["baseline_value"], a_to, used["baseline_limit"])
    group.b_median = stats.median_bounds(used["value"], b_to, used["limit"])
    mine = classes.Pairs.of(used, kind)
    median = group.median
    median.estimand = "median ratio" if kind == "ratio" else "median difference"
    median.n = len(mine.low)
    if median.n:
        median.change = (float(np.median(mine.low)), float(np.median(mine.high)))

        def compute(level: float) -> None:
            median.interval = (_boot(mine.low, seed, n_boot, level)[0], _boot(mine.high, seed, n_boot, level)[1])
        median.compute = compute
    return mine


def _unpaired(group: Group, a: pd.DataFrame, b: pd.DataFrame, kind: str, seed: int, n_boot: int) -> None:
    a, b = a[a["usable"]], b[b["usable"]]
    median = group.median
    median.estimand = "ratio of medians" if kind == "ratio" else "difference of medians"
    median.n = min(len(a), len(b))
    group.a_median, group.b_median = (stats.median_bounds(r["value"], r["censored"], r["limit"]) for r in (a, b))
    a_med, b_med = group.a_median, group.b_median
    median.change = stats.ratio_bounds(b_med, a_med) if kind == "ratio" else (b_med[0] - a_med[1], b_med[1] - a_med[0])

    def compute(level: float) -> None:
        side_level = 1 - (1 - level) / 2
        a_ci, b_ci = ((_boot(low, seed, n_boot, side_level)[0], _boot(high, seed, n_boot, side_level)[1])
                      for low, high in (stats.placements(r["value"], r["censored"], r["limit"]) for r in (a, b)))
        if kind == "ratio":
            median.interval = (stats.divide(b_ci[0], a_ci[1]), stats.divide(b_ci[1], a_ci[0]))
        else:
            median.interval = (b_ci[0] - a_ci[1], b_ci[1] - a_ci[0])
    if median.n >= MIN_PAIRS:
        median.compute = compute


def judge(comparison: ChangeComparison) -> None:
    """Every statistic at the family's level (Bonferroni over those with an interval), then each group's verdict."""
    every = [s for g in comparison.groups if g.mode not in (ONLY_A, ONLY_B) for s in (g.median, *g.parts)]
    every += [s for p in comparison.pools for s in p.parts]
    judged = [s for s in every if s.judged]
    comparison.judged = len(judged)
    for stat in judged:
        stat.compute(comparison.each_level)
    margin, kind, metric = comparison.margin, comparison.kind, comparison.metric
    for stat in every:
        stat.judge(kind, margin, metric)
    for group in comparison.groups:
        if group.mode in (ONLY_A, ONLY_B):
            continue
        ways = [s.verdict for s in group.moved]
        unsized = group.median.verdict == SAME and any(s.verdict == MOVED_UNSIZED for s in group.parts)
        group.verdict = next((w for w in cv.MOVED if w in ways), MOVED_UNSIZED if unsized else group.median.verdict)
        group.needs = _needs(group, kind, "pairs" if group.mode == "paired" else "runs per side")


def _one_group(group: Group, a: pd.DataFrame, b: pd.DataFrame, mine: pd.DataFrame | None, kind: str, seed: int,
               n_boot: int) -> classes.Pairs | None:
    """A group's statistics (their intervals left to ``judge``) and what it leaves out; its pairs when paired."""
    shared = set(a["key"]) & set(b["key"])
    group.left_out = {"a": _counts(a), "b": _counts(b)}
    found = None
    if shared and mine is not None:
        alone = {"a": int((a["usable"] & ~a["key"].isin(shared)).sum()),
                 "b": int((b["usable"] & ~b["key"].isin(shared)).sum())}
        for side, count in alone.items():
            if count:
                group.left_out[side]["without a twin in the other"] = count
        found = _paired(group, mine, kind, seed=seed, n_boot=n_boot)
    else:
        conditions = set(a["condition"]) & set(b["condition"])
        if not conditions:
            raise UserError(f"not the same design: group {group.name} has no run key and no condition (design "
                            "point, links, loss, workload) in common between A and B")
        for side, runs_side in (("a", a), ("b", b)):
            other = (~runs_side["condition"].isin(conditions)).sum()
            if other:
                group.left_out[side]["on conditions the other did not run"] = int(other)
        group.mode = "unpaired"
        _unpaired(group, a[a["condition"].isin(conditions)], b[b["condition"].isin(conditions)], kind, seed=seed,
                  n_boot=n_boot)
    group.median.reference = group.a_median[0] if group.a_median[0] == group.a_median[1] else math.nan
    lost_a, lost_b = sum(group.left_out["a"].values()), sum(group.left_out["b"].values())
    group.exclusions_p = stats.exclusions_differ(lost_b, len(b), lost_a, len(a))
    return found


def compare(frame_a: pd.DataFrame, frame_b: pd.DataFrame, *, metric: str = "dct_ms", margin: Margin,
            by: Sequence[str] = (), labels: dict[str, str] | None = None, seed: int = 0, n_boot: int = 2000,
            level: float = 0.95, losses: pd.DataFrame | None = None) -> ChangeComparison:
    """Every group of A and B (two ``results.load`` frames) compared on ``metric`` against ``margin``, every
    statistic at one family-wise ``level``. ``losses``: ``change_classes.loss_records`` of A's database (spurious
    losses, the link's drops); without it, A's runs are classed by their ``lost`` and ``recovered`` alone."""
    kind = kind_of(metric)
    band(kind, margin)   # a ratio's margin must be a share: said before any work
    for name, frame in (("A", frame_a), ("B", frame_b)):
        if frame.empty:
            raise UserError(f"{name}: the database holds no runs")
    both, columns = prepare(frame_a, frame_b, metric, by, labels or {})
    keys = ["group_label", "size", *columns]
    pairs = _paired_rows(both, metric, columns) if set(frame_a["key"]) & set(frame_b["key"]) else None
    loss = classes.loss_classes(frame_a, losses)
    groups, paired = [], {}
    for key, runs in both.groupby(keys, dropna=False, sort=True):
        values = dict(zip(keys, key, strict=True))
        size, label = values.pop("size"), values.pop("group_label")
        a, b = runs[runs["side"] == "A"], runs[runs["side"] == "B"]
        group = Group(label=label, label_b=str(b["label"].iloc[0]) if len(b) else label,
                      size=None if pd.isna(size) else int(size),
                      by={k.removeprefix("factor_"): v for k, v in values.items()})
        groups.append(group)
        if not len(a) or not len(b):
            group.mode = group.verdict = ONLY_B if not len(a) else ONLY_A
            continue
        mine = pairs
        if pairs is not None:
            for column, value in zip(keys, key, strict=True):
                mine = mine[mine[column].isna()] if pd.isna(value) else mine[mine[column] == value]
            mine = mine[mine["status"].notna()]   # A's runs whose key B ran too
        found = _one_group(group, a, b, mine, kind, stats.group_seed(seed, [str(k) for k in key]), n_boot)
        if found is not None:
            group.parts = classes.parts(found, loss, kind, metric)
            paired.setdefault(label, []).append((group.name, found))
    if all(g.mode in (ONLY_A, ONLY_B) for g in groups):
        raise UserError("not the same design: A and B have no group (label, size) in common (A: "
                        f"{', '.join(sorted(set(frame_a['label'])))}; B: {', '.join(sorted(set(frame_b['label'])))})")
    comparison = ChangeComparison(metric=metric, kind=kind, margin=margin, level=level, groups=groups,
                            pools=classes.pools(paired, loss, kind, metric))
    judge(comparison)
    return comparison
