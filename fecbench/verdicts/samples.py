"""A claim's sample: the runs of its own draws (``draws``), as observations in drawn order, with what was
left out and why.

For each draw in order, each of its units needs a run of the claim's label and one of its baseline (every
label of the design for a flows claim, whose compared flows are inside each run):

- a run not finished yet (pending, interrupted, missing), or one that was flagged (``fidelity``) and has not
  been run again yet (``reproduce`` runs such a run once more, same key and seed): the sample ends before this
  draw, so a claim's observations are always the first ones it drew;
- a run that failed (``reproduce`` does not run it again), was flagged again, or is unsupported: its value is
  missing, maybe *because* of its
  value (a transfer that fails on its slowest draws), so it is **imputed at the design's limits**, never
  dropped: a duration anywhere in [0, ∞), any other metric in (−∞, ∞); every interval takes each
  observation's least favourable end, so a verdict holds at both extremes at once (partial identification,
  Manski's bounds). The draw is counted for the side whose run it was (``evaluate`` names the imputed values
  and how far they moved each bound; exclusion rates that differ between the sides are a warning);
- a run that failed and then finished when run again (``FAILED_ONCE``) is imputed the same way: its second
  attempt is a draw from the runs that did not fail, not from the claim's population (a transfer that fails on
  its slowest draws keeps, when run again, the draws that happened to be quicker);
- a run that reached its time limit is **censored**, never dropped: for a duration metric its value lies
  in [``timeout_s``, ∞), for any other metric it is unknown (−∞, ∞). Every value carries its bounds
  (``value_lo``/``value_hi``, ``base_lo``/``base_hi``, ``ratio_lo``/``ratio_hi``); a finished run's
  bounds are its value. The confidence sequences take each bound where it is least favourable;
- a ``loss_class`` (``baseline_class``) filter keeps a draw's unit only when its runs' (its baseline run's)
  loss class is one of those asked: the observations are then draws from the claim's population given
  that class. A statistic over each side's runs, unpaired, classes each run by its own log: a run outside
  the class leaves its side only (a pair needs both).

The sample frame has one row per unit: ``draw`` (its position in the claim's draws), ``cell`` (0, or 1 for
a trend's second cell), ``group`` (point|size), ``factor`` (a trend's), the bounds above and the point
values ``value``, ``base``, ``ratio`` (+∞ or 0 for a censored side, NaN where unknown) for the
fixed-sample estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from fecbench.analysis import derived, ratios, results
from fecbench.analysis.studies import flows, loss_position
from fecbench.analysis.traces import data_loss
from fecbench.verdicts import sequential as sq
from fecbench.verdicts import statistics as st
from fecbench.verdicts.draws import Draw
from fecbench.verdicts.pack import Claim

#: A run's status that ends a draw's wait for it: its value, or its exclusion once it was run again.
FINISHED = ("ok", "timeout")
RETRIED_AWAY = ("fidelity",)
FINAL_EXCLUSION = ("unsupported", "failed")
#: A run that failed and finished when run again: imputed as a failure (see the module).
FAILED_ONCE = "failed once"
#: The columns a flows claim reads from the per-flow table (fecbench.analysis.studies.flows).
FLOW_COLUMNS = ("run_key", "role", "label", "dct_ms")


class Recording(Protocol):
    """Where a replay's runs were recorded: its per-run tables, keyed by the recorded run's ``run_key``."""

    @property
    def classes(self) -> pd.DataFrame: ...       # loss classes (``loss_position.classify_logs``)

    @property
    def flows(self) -> pd.DataFrame: ...         # the per-flow table (``flows.flows``)


class Data:
    """The runs of one campaign database, loaded once for all its claims, and found by unit."""

    def __init__(self, db: Path, frame: pd.DataFrame | None = None, recording: Recording | None = None) -> None:
        self.db = db
        if frame is None:
            frame = results.load(db) if db.is_file() else pd.DataFrame()
        self.frame = derived.with_derived_metrics(frame)
        self.recording = recording
        self._classified: pd.DataFrame | None = None
        self._flows: pd.DataFrame | None = None
        self._index: dict[tuple, dict[str, Any]] | None = None
        self._earlier: dict[str, set[str]] | None = None   # run key -> statuses of its earlier attempts

    @classmethod
    def replayed(cls, frame: pd.DataFrame, recording: Recording) -> Data:
        """A replay's runs (``frame``: each run's ``recorded_key`` names the recorded run it stands for): the
        per-run tables of ``recording`` follow the runs the replay drew, under the replay's keys."""
        return cls(Path("/nonexistent"), frame, recording)

    def classified(self) -> pd.DataFrame:
        """The runs with a verdict log, with their loss classes decided by the datagrams that carried the transfer's
        data (``data_loss.classify_runs``): a run that cannot be classed so has class None (``how_<d>`` says why),
        never a class guessed from every packet. A replay's classes are its recording's."""
        if self._classified is None:
            if self.recording is None:
                self._classified = data_loss.classify_runs(self.db)
            elif self.frame.empty:
                self._classified = self.frame
            else:
                self._classified = loss_position.with_classes(self.frame, self.recording.classes, on="recorded_key")
        return self._classified

    def flow_table(self) -> pd.DataFrame:
        """The per-flow table of competing-flow runs (``flows.flows``)."""
        if self._flows is None:
            if self.recording is None:
                self._flows = flows.flows(self.db)
            else:
                table = self.recording.flows
                drawn = self.frame[["key", "recorded_key"]] if not self.frame.empty \
                    else pd.DataFrame(columns=["key", "recorded_key"])
                self._flows = (table.merge(drawn, left_on="run_key", right_on="recorded_key", how="inner")
                               .drop(columns=["run_key", "recorded_key"]).rename(columns={"key": "run_key"}))
        return self._flows

    def index(self) -> dict[tuple, dict[str, Any]]:
        """(point, repetition, size, label) → the run's row."""
        if self._index is None:
            self._index = {}
            if not self.frame.empty:
                for row in self.frame.to_dict("records"):
                    size = row.get("size")
                    size = None if size is None or (isinstance(size, float) and math.isnan(size)) else int(size)
                    self._index[(int(row["point"]), int(row["repetition"]), size, str(row["label"]))] = row
        return self._index

    def retried(self, row: dict[str, Any]) -> bool:
        """Whether a flagged run was run again already (its earlier outcome kept)."""
        if "retried" in row:
            return bool(row["retried"])
        return bool(self._earlier_statuses(row) & set(RETRIED_AWAY))

    def failed_once(self, row: dict[str, Any]) -> bool:
        """Whether an earlier attempt of the run failed (it was run again: see the module)."""
        if "failed_once" in row:
            return bool(row["failed_once"])
        return "failed" in self._earlier_statuses(row)

    def _earlier_statuses(self, row: dict[str, Any]) -> set[str]:
        if self._earlier is None:
            self._earlier = {}
            if self.recording is None and self.db.is_file() and "earlier_outcomes" in results.table_names(self.db):
                earlier = results.frame(self.db, "earlier_outcomes", ["run_key", "status"])
                for key, status in zip(earlier["run_key"], earlier["status"], strict=True):
                    self._earlier.setdefault(str(key), set()).add(str(status))
        return self._earlier.get(str(row.get("key")), set())

    def as_judged(self, row: dict[str, Any] | None) -> dict[str, Any] | None:
        """The run as a claim reads it: one that failed once and finished when run again is ``FAILED_ONCE``."""
        if row is None or row["status"] not in FINISHED or not self.failed_once(row):
            return row
        return {**row, "status": FAILED_ONCE}


@dataclass
class Sample:
    """A claim's sample and what its draws left out."""
    rows: pd.DataFrame
    draws: int = 0                               # draws read (observations and exclusions)
    excluded: dict[str, int] = field(default_factory=dict)    # side → draws excluded for its runs
    why: dict[str, int] = field(default_factory=dict)         # "label failed", … → draws
    waiting: str = ""                            # why the sample ends where it does
    filtered: int = 0                            # draws whose loss class the claim does not ask for

    @property
    def observations(self) -> int:
        return int(self.rows["draw"].nunique()) if len(self.rows) else 0


def _bounds(row: dict[str, Any], metric: str, unclassed: bool = False) -> tuple[float, float, float]:
    """(low, high, point value) of a run's metric: a timeout is censored, a run excluded (failed, flagged
    again, unsupported) imputed at the design's limits (see the module), and so is a run whose loss class a
    claim needs but nobody could tell (``unclassed``)."""
    scale = ratios.CENSORED_METRICS.get(metric)
    if row["status"] not in FINISHED or unclassed:     # missing, maybe because of its value: anywhere it could be
        return (0.0 if scale else -math.inf), math.inf, math.nan
    if row["status"] == "timeout":
        if scale:
            limit = float(row.get("timeout_s") or 0.0) * scale
            return limit, math.inf, math.inf
        return -math.inf, math.inf, math.nan
    value = row.get(metric)
    value = math.nan if value is None else float(value)
    if math.isnan(value):
        return -math.inf, math.inf, math.nan
    return value, value, value


def sample(claim: Claim, data: Data, claim_draws: list[Draw]) -> Sample:
    """The claim's sample from its draws (see the module)."""
    index = data.index()
    metric = claim.metric
    values = _flow_values(claim, data) if claim.stat.reads == st.FLOWS else None
    classes = _classes(claim, data)
    factor = claim.params.get("factor")
    rows: list[dict[str, Any]] = []
    out = Sample(pd.DataFrame())
    census = claim.stat.census
    unpaired = claim.stat.reads != st.PAIRS    # each side's runs on their own: each run classed by its own log
    blocked: set[str] = set()          # a census's cells waiting for a run: their later draws wait too
    for number, draw in enumerate(claim_draws):
        if census and draw.group in blocked:
            continue
        pairs = [(unit, data.as_judged(index.get(unit.mine)), data.as_judged(index.get(unit.base)))
                 for unit in draw.units]
        waiting = [why for _, mine, base in pairs for why in _waiting([mine, base], data)]
        if waiting:
            out.waiting = out.waiting or f"draw {number + 1} waits for a run {waiting[0]}"
            if not census:
                break
            blocked.add(draw.group)
            continue
        out.draws += 1
        gone = [(side, row["status"]) for _, mine, base in pairs
                for side, row in (("label", mine), ("baseline", base)) if row["status"] not in FINISHED]
        for side in {side for side, _ in gone}:
            out.excluded[side] = out.excluded.get(side, 0) + 1
        for side, status in gone:
            out.why[f"{side} {status}"] = out.why.get(f"{side} {status}", 0) + 1
        kept = [classes.keeps(mine, base) if classes is not None else (True, True) for _, mine, base in pairs]
        if not all(k[0] or k[1] if unpaired else k[0] and k[1] for k in kept):
            out.filtered += 1
            continue
        for (unit, mine, base), (keep_mine, keep_base) in zip(pairs, kept, strict=True):
            if values is not None:
                mine, base = ({**r, "dct_ms": values.get(str(r["key"]), math.nan)} for r in (mine, base))
            unknown = _unclassed(classes, mine, base, out.why)
            v_lo, v_hi, v = _bounds(mine, metric, unknown[0]) if keep_mine else (math.nan,) * 3
            b_lo, b_hi, b = _bounds(base, metric, unknown[1]) if keep_base else (math.nan,) * 3
            point, _, size = unit.mine[:3]
            imputed = sum(row["status"] not in FINISHED or flag
                          for row, flag in zip((mine, base), unknown, strict=True))
            rows.append({"draw": number, "cell": unit.cell, "group": f"{point}|{'' if size is None else size}",
                         "factor": float(mine[factor]) if factor and mine.get(factor) is not None else math.nan,
                         "value": v, "base": b, "ratio": _ratio_point(v, b, mine, base),
                         "value_lo": v_lo, "value_hi": v_hi, "base_lo": b_lo, "base_hi": b_hi,
                         "ratio_lo": sq.divide(max(v_lo, 0.0), b_hi) if b_hi > 0 else 0.0,
                         "ratio_hi": sq.divide(v_hi, max(b_lo, 0.0)) if b_lo > 0 else math.inf,
                         "imputed": imputed})
    out.rows = pd.DataFrame(rows, columns=SAMPLE_COLUMNS)
    for column in ("ratio_lo", "ratio_hi"):
        out.rows[column] = out.rows[column].fillna(0.0 if column == "ratio_lo" else math.inf)
    out.rows.attrs["cells"] = len({draw.group for draw in claim_draws})
    return out


def observed(rows: pd.DataFrame) -> pd.DataFrame:
    """The units whose two runs gave a value (or a censored one): what a point estimate reads; the imputed
    ones widen the interval only."""
    if rows.empty or "imputed" not in rows:
        return rows
    kept = rows[rows["imputed"] == 0]
    kept.attrs.update(rows.attrs)
    return kept


def at_limits(rows: pd.DataFrame, label_high: bool) -> pd.DataFrame:
    """The units with every imputed value at an extreme of what it could be: the label's at its upper bound and the
    baseline's at its lower (``label_high``), or the reverse. A point estimate on each gives the range the imputed
    runs could put the page's number in: the same runs as the interval (issue 69, item 6)."""
    out = rows.copy()
    for side in ("value", "base"):
        missing = out[side].isna() & (out["imputed"] > 0)
        pick = f"{side}_hi" if (side == "value") == label_high else f"{side}_lo"
        out.loc[missing, side] = out.loc[missing, pick]
    out["ratio"] = [sq.divide(v, b) for v, b in zip(out["value"], out["base"], strict=True)]
    out.attrs.update(rows.attrs)
    return out


def per_draw(rows: pd.DataFrame) -> np.ndarray:
    """Each draw's ratio of medians of its units, in drawn order (NaN where undefined)."""
    if rows.empty:
        return np.array([])
    return rows.groupby("draw", sort=True).apply(
        lambda g: _median_ratio(float(np.median(g["value"])), float(np.median(g["base"]))), include_groups=False
    ).to_numpy(float)


def _median_ratio(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b) or b == 0 or (math.isinf(a) and math.isinf(b)):
        return math.nan
    return a / b


SAMPLE_COLUMNS = ["draw", "cell", "group", "factor", "value", "base", "ratio", "value_lo", "value_hi",
                  "base_lo", "base_hi", "ratio_lo", "ratio_hi", "imputed"]


def _waiting(pair: list[dict[str, Any] | None], data: Data) -> list[str]:
    out = []
    for row in pair:
        if row is None:
            out.append("not run yet")
        elif row["status"] in RETRIED_AWAY and not data.retried(row):
            out.append(f"to run again ({row['status']} once)")
        elif row["status"] not in FINISHED + RETRIED_AWAY + FINAL_EXCLUSION + (FAILED_ONCE,):
            out.append(f"not finished ({row['status']})")
    return out


def _unclassed(classes: ClassFilter | None, mine: dict[str, Any], base: dict[str, Any],
               why: dict[str, int]) -> tuple[bool, bool]:
    """Whether each run of a unit is one whose class the claim needs but nobody could tell, counted in ``why``."""
    unknown = (classes is not None and classes.unclassed(mine), classes is not None and classes.unclassed(base))
    for side, flag in zip(("label", "baseline"), unknown, strict=True):
        if flag:
            why[f"{side} not classed"] = why.get(f"{side} not classed", 0) + 1
    return unknown


def _ratio_point(v: float, b: float, mine: dict, base: dict) -> float:
    """The pair's ratio for the fixed-sample estimate: +∞ (0) when only the label (baseline) timed out."""
    if mine["status"] == "timeout" and base["status"] == "timeout":
        return math.nan
    return sq.divide(v, b)


@dataclass
class ClassFilter:
    """A claim's loss-class filter over the runs' classes by data (``Data.classified``)."""
    where: dict[str, Any]
    classes: dict[str, str]        # run key -> class, for the runs classed

    def unclassed(self, row: dict[str, Any]) -> bool:
        """A finished run whose class is not known (its qlog cannot say which datagrams carried data, or it kept
        no qlog or verdict log): kept in the population with an unknown value, so it widens the interval rather
        than vanish or be guessed."""
        return row["status"] in FINISHED and row["key"] not in self.classes

    def _known(self, row: dict[str, Any], wanted: list[str]) -> bool:
        # an imputed run has no verdict log to class it either: kept, its unknown value widens the interval
        return row["status"] not in FINISHED or self.unclassed(row) or self.classes[row["key"]] in wanted

    def keeps(self, mine: dict[str, Any], base: dict[str, Any]) -> tuple[bool, bool]:
        """Whether each run of a unit is in the claim's population (a pair needs both)."""
        if "baseline_class" in self.where and not self._known(base, self.where["baseline_class"]):
            return False, False
        if "loss_class" in self.where:
            return self._known(mine, self.where["loss_class"]), self._known(base, self.where["loss_class"])
        return True, True


def _classes(claim: Claim, data: Data) -> ClassFilter | None:
    """The claim's loss-class filter, or None without one."""
    if "loss_class" not in claim.where and "baseline_class" not in claim.where:
        return None
    frame = data.classified()
    column = f"class_{claim.params['loss_direction']}"
    classes = {str(k): c for k, c in frame.set_index("key")[column].items() if isinstance(c, str)} \
        if column in frame else {}
    return ClassFilter(claim.where, classes)


def _flow_values(claim: Claim, data: Data) -> dict[str, float]:
    """A flows claim's value of each run: its foreground flow's DCT (issue #26's per-flow table)."""
    table = data.flow_table()
    if any(c not in table for c in FLOW_COLUMNS):
        return {}
    fore = table[table["role"] == claim.params["role"]]
    return {str(k): float(v) for k, v in zip(fore["run_key"], fore["dct_ms"], strict=True) if v is not None}


def flows_missing(data: Data) -> list[str]:
    table = data.flow_table()
    return [c for c in FLOW_COLUMNS if c not in table]


def runs(rows: pd.DataFrame) -> st.Runs:
    """Each side's values, unpaired, in drawn order, with their bounds; a side's run outside the claim's loss class
    (NaN) left out of that side only."""
    def col(name: str, side: str) -> np.ndarray:
        if not len(rows):
            return np.array([])
        values, kept = rows[name].to_numpy(float), ~np.isnan(rows[f"{side}_hi"].to_numpy(float))
        return values[kept]
    return st.Runs(col("value_hi", "value"), col("base_hi", "base"), col("value_lo", "value"), col("base_lo", "base"))
