"""Ratios between labels as the seed papers compute them, with every pair accounted for.

Pairs. A *pair* is one condition (design, workload, point, repetition — hence loss seed — and size)
as run by a compared label and by the baseline. ``pairs`` lists every pair that has a run on either
side, with its ``outcome``:

- ``finished``: both runs ``ok`` with the metric; the per-run ratio ``ratio`` is exact.
- ``label timed out`` / ``baseline timed out``: one side reached the design's time limit. For a
  duration metric (``dct_ms``, ``client_wall_ms``) that side is *censored* at ``timeout_s``: its
  value is only known to be at least the limit, so the ratio is only known to be at least (label)
  or at most (baseline) a bound — a result, not a hole.
- ``both timed out``: the per-run ratio is undefined; both runs still count in the per-point medians.
- ``excluded``: a side ``failed``, was ``unsupported``, failed the ``fidelity`` check (or ran with
  its endpoints or delay elements later than their bounds: ``endpoints late``, ``emulation late``), was
  ``interrupted``, is still ``pending`` or ``running``, has no run (``missing``) or ended ok without the metric;
  ``excluded_why`` names the side and the reason (e.g. ``label failed``). For a metric that is not
  a duration (data received, re-buffering), a timeout cannot be bounded and is excluded too.

Every pair has bounds ``ratio_low``/``ratio_high`` (``fecbench.analysis.stats``: censored values at the
limit and at +inf); NaN for excluded pairs.

Per-point ratio of medians, the statistic of Michel et al. 2019 §IV-B ("each configuration is run
9 times and the median download completion time from these 9 runs is considered"):
``point_ratios`` takes, per design point, size and label, the pairs that are not excluded — so
both medians are over the same loss seeds — and computes ``median(label) / median(baseline)``
with timeouts censored. It is exact when fewer than half the runs of each side timed out, else a
bound (``state`` ``at least`` / ``at most``) or ``undefined``. ``seeds`` is the number of pairs used;
``ci_low``/``ci_high`` a percentile bootstrap interval over those seeds, both sides of a seed resampled together
(``n_boot`` resamples at ``level``, seeded per point from ``seed``: reproducible), none with fewer than
``stats.MIN_SEEDS_FOR_INTERVAL`` seeds (``min_seeds`` in the attrs: "too few seeds"). The median of the per-run
ratios stays available (``run_ratio_median`` and its bounds), as do the per-run ratios themselves (``pairs``).

``summary`` reduces the points to one row per label and size (the report's headline): the
median over the points of the per-point ratio and the share of points where the label did better
(ratio < 1), both as bounds; ``run_summary`` does the same over the per-run ratios.
``accounting`` counts the pairs per outcome and exclusion reason; ``censored_medians`` gives
each label's own median per size with its timeouts censored.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fecbench.analysis import results, stats

#: Duration metrics a timeout censors, with their unit per second of ``timeout_s``.
CENSORED_METRICS = {"dct_ms": 1000.0, "client_wall_ms": 1000.0}
OUTCOMES = ("finished", "label timed out", "baseline timed out", "both timed out", "excluded")
LABEL_TIMED_OUT = ("label timed out", "both timed out")
BASELINE_TIMED_OUT = ("baseline timed out", "both timed out")


def _states(runs: pd.DataFrame, metric: str) -> pd.Series:
    """A run's part in a pair: ``ok`` (with the metric), ``timeout``, or why it cannot take part."""
    state = runs["status"].astype(object).fillna("no status")
    # A run flagged after it ran says what was not to be trusted: its endpoints, or the emulation.
    error = runs["error"].astype(object).fillna("") if "error" in runs else pd.Series("", index=runs.index)
    for cause in ("endpoints", "emulation"):
        state = state.mask((runs["status"] == "fidelity") & error.str.startswith(f"{cause}:"), f"{cause} late")
    has_metric = runs[metric].notna()
    state = state.mask((runs["status"] == "ok") & has_metric, "ok")
    return state.mask((runs["status"] == "ok") & ~has_metric, f"ok without {metric}")


#: The columns of a ``pairs`` frame that are no factor (the factors of its points follow them).
PAIR_COLUMNS = frozenset(["database", "point", "label", "baseline", "outcome", "excluded_why", "status",
                          "baseline_status", "value", "baseline_value", "limit", "baseline_limit", "ratio",
                          "ratio_low", "ratio_high", "key", "baseline_key", *results.CONDITION])
#: The columns of a ``results.load`` frame that are no factor.
RUN_FRAME_COLUMNS = frozenset([*results.RUN_COLUMNS, *results.METRIC_COLUMNS, *results.JSON_METRICS,
                               *results.DERIVED_COLUMNS, *results.TIMING_COLUMNS])


def factor_names(frame: pd.DataFrame, others: frozenset[str] = PAIR_COLUMNS) -> list[str]:
    """The factor columns of a frame: those its ``attrs`` name (present), else, for a frame whose ``attrs`` were
    lost (``pd.concat`` of frames whose attrs differ keeps none), every column that is not one of ``others``."""
    named = frame.attrs.get("factors")
    if named is not None:
        return [f for f in named if f in frame.columns]
    return [c for c in frame.columns if c not in others]


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise ``stats.divide``: x / inf = 0, inf / x = inf, NaN for 0 or inf / inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = a / b
    return np.where((b == 0) | (np.isinf(a) & np.isinf(b)), np.nan, out)


def pairs(db_or_frame: str | os.PathLike | pd.DataFrame, baseline: str = "quic",
          by: Sequence[str] = ("point", "rep", "size"), metric: str = "dct_ms",
          labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Every pair (condition × compared label) with its outcome, values and ratio bounds.

    Arguments as ``results.paired``. Columns: the condition's (``results.CONDITION``: ``network``, ``workload``,
    ``size``, ``repetition``, ``loss_seed``; ``database`` with several), ``point`` (the baseline's), ``label``,
    ``baseline``, ``outcome``, ``excluded_why``, ``status``/``baseline_status``,
    ``value``/``baseline_value`` (NaN unless ok), ``limit``/``baseline_limit`` (the censoring value
    in the metric's unit), ``ratio`` (finished pairs), ``ratio_low``, ``ratio_high``, the run keys
    and the factor values of the point.
    """
    frame = results.with_network(db_or_frame) if isinstance(db_or_frame, pd.DataFrame) else results.load(db_or_frame)
    keys, compared = results.pairing(frame, baseline, by, metric, labels)
    scale = CENSORED_METRICS.get(metric)
    runs = frame[frame["label"].isin([baseline, *compared])].copy()
    runs["state"] = _states(runs, metric)
    limit = runs["timeout_s"] if "timeout_s" in runs else pd.Series(math.nan, index=runs.index)
    runs["limit"] = limit.astype(float) * scale if scale else math.nan

    side = [*keys, "label", "point", "key", "status", "state", metric, "limit"]
    base = (runs.loc[runs["label"] == baseline, side].drop(columns="label")
            .rename(columns={"key": "baseline_key", "status": "baseline_status", "state": "baseline_state",
                             metric: "baseline_value", "limit": "baseline_limit", "point": "baseline_point"}))
    mine = runs.loc[runs["label"] != baseline, side].rename(columns={metric: "value"})
    # Every condition of a network both the label and the baseline ran on, crossed with the labels run on it:
    # a run missing on one side shows up as an excluded pair.
    groups = [k for k in ("database", "network", "workload") if k in keys]
    with_base = base[groups].drop_duplicates()
    grid = (runs[keys].drop_duplicates().merge(with_base, on=groups)
            .merge(mine[[*groups, "label"]].drop_duplicates(), on=groups))
    out = grid.merge(mine, on=[*keys, "label"], how="left").merge(base, on=keys, how="left")
    out["point"] = out["baseline_point"].fillna(out["point"]).astype("Int64")
    out["state"] = out["state"].fillna("missing")
    out["baseline_state"] = out["baseline_state"].fillna("missing")

    usable = ["ok", "timeout"] if scale else ["ok"]
    mine_ok, base_ok = out["state"] == "ok", out["baseline_state"] == "ok"
    mine_to = (out["state"] == "timeout") & bool(scale)
    base_to = (out["baseline_state"] == "timeout") & bool(scale)
    out["outcome"] = np.select([mine_ok & base_ok, mine_to & base_ok, mine_ok & base_to, mine_to & base_to],
                               list(OUTCOMES[:4]), OUTCOMES[4])
    excluded = out["outcome"] == "excluded"
    why = np.where(~out["state"].isin(usable), "label " + out["state"].astype(str),
                   "baseline " + out["baseline_state"].astype(str))
    out["excluded_why"] = np.where(excluded, why, "")
    out["value"] = out["value"].where(mine_ok)
    out["baseline_value"] = out["baseline_value"].where(base_ok)
    low, high = stats.placements(out["value"], mine_to, out["limit"])
    base_low, base_high = stats.placements(out["baseline_value"], base_to, out["baseline_limit"])
    out["ratio_low"] = np.where(excluded, np.nan, _divide(low, base_high))
    out["ratio_high"] = np.where(excluded, np.nan, _divide(high, base_low))
    out["ratio"] = out["ratio_low"].where(out["outcome"] == "finished")
    out.insert(out.columns.get_loc("label") + 1, "baseline", baseline)

    factors = [f for f in factor_names(frame, RUN_FRAME_COLUMNS) if f not in keys]
    if factors:
        point_factors = frame[["network", *factors]].drop_duplicates("network")
        out = out.merge(point_factors, on="network", how="left")
    columns = [*keys, "point", "label", "baseline", "outcome", "excluded_why", "status", "baseline_status", "value",
               "baseline_value", "limit", "baseline_limit", "ratio", "ratio_low", "ratio_high", "key",
               "baseline_key", *factors]
    out = out[columns].sort_values(["label", *keys], kind="stable").reset_index(drop=True)
    alone = results.unpaired(frame, baseline, keys, compared)
    results.warn_unpaired(alone)
    out.attrs.update(factors=factors, metric=metric, baseline=baseline, censored=bool(scale), unpaired=alone,
                     labels=frame.attrs.get("labels", []), sizes=frame.attrs.get("sizes", []))
    return out


def point_ratios(pair_frame: pd.DataFrame, by: Sequence[str] = ("point", "size"), *, n_boot: int = 2000,
                 level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Per design point, size and label: the ratio of medians over the point's seeds (see above).

    One row per group of ``pairs`` (``workload``, ``label`` and the ``by`` columns present; a design point is its
    ``network``, whose ``point`` is carried along), with ``seeds``, the pair counts per outcome, ``excluded_why``,
    the medians of each
    side (``label_median``, ``baseline_median``: exact or NaN, with ``_low``/``_high`` bounds), the
    ratio (``ratio``, ``ratio_low``, ``ratio_high``, ``state``), the bootstrap interval (``ci_low``,
    ``ci_high``; NaN under ``min_seeds``), the median of the per-run ratios (``run_ratio_median`` and bounds) and the
    point's factor values.
    """
    by = [c for c in by if c in pair_frame.columns]
    per_point = "point" in by    # a point is its network: two designs may number the same point differently
    by = ["network" if c == "point" else c for c in by]
    # Pairs against several baselines (two stacks' pairs concatenated) keep each label's comparisons apart.
    against = ["baseline"] if pair_frame["baseline"].nunique(dropna=False) > 1 else []
    group_cols = [*(["database"] if "database" in pair_frame.columns else []), "workload", "label", *against, *by]
    factors = factor_names(pair_frame)
    rows = []
    for key, group in pair_frame.groupby(group_cols, dropna=False, sort=True):
        used = group[group["outcome"] != "excluded"]
        label_to = used["outcome"].isin(LABEL_TIMED_OUT).to_numpy()
        base_to = used["outcome"].isin(BASELINE_TIMED_OUT).to_numpy()
        label_median = stats.median_bounds(used["value"], label_to, used["limit"])
        base_median = stats.median_bounds(used["baseline_value"], base_to, used["baseline_limit"])
        ratio = stats.ratio_bounds(label_median, base_median)
        ci = stats.bootstrap_ratio_of_medians(
            np.where(label_to, np.inf, used["value"]), np.where(base_to, np.inf, used["baseline_value"]),
            n_boot=n_boot, level=level, seed=stats.group_seed(seed, [str(k) for k in key]),
            min_pairs=stats.MIN_SEEDS_FOR_INTERVAL)
        run_ratio = (float(used["ratio_low"].median()), float(used["ratio_high"].median())) if len(used) \
            else stats.NAN_BOUNDS
        counts = group["outcome"].value_counts()
        reasons = group.loc[group["outcome"] == "excluded", "excluded_why"].value_counts().sort_index()
        row = dict(zip(group_cols, key, strict=True))
        row.update(
            baseline=group["baseline"].iloc[0], seeds=len(used), finished=int(counts.get("finished", 0)),
            label_timeouts=int(counts.get("label timed out", 0)),
            baseline_timeouts=int(counts.get("baseline timed out", 0)),
            both_timeouts=int(counts.get("both timed out", 0)), excluded=int(counts.get("excluded", 0)),
            excluded_why="; ".join(f"{why}: {n}" for why, n in reasons.items()))
        for name, bounds in (("label_median", label_median), ("baseline_median", base_median),
                             ("ratio", ratio), ("run_ratio_median", run_ratio)):
            row.update({name: stats.exact(bounds), f"{name}_low": bounds[0], f"{name}_high": bounds[1]})
        row.update(state=stats.state(ratio), ci_low=ci[0], ci_high=ci[1])
        row.update({f: group[f].iloc[0] for f in factors})
        if per_point:
            row["point"] = group["point"].iloc[0]
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        out = pd.DataFrame(columns=[*group_cols, "baseline", "seeds", "ratio", "ratio_low", "ratio_high", "state"])
    out = out.rename(columns={"run_ratio_median_low": "run_ratio_low", "run_ratio_median_high": "run_ratio_high"})
    if per_point and len(out):   # in the points' order, not their networks'
        out = out.sort_values([("point" if c == "network" else c) for c in group_cols], kind="stable",
                              ignore_index=True)
    out.attrs.update(pair_frame.attrs)
    out.attrs.update(factors=factors, statistic="ratio of medians", n_boot=n_boot, level=level, seed=seed,
                     min_seeds=stats.MIN_SEEDS_FOR_INTERVAL)
    return out


def summary(points: pd.DataFrame, by: Sequence[str] = ("label", "size")) -> pd.DataFrame:
    """One row per ``by`` group of ``point_ratios``: points (with seeds, ``seeds_min``/``seeds_max``), the pairs
    they use (``pairs_used``),
    how many are exact / at least / at most / undefined, the median over points of the per-point
    ratio (``median_ratio``: exact or NaN; ``_low``/``_high`` bounds), the share of points where the
    label did better (``below_1_low``/``below_1_high``) and the pairs that timed out or were excluded."""
    by = [c for c in by if c in points.columns]
    rows = []
    for key, group in points.groupby(by, dropna=False, sort=True):
        seeded = group[group["seeds"] > 0]
        states = seeded["state"].value_counts()
        median = ((float(seeded["ratio_low"].median()), float(seeded["ratio_high"].median())) if len(seeded)
                  else stats.NAN_BOUNDS)
        below = stats.share_below_bounds(seeded["ratio_low"], seeded["ratio_high"])
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        row.update(points=len(seeded), pairs_used=int(seeded["seeds"].sum()),
                   seeds_min=int(seeded["seeds"].min()) if len(seeded) else 0,
                   seeds_max=int(seeded["seeds"].max()) if len(seeded) else 0,
                   exact=int(states.get("exact", 0)), at_least=int(states.get("at least", 0)),
                   at_most=int(states.get("at most", 0)), undefined=int(states.get("undefined", 0)),
                   median_ratio=stats.exact(median), median_ratio_low=median[0], median_ratio_high=median[1],
                   below_1_low=below[0], below_1_high=below[1],
                   timed_out_pairs=int(group[["label_timeouts", "baseline_timeouts", "both_timeouts"]].sum().sum()),
                   excluded_pairs=int(group["excluded"].sum()), points_without_seeds=len(group) - len(seeded))
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs.update(points.attrs)
    return out


def censored_medians(frame: pd.DataFrame, metric: str = "dct_ms", by: Sequence[str] = ("label", "size")
                     ) -> pd.DataFrame:
    """Per ``by`` group of a ``results.load`` frame: ``runs``, ``finished`` (ok with the metric),
    ``timed_out`` (censored at ``timeout_s`` for a duration, else counted in ``other``), ``other``
    (runs of any other status, not used) and the median over finished and censored runs
    (``median``: exact or NaN; ``median_low``/``median_high`` bounds, see ``fecbench.analysis.stats``)."""
    scale = CENSORED_METRICS.get(metric)
    finished = (frame["status"] == "ok") & frame[metric].notna()
    timed_out = (frame["status"] == "timeout") & ~finished if scale else pd.Series(False, index=frame.index)
    limit = frame["timeout_s"].astype(float) * scale if scale and "timeout_s" in frame else math.nan
    work = frame.assign(finished=finished, timed_out=timed_out, limit=limit)
    rows = []
    for key, group in work.groupby(list(by), dropna=False, sort=True):
        used = group[group["finished"] | group["timed_out"]]
        bounds = stats.median_bounds(used[metric].where(used["finished"]), used["timed_out"], used["limit"])
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        row.update(runs=len(group), finished=int(group["finished"].sum()), timed_out=int(group["timed_out"].sum()),
                   other=len(group) - len(used), median=stats.exact(bounds), median_low=bounds[0],
                   median_high=bounds[1])
        rows.append(row)
    return pd.DataFrame(rows)


def run_summary(pair_frame: pd.DataFrame, by: Sequence[str] = ("label", "size")) -> pd.DataFrame:
    """Per ``by`` group, the per-run ratios (not the paper's statistic, kept for comparison): pairs
    used (not excluded), the median per-run ratio and the share of pairs below 1, as bounds."""
    by = [c for c in by if c in pair_frame.columns]
    rows = []
    for key, group in pair_frame.groupby(by, dropna=False, sort=True):
        used = group[group["outcome"] != "excluded"]
        median = (float(used["ratio_low"].median()), float(used["ratio_high"].median())) if len(used) \
            else stats.NAN_BOUNDS
        below = stats.share_below_bounds(used["ratio_low"], used["ratio_high"])
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        row.update(pairs=len(used), excluded=len(group) - len(used), median_ratio=stats.exact(median),
                   median_ratio_low=median[0], median_ratio_high=median[1], below_1_low=below[0],
                   below_1_high=below[1])
        rows.append(row)
    return pd.DataFrame(rows)


def accounting(pair_frame: pd.DataFrame, by: Sequence[str] = ("label", "size")) -> pd.DataFrame:
    """Pairs per ``by`` group (e.g. ``["point", "label"]``) and outcome, then one column per
    exclusion reason (``excluded: label failed``, …); a ``pairs`` total. Groups with a missing
    value (messages have no size) are kept."""
    by = [c for c in by if c in pair_frame.columns]
    outcomes = (pair_frame.groupby(by, dropna=False)["outcome"].value_counts().unstack(fill_value=0)
                .reindex(columns=list(OUTCOMES), fill_value=0))
    excluded = pair_frame[pair_frame["outcome"] == "excluded"]
    if len(excluded):
        reasons = excluded.groupby(by, dropna=False)["excluded_why"].value_counts().unstack(fill_value=0)
        reasons = reasons[sorted(reasons.columns)]
        reasons.columns = [f"excluded: {c}" for c in reasons.columns]
        outcomes = outcomes.join(reasons).fillna(0).astype(int)
    outcomes.insert(0, "pairs", outcomes[list(OUTCOMES)].sum(axis=1))
    outcomes.columns.name = None
    return outcomes


def excluded_reasons(points: pd.DataFrame) -> dict[str, int]:
    """Excluded pairs per reason (``label failed``, …), summed over rows of ``point_ratios``."""
    totals: dict[str, int] = {}
    for text in points["excluded_why"]:
        for part in filter(None, str(text).split("; ")):
            why, count = part.rsplit(": ", 1)
            totals[why] = totals.get(why, 0) + int(count)
    return dict(sorted(totals.items()))
