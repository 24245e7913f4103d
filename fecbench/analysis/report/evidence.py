"""What a comparison rests on, said before what it found: the report's evidence (issue 48).

A run left out of a comparison (failed, flagged `fidelity`, unsupported, missing) is not left out at random
when one label loses more runs than its baseline: a FEC label's endpoints do more work on a busy CPU and are
flagged more often, so the survivors are not a sample of the comparison's population. This module says so:

- ``exclusions``: per compared label, how many pairs each side lost and why; when the shares differ
  (`fecbench.analysis.stats.exclusions_differ`: more than 5 points apart and Fisher's exact test at 5 %, the same
  rule as reproduce's "not judged"), the report's first sentence names it;
- ``sensitivity``: the headline's median ratio with and without the flagged runs (``results.load(…,
  include_fidelity=True)``: a flagged run's own outcome taken as data), side by side;
- ``flagged_vs_ok``: per label and size, each flagged run's metric against the median of the same label's ok runs
  at the same network and size; when they differ (a sign test at 5 %, 5 runs or more), a sentence says which way;
- ``attempts``: the runs run again after a flag (their earlier outcomes, kept with their metrics), each attempt's
  metric against the run's last; and the twins (``fecbench run --twins N``: the same key, point and loss seed run
  again, recorded beside the run), each twin's metric against its run's;
- ``twin_spreads``: per label and size, how far a run repeats itself: the 90th percentile of |log(twin ÷ run)|,
  which the report's sentences set beside every effect (an effect smaller than that is not a finding until it
  repeats);
- ``twin_summary``: the campaign's twins at once, as ``fecbench run --twins`` prints them: the median and the
  10th–90th percentiles of twin ÷ run and the share within ``ATTEMPT_TOLERANCE``, from ``MIN_TWINS`` ok twins on.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fecbench.analysis import ratios, results, stats
from fecbench.analysis.figures.style import format_size
from fecbench.records.run_records import TWIN

#: Runs a flagged-vs-ok comparison needs before it says anything.
MIN_FLAGGED = 5
#: A re-run's metric "differed" from its earlier attempt's by more than this share.
ATTEMPT_TOLERANCE = 0.05
#: Twins that ended ok (with their runs) before ``twin_summary`` gives their spread: from 11 ratios on, the 10th and
#: 90th percentiles (linear interpolation: positions 0.1·(n − 1) and 0.9·(n − 1)) no longer involve the smallest and
#: the largest ratio, so no single twin sets the interval printed, and the median has a distribution-free 95 %
#: interval that leaves out both extremes too (from 9 on).
MIN_TWINS = 11
USABLE = ("ok", "timeout")


def exclusions(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per compared label of ``ratios.pairs``: pairs, each side's excluded pairs (a run not ok or timed out, or
    missing) and why, each side's share, Fisher's p where they differ (else NaN), ``differ``."""
    rows = []
    for label, group in pairs.groupby("label", sort=True):
        mine = ~group["status"].isin(USABLE)
        base = ~group["baseline_status"].isin(USABLE)
        p = stats.exclusions_differ(int(mine.sum()), len(group), int(base.sum()), len(group))
        rows.append({"label": label, "baseline": group["baseline"].iloc[0], "pairs": len(group),
                     "label excluded": int(mine.sum()), "baseline excluded": int(base.sum()),
                     "label why": _why(group.loc[mine, "status"]), "baseline why": _why(group.loc[base,
                                                                                              "baseline_status"]),
                     "label share": float(mine.mean()) if len(group) else math.nan,
                     "baseline share": float(base.mean()) if len(group) else math.nan,
                     "fisher p": math.nan if p is None else p, "differ": p is not None})
    return pd.DataFrame(rows)


def _why(statuses: pd.Series) -> str:
    counts = statuses.fillna("missing").value_counts().sort_index()
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def exclusion_sentence(row: pd.Series) -> str:
    """The report's first sentence when a label lost runs at another rate than its baseline."""
    return (f"Exclusions differ: {row['label']} lost {row['label excluded']} of its {row['pairs']} pairs "
            f"({row['label why'] or 'none'}), {row['baseline']} {row['baseline excluded']} "
            f"({row['baseline why'] or 'none'}; Fisher's exact test p = {row['fisher p']:.2g}): what survived is not "
            f"a sample of the comparison, so each comparison of {row['label']} below is shown with and without the "
            "flagged runs (\"with and without flagged runs\").")


def headline(frame: pd.DataFrame, base: str, labels: list[str], seed: int) -> pd.DataFrame:
    """``ratios.summary`` of ``labels`` against ``base`` on ``frame`` (the report's headline statistic)."""
    pairs = ratios.pairs(frame, baseline=base, labels=labels, metric="dct_ms")
    return ratios.summary(ratios.point_ratios(pairs, seed=seed))


def sensitivity(without: pd.DataFrame, with_flagged: pd.DataFrame) -> pd.DataFrame:
    """The headline's median ratio over points per label and size, without and with the flagged runs."""
    joined = without.merge(with_flagged, on=["label", "size"], how="outer", suffixes=(" without", " with"))
    out = pd.DataFrame({"label": joined["label"], "size": joined["size"].map(format_size)})
    for side in ("without", "with"):
        out[f"pairs used ({side} flagged)"] = (joined[f"points {side}"].fillna(0).astype(int).astype(str) + " points, "
                                              + _pairs_used(joined, side))
        out[f"median ratio ({side} flagged)"] = [
            stats.describe((lo, hi)) for lo, hi in zip(joined[f"median_ratio_low {side}"],
                                                      joined[f"median_ratio_high {side}"], strict=True)]
    return out


def _pairs_used(joined: pd.DataFrame, side: str) -> pd.Series:
    used = joined.get(f"pairs_used {side}")
    if used is None:
        return pd.Series("", index=joined.index)
    return used.fillna(0).astype(int).astype(str) + " pairs"


def flagged_vs_ok(frame: pd.DataFrame, metric: str = "dct_ms") -> pd.DataFrame:
    """Per label and size: each flagged run's metric over the median of the same label's ok runs at the same
    network and size; their count, median ratio and a two-sided sign test of "as often above as below"."""
    from scipy.stats import binomtest

    runs = frame[frame[metric].notna()]
    ok = runs[runs["status"] == "ok"].groupby(["label", "network", "size"], dropna=False)[metric].median()
    flagged = runs[runs["flagged"]] if "flagged" in runs else runs.iloc[0:0]
    rows = []
    for (label, size), group in flagged.groupby(["label", "size"], dropna=False, sort=True):
        reference = [ok.get((label, net, size), math.nan) for net in group["network"]]
        ratio = (group[metric].to_numpy(float) / np.asarray(reference, float))
        ratio = ratio[np.isfinite(ratio)]
        above, below = int((ratio > 1).sum()), int((ratio < 1).sum())
        p = float(binomtest(above, above + below).pvalue) if above + below else math.nan
        rows.append({"label": label, "size": size, "flagged runs": len(ratio),
                     "median flagged ÷ ok": float(np.median(ratio)) if len(ratio) else math.nan,
                     "above ok median": above, "below": below, "sign test p": p,
                     "differ": len(ratio) >= MIN_FLAGGED and p < 0.05})
    return pd.DataFrame(rows)


def flagged_sentence(row: pd.Series, metric: str = "dct_ms") -> str:
    way = "higher" if row["median flagged ÷ ok"] > 1 else "lower"
    consequence = ("leaving them out makes the label look faster than it ran" if way == "higher" else
                   "leaving them out makes the label look slower than it ran")
    return (f"{row['label']}'s flagged runs at {format_size(row['size'])} had a {way} {metric} than its ok runs at "
            f"the same points ({row['median flagged ÷ ok']:.3g}× their median over {row['flagged runs']} runs, sign "
            f"test p = {row['sign test p']:.2g}): {consequence}.")


def attempts(db, frame: pd.DataFrame, metric: str = "dct_ms") -> pd.DataFrame:
    """Each earlier attempt of a run run again (earlier_outcomes with the metrics it kept) against the run's
    last attempt, and each twin (the twins table, its last attempt) against its run: label, size, statuses, both
    values and their ratio. ``twin`` marks a twin's row: ``earlier`` is then its run, ``final`` the twin, ``attempt``
    the twin's attempts. A database written before schema 9 kept a twinned run's first outcome as an earlier attempt
    (why_again with ``TWIN``, the run's row then the twin's): the same orientation, the same row (attempt 1)."""
    tables = results.table_names(db)
    last = frame.set_index("key")
    rows = _earlier_rows(db, last, metric) if "earlier_outcomes" in tables else []
    rows += _twin_rows(db, last, metric) if "twins" in tables else []
    return pd.DataFrame(rows, columns=["key", "label", "size", "attempt", "twin", "earlier status", "final status",
                                       f"earlier {metric}", f"final {metric}", "final ÷ earlier"])


def _row(key: str, now: pd.Series, attempt: int, twin: bool, earlier: tuple[str, object], final: tuple[str, object],
         metric: str) -> dict:
    (status, value), (final_status, final_value) = earlier, final
    ratio = (final_value / value) if value and final_value and value > 0 else math.nan
    return {"key": key, "label": now["label"], "size": now["size"], "attempt": attempt, "twin": twin,
            "earlier status": status, "final status": final_status, f"earlier {metric}": value,
            f"final {metric}": final_value, "final ÷ earlier": ratio}


def _earlier_rows(db, last: pd.DataFrame, metric: str) -> list[dict]:
    import json

    earlier = results.frame(db, "earlier_outcomes", ["run_key", "attempt", "status", "fidelity_json", "why_again"])
    rows = []
    for row in earlier.itertuples(index=False):
        if row.run_key not in last.index:
            continue
        kept = json.loads(row.fidelity_json or "{}").get("metrics") or {}
        now, twin = last.loc[row.run_key], TWIN in str(row.why_again or "")
        rows.append(_row(row.run_key, now, 1 if twin else row.attempt, twin,   # a twin's own attempts: not kept then
                         (row.status, kept.get(metric)), (now["status"], now.get(metric)), metric))
    return rows


def _twin_rows(db, last: pd.DataFrame, metric: str) -> list[dict]:
    """Each twin's last attempt against its run (``attempt``: the twin's attempts, more than 1 when it was re-run)."""
    import json

    twins = results.frame(db, "twins", ["run_key", "twin", "attempt", "status", "metrics_json"],
                          order_by=["run_key", "twin", "attempt"])
    rows = []
    for row in twins.groupby(["run_key", "twin"], sort=False).tail(1).itertuples(index=False):
        if row.run_key not in last.index:
            continue
        now = last.loc[row.run_key]
        value = (json.loads(row.metrics_json or "null") or {}).get(metric)
        rows.append(_row(row.run_key, now, row.attempt, True, (now["status"], now.get(metric)),
                         (row.status, value), metric))
    return rows


def attempts_summary(table: pd.DataFrame, metric: str = "dct_ms") -> pd.DataFrame:
    """Per label: earlier attempts (twins left out: ``twin_spreads``) with a metric on both sides, the median
    |final ÷ earlier − 1| and how many differed by more than ATTEMPT_TOLERANCE."""
    if table.empty:
        return table
    table = table[~table["twin"].astype(bool)]
    both = table[table["final ÷ earlier"].notna()]
    rows = []
    for label, group in table.groupby("label", sort=True):
        measured = both[both["label"] == label]
        change = (measured["final ÷ earlier"] - 1).abs()
        rows.append({"label": label, "attempts kept": len(group), "with the metric both times": len(measured),
                     "median |change|": float(change.median()) if len(change) else math.nan,
                     f"changed > {ATTEMPT_TOLERANCE:.0%}": int((change > ATTEMPT_TOLERANCE).sum()),
                     "final status ok": int((group["final status"] == "ok").sum())})
    return pd.DataFrame(rows)


def twin_pairs(table: pd.DataFrame, metric: str = "dct_ms") -> pd.DataFrame:
    """``attempts``' twins whose run and twin both ended ok with ``metric`` measured on both."""
    return table[table["twin"].astype(bool) & (table["earlier status"] == "ok") & (table["final status"] == "ok")
                 & table[f"earlier {metric}"].notna() & table[f"final {metric}"].notna()]


def twin_spreads(table: pd.DataFrame, metric: str = "dct_ms") -> pd.DataFrame:
    """Per label and size of ``attempts``' twins (both ok with the metric): twins, the median and the 90th
    percentile of |log(twin ÷ run)| as a share (``spread``: e^q90 − 1), and the range of twin ÷ run."""
    twins = twin_pairs(table, metric)
    twins = twins[twins["final ÷ earlier"].notna()]
    rows = []
    for (label, size), group in twins.groupby(["label", "size"], sort=True):
        change = np.abs(np.log(group["final ÷ earlier"].to_numpy(float)))
        rows.append({"label": label, "size": size, "twins": len(group),
                     "median |change|": float(np.expm1(np.median(change))),
                     "spread (90 %)": float(np.expm1(np.quantile(change, 0.9))),
                     "second ÷ first, min–max": f"{group['final ÷ earlier'].min():.3g}–"
                                               f"{group['final ÷ earlier'].max():.3g}"})
    return pd.DataFrame(rows)


def twin_summary(table: pd.DataFrame, metric: str = "dct_ms", epsilon: float = 0.0) -> dict:
    """The twins of ``attempts`` at once: how many there are, how many were re-run (flagged at first), how many
    ended ok with their runs (``ok``), and from ``MIN_TWINS`` ok on, over (twin + ε) ÷ (run + ε) of ``metric``
    (ε: the campaign's outcome metric's, `calibrate.outcome_metric`): the median, the 10th and 90th percentiles and
    the share within ``ATTEMPT_TOLERANCE`` of 1."""
    twins = table[table["twin"].astype(bool)]
    pairs = twin_pairs(table, metric)
    run = pairs[f"earlier {metric}"].to_numpy(float) + epsilon
    twin = pairs[f"final {metric}"].to_numpy(float) + epsilon
    ratio = twin[run > 0] / run[run > 0]
    out = {"metric": metric, "twins": len(twins), "ok": len(ratio),
           "re-run": int((twins["attempt"] > 1).sum()) if len(twins) else 0}
    if len(ratio) >= MIN_TWINS:
        p10, median, p90 = np.quantile(ratio, [0.1, 0.5, 0.9])
        out.update({"median": float(median), "p10": float(p10), "p90": float(p90),
                    "within": float(np.mean(np.abs(ratio - 1) <= ATTEMPT_TOLERANCE))})
    return out


def twin_summary_text(summary: dict, again: str, left: int) -> str:
    """``twin_summary`` in a sentence (``again``: the command that adds twins, ``left``: the ok runs without a twin
    yet, to say how many more it needs and whether the campaign has them)."""
    head = (f"twins: {summary['ok']} of the campaign's {summary['twins']} twin(s) ended ok beside their runs"
            + (f" ({summary['re-run']} re-run as twins after a flag)" if summary["re-run"] else ""))
    if "median" not in summary:
        more = MIN_TWINS - summary["ok"]
        head += (f"; their spread is printed from {MIN_TWINS} ok twins on (fewer: one twin would set its interval), "
                 f"{more} more needed: ")
        if not left:
            return head + "no ok run of the campaign is left to twin (more repetitions or points first)"
        return head + (f"{again} {more} (or more, as some may not end ok)" if left > more else
                       f"{again} {left}, the ok runs left to twin" + ("" if left == more else ", is not enough"))
    return (f"{head}; {summary['metric']}, twin ÷ run: median {summary['median']:.3f}, 10th–90th percentile "
            f"{summary['p10']:.3f}–{summary['p90']:.3f}, {summary['within']:.0%} within "
            f"{ATTEMPT_TOLERANCE:.0%} of their run (at least {MIN_TWINS} ok twins needed; the report gives the "
            "spread per label and size)")


def attempts_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db, frame: pd.DataFrame) -> None:
    """The runs run again (after a flag, or asked for): each earlier attempt's DCT against the run's last; and the
    twins: each twin's DCT against its run's."""
    tried = attempts(db, frame)
    if tried.empty:
        return
    summary = attempts_summary(tried)
    if len(summary):
        name = "attempts compared (runs run again)"
        tables[name] = summary
        notes[name] = (f"Per label: the earlier attempts of runs run again (earlier_outcomes, with the metrics each "
                       f"kept) against the run's last attempt, on the same key and loss seed: how much the DCT "
                       f"changed, and how many changed by more than {ATTEMPT_TOLERANCE:.0%}. A flag whose re-run "
                       "measured the same did not change the answer; one whose re-run differs did.")
    spreads = twin_spreads(tried)
    if len(spreads):
        name = "twins: how far a run repeats itself"
        tables[name] = spreads.assign(size=spreads["size"].map(format_size))
        notes[name] = ("Runs run again under their own key by --twins (the same point, seed and loss seed), each "
                       "twin recorded beside its run: the twin's DCT over the run's. Seeded losses drop the n-th "
                       "packet of a direction; when timing changes which packet is the n-th, the twins differ. "
                       "Spread: 90 % of the twins differ by less. An effect smaller than its label's or baseline's "
                       "spread is said to be so.")
