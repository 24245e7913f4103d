"""Two campaigns of one design compared on a metric, group by group, against a margin (`fecbench compare A B
--margin 5%`, issue 60): did the results move?

Groups. Runs are grouped by label, size and the factors the user names (``by``: a factor of the design, or
``point``); a label of B may stand for one of A (``labels``: A's label -> B's). A group only one side has is
said, and counts as a difference.

Paired, by run key. Where the two campaigns share run keys, a run of A and the run of B with the same key and
loss seed are one pair: the same design point, implementation arguments, size and repetition, on the same
seeded losses (common random numbers), so the change is measured run by run. The pairs are those of
``fecbench.analysis.ratios.pairs`` (A the baseline, B the label, each run's condition its key): the report's
own accounting, so a run that failed, was flagged (``fidelity``, endpoints or emulation late), was interrupted
or unsupported is left out with its pair and counted per side, and a timeout of a duration metric is a value
censored at the design's ``timeout_s``. The statistic:

- a duration or other real-valued metric (``dct_ms``, ``handshake_ms``, ...): the median over pairs of the
  per-pair ratio B ÷ A, as bounds where timeouts censor it (``fecbench.analysis.stats``), with a seeded
  percentile bootstrap interval over pairs (``stats.bootstrap_median`` of the ratios' lower bounds for the
  interval's lower end, of their upper bounds for its upper end);
- a count (an integer metric: ``repair_sent``, ``recovered``, ``lost``, ...): the median over pairs of the
  per-pair difference B − A (a timeout cannot bound a count: left out), its bootstrap interval likewise.

Unpaired. A group whose runs share no key (another label, other implementation arguments) compares each
side's runs on the conditions both ran (``results.load``'s ``network``: the point, links, loss and
workload): the ratio (or difference) of the two medians, censored as above, each side's bootstrap interval of
its median at half the error level and the two combined (lower end over upper end), which holds the ratio at
least at the stated level. A group with neither a key nor a condition in common is not the same design (a
UserError: exit 2).

Verdict against the margin. The band is 1 ± margin for a ratio; for a difference ± margin × the median of A's
values (a relative margin) or ± the margin itself (an absolute one, in the metric's unit). The interval inside
the band (edges included): **same within margin**; wholly above or below it: **worse** or **better** by the
metric's direction (a larger DCT is worse, more recovered packets better; a metric with no direction says
**larger** or **smaller**); otherwise, or with fewer than ``MIN_PAIRS`` pairs: **not enough data**, with how
many more pairs (or runs per side) would decide it if the spread stayed as it is (an interval's width shrinks
as one over the square root of the sample).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fecbench.analysis import ratios, results, stats
from fecbench.inputs.errors import UserError, did_you_mean
from fecbench.records import db as dbmod

#: The metrics a comparison may use: the typed metric columns; INTEGER ones are counts (a difference).
METRICS = dict(dbmod.METRIC_COLUMNS)
#: Which way is worse: True, a larger value is worse; False, a larger value is better; absent: no direction.
LARGER_IS_WORSE = {"dct_ms": True, "handshake_ms": True, "client_wall_ms": True, "rtt_ms": True,
                   "rebuffering_ms": True, "lost": True, "retransmitted_bytes": True, "congestion_events": True,
                   "messages_late": True, "messages_corrupt": True, "packets_sent": True, "bytes_sent": True,
                   "repair_sent": True, "recovered": False, "bytes_app": False}
#: Fewer pairs (or runs per side) than this give no interval.
MIN_PAIRS = 3
#: Exit statuses of `fecbench compare` (2 is every UserError's: bad input).
EQUIVALENT, DIFFERS, BAD_INPUT, UNDECIDED = 0, 1, 2, 3
SAME, NOT_ENOUGH = "same within margin", "not enough data"
ONLY_A, ONLY_B = "only in A", "only in B"
DIFFERENT = ("worse", "better", "larger", "smaller", ONLY_A, ONLY_B)
GROUP_FACTORS = ("point",)    # besides the design's factors, what `by` may name


@dataclass(frozen=True)
class Margin:
    """The margin a change must stay within: relative (``5%``) or absolute (``3``: counts only)."""

    value: float
    relative: bool

    @classmethod
    def parse(cls, text: str) -> Margin:
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(%?)\s*", text or "")
        if not match:
            raise UserError(f"--margin {text!r}: a share such as 5% (or, for a count metric, a number such as 3)")
        value, relative = float(match.group(1)), bool(match.group(2))
        if relative and not 0 < value < 100:
            raise UserError(f"--margin {text!r}: a share between 0 and 100 %")
        return cls(value / 100 if relative else value, relative)

    def __str__(self) -> str:
        return f"{self.value * 100:g} %" if self.relative else f"{self.value:g}"


def kind_of(metric: str) -> str:
    """``ratio`` for a real-valued metric, ``difference`` for a count; a UserError for an unknown metric."""
    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r}{did_you_mean(metric, list(METRICS))} "
                        f"(allowed: {', '.join(METRICS)})")
    return "difference" if METRICS[metric] == "INTEGER" else "ratio"


@dataclass
class Group:
    """One group's comparison."""

    label: str
    label_b: str
    size: int | None
    by: dict[str, Any]
    mode: str = "paired"                   # paired | unpaired | only in A | only in B
    n: int = 0                             # pairs used (paired) or the smaller side's runs (unpaired)
    a_median: stats.Bounds = stats.NAN_BOUNDS
    b_median: stats.Bounds = stats.NAN_BOUNDS
    change: stats.Bounds = stats.NAN_BOUNDS   # B ÷ A or B − A, as bounds
    interval: stats.Bounds = stats.NAN_BOUNDS
    band: tuple[float, float] = (math.nan, math.nan)
    verdict: str = NOT_ENOUGH
    needs: str = ""
    left_out: dict[str, dict[str, int]] = field(default_factory=lambda: {"a": {}, "b": {}})
    exclusions_p: float | None = None      # Fisher's p when the sides lost runs at different rates

    @property
    def name(self) -> str:
        parts = [self.label if self.label == self.label_b else f"{self.label} (B: {self.label_b})"]
        if self.size is not None:
            parts.append(_size_text(self.size))
        parts += [f"{k}={_value_text(v)}" for k, v in self.by.items()]
        return " ".join(parts)

    def as_json(self) -> dict[str, Any]:
        def num(x: float) -> float | str | None:
            return None if math.isnan(x) else ("inf" if math.isinf(x) else float(x))

        return {"group": self.name, "label": self.label, "label_b": self.label_b, "size": self.size,
                "by": {k: _value_text(v) for k, v in self.by.items()}, "mode": self.mode, "n": self.n,
                "a_median": [num(x) for x in self.a_median], "b_median": [num(x) for x in self.b_median],
                "change": [num(x) for x in self.change], "interval": [num(x) for x in self.interval],
                "band": [num(x) for x in self.band], "verdict": self.verdict, "needs": self.needs,
                "left_out": self.left_out, "exclusions_differ_p": self.exclusions_p}


def _size_text(size: int) -> str:
    for unit, scale in (("MB", 1_000_000), ("kB", 1000)):
        if size >= scale and size % (scale // 10 or 1) == 0:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _value_text(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@dataclass
class Comparison:
    """Every group's comparison, and what they rest on."""

    metric: str
    kind: str
    margin: Margin
    level: float
    groups: list[Group]

    @property
    def exit_code(self) -> int:
        verdicts = {g.verdict for g in self.groups}
        if verdicts & set(DIFFERENT):
            return DIFFERS
        return UNDECIDED if NOT_ENOUGH in verdicts else EQUIVALENT

    @property
    def outcome(self) -> str:
        return {EQUIVALENT: "equivalent", DIFFERS: "differs", UNDECIDED: "undecided"}[self.exit_code]

    @property
    def direction(self) -> str:
        worse = LARGER_IS_WORSE.get(self.metric)
        return ("larger is worse" if worse else "larger is better") if worse is not None else "no direction"

    @property
    def statistic(self) -> str:
        if self.kind == "ratio":
            return "median of the paired ratios B ÷ A (unpaired: ratio of medians)"
        return "median of the paired differences B − A (unpaired: difference of medians)"

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "statistic": self.statistic, "margin": str(self.margin),
                "level": self.level, "direction": self.direction, "outcome": self.outcome,
                "exit_code": self.exit_code, "groups": [g.as_json() for g in self.groups]}


def band(kind: str, margin: Margin, reference: float = math.nan) -> tuple[float, float]:
    """The values of the change that count as the same: 1 ± margin for a ratio; for a difference ± margin ×
    |reference| (relative) or ± margin (absolute)."""
    if kind == "ratio":
        if not margin.relative:
            raise UserError(f"--margin {margin}: a ratio's margin is a share, e.g. 5%")
        return 1.0 - margin.value, 1.0 + margin.value
    width = margin.value * abs(reference) if margin.relative else margin.value
    return -width, width


def verdict(interval: stats.Bounds, limits: tuple[float, float], metric: str) -> str:
    """same within margin, worse/better (larger/smaller without a direction) or not enough data."""
    low, high = interval
    if any(math.isnan(x) for x in (low, high, *limits)):
        return NOT_ENOUGH
    if limits[0] <= low and high <= limits[1]:
        return SAME
    if low > limits[1] or high < limits[0]:
        larger = low > limits[1]
        worse = LARGER_IS_WORSE.get(metric)
        if worse is None:
            return "larger" if larger else "smaller"
        return "worse" if larger == worse else "better"
    return NOT_ENOUGH


def more_needed(n: int, change: stats.Bounds, interval: stats.Bounds, limits: tuple[float, float],
                log: bool) -> int | None:
    """About how many more pairs (or runs per side) an interval of today's spread needs to fall inside the band
    or wholly outside it (its width shrinks as 1/sqrt(n)); None when no number of them would say (the estimate
    on the band's edge, a censored end)."""
    values = [*interval, change[0], *limits]
    if change[0] != change[1] or any(not math.isfinite(x) for x in values) or (log and min(values) <= 0):
        return None
    f = np.log if log else (lambda x: x)
    low, high, mid, lo_band, hi_band = (float(f(x)) for x in (interval[0], interval[1], change[0], *limits))
    below, above = max(mid - low, 1e-12), max(high - mid, 1e-12)
    if lo_band <= mid <= hi_band:
        shrink = min((mid - lo_band) / below, (hi_band - mid) / above)
    elif mid > hi_band:
        shrink = (mid - hi_band) / below
    else:
        shrink = (lo_band - mid) / above
    if shrink <= 0:
        return None
    return max(1, math.ceil(n / shrink ** 2 - n))


def _needs(group: Group, kind: str, unit: str) -> str:
    if group.verdict != NOT_ENOUGH:
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


def _paired(group: Group, pairs: pd.DataFrame, kind: str, seed: int, n_boot: int, level: float) -> None:
    used = pairs[pairs["outcome"] != "excluded"]
    a_to = used["outcome"].isin(ratios.BASELINE_TIMED_OUT).to_numpy()
    b_to = used["outcome"].isin(ratios.LABEL_TIMED_OUT).to_numpy()
    group.a_median = stats.median_bounds(used["baseline_value"], a_to, used["baseline_limit"])
    group.b_median = stats.median_bounds(used["value"], b_to, used["limit"])
    if kind == "ratio":
        low, high = used["ratio_low"].to_numpy(float), used["ratio_high"].to_numpy(float)
        keep = ~(np.isnan(low) | np.isnan(high))
        low, high = low[keep], high[keep]
    else:
        low = high = (used["value"] - used["baseline_value"]).to_numpy(float)
    group.n = len(low)
    if group.n:
        group.change = (float(np.median(low)), float(np.median(high)))
        group.interval = (_boot(low, seed, n_boot, level)[0], _boot(high, seed, n_boot, level)[1])


def _unpaired(group: Group, a: pd.DataFrame, b: pd.DataFrame, kind: str, seed: int, n_boot: int,
              level: float) -> None:
    a, b = a[a["usable"]], b[b["usable"]]
    group.n = min(len(a), len(b))
    side_level = 1 - (1 - level) / 2
    medians, cis = [], []
    for runs in (a, b):
        low, high = stats.placements(runs["value"], runs["censored"], runs["limit"])
        medians.append(stats.median_bounds(runs["value"], runs["censored"], runs["limit"]))
        cis.append((_boot(low, seed, n_boot, side_level)[0], _boot(high, seed, n_boot, side_level)[1]))
    group.a_median, group.b_median = medians
    (a_med, b_med), (a_ci, b_ci) = medians, cis
    if kind == "ratio":
        group.change = stats.ratio_bounds(b_med, a_med)
        group.interval = (stats.divide(b_ci[0], a_ci[1]), stats.divide(b_ci[1], a_ci[0]))
    else:
        group.change = (b_med[0] - a_med[1], b_med[1] - a_med[0])
        group.interval = (b_ci[0] - a_ci[1], b_ci[1] - a_ci[0])
    if group.n < MIN_PAIRS:
        group.interval = stats.NAN_BOUNDS


def compare(frame_a: pd.DataFrame, frame_b: pd.DataFrame, *, metric: str = "dct_ms", margin: Margin,
            by: Sequence[str] = (), labels: dict[str, str] | None = None, seed: int = 0, n_boot: int = 2000,
            level: float = 0.95) -> Comparison:
    """Every group of A and B (two ``results.load`` frames) compared on ``metric`` against ``margin``."""
    kind = kind_of(metric)
    band(kind, margin)   # a ratio's margin must be a share: said before any work
    for name, frame in (("A", frame_a), ("B", frame_b)):
        if frame.empty:
            raise UserError(f"{name}: the database holds no runs")
    both, columns = prepare(frame_a, frame_b, metric, by, labels or {})
    keys = ["group_label", "size", *columns]
    common_keys = set(frame_a["key"]) & set(frame_b["key"])
    pairs = _paired_rows(both, metric, columns) if common_keys else None
    groups = []
    for key, runs in both.groupby(keys, dropna=False, sort=True):
        values = dict(zip(keys, key, strict=True))
        size = values.pop("size")
        label = values.pop("group_label")
        a, b = runs[runs["side"] == "A"], runs[runs["side"] == "B"]
        group = Group(label=label, label_b=str(b["label"].iloc[0]) if len(b) else label,
                      size=None if pd.isna(size) else int(size),
                      by={k.removeprefix("factor_"): v for k, v in values.items()})
        groups.append(group)
        if not len(a) or not len(b):
            group.mode = group.verdict = ONLY_B if not len(a) else ONLY_A
            continue
        shared = set(a["key"]) & set(b["key"])
        group.left_out = {"a": _counts(a), "b": _counts(b)}
        if shared:
            mine = pairs
            for column, value in zip(keys, key, strict=True):
                mine = mine[mine[column].isna()] if pd.isna(value) else mine[mine[column] == value]
            mine = mine[mine["status"].notna()]   # A's runs whose key B ran too
            alone = {"a": int((a["usable"] & ~a["key"].isin(shared)).sum()),
                     "b": int((b["usable"] & ~b["key"].isin(shared)).sum())}
            for side, count in alone.items():
                if count:
                    group.left_out[side]["without a twin in the other"] = count
            _paired(group, mine, kind, seed=stats.group_seed(seed, [str(k) for k in key]), n_boot=n_boot,
                    level=level)
            unit = "pairs"
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
            _unpaired(group, a[a["condition"].isin(conditions)], b[b["condition"].isin(conditions)], kind,
                      seed=stats.group_seed(seed, [str(k) for k in key]), n_boot=n_boot, level=level)
            unit = "runs per side"
        reference = group.a_median[0] if group.a_median[0] == group.a_median[1] else math.nan
        group.band = band(kind, margin, reference)
        group.verdict = verdict(group.interval, group.band, metric)
        group.needs = _needs(group, kind, unit)
        lost_a, lost_b = sum(group.left_out["a"].values()), sum(group.left_out["b"].values())
        group.exclusions_p = stats.exclusions_differ(lost_b, len(b), lost_a, len(a))
    if all(g.mode in (ONLY_A, ONLY_B) for g in groups):
        raise UserError("not the same design: A and B have no group (label, size) in common (A: "
                        f"{', '.join(sorted(set(frame_a['label'])))}; B: {', '.join(sorted(set(frame_b['label'])))})")
    return Comparison(metric=metric, kind=kind, margin=margin, level=level, groups=groups)
