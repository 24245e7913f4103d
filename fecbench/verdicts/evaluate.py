"""Every claim of a pack, per profile: the statistic on the claim's own sample and its verdict.

A claim's sample is the runs of its own draws (``draws``: uniformly random cells of the claim, fresh seeds,
in an order fixed before any run; ``samples``: the prefix whose runs are done, censored runs as intervals,
what was excluded and why), so no other claim's allocation changes what it estimates. Verdicts come from
the statistic's anytime-valid interval (``Claim.stat.sequence``, ``sequential``: a confidence sequence,
valid however often it is looked at) at level 1 − α/(K·P) for a page of K claims and P profiles (α = 0.05
family-wise over every verdict the page shows, Bonferroni): **holds** (the interval lies on the claim's
side of its threshold, or within threshold ± tolerance for ``approx``), **fails** (entirely on the other
side), **at the threshold** (a ``<`` or ``>`` claim with a tolerance whose interval lies inside threshold ±
tolerance: no budget would decide it), **inconclusive** (it straddles the threshold, or no observations
yet), **not judged** (the data break an assumption the interval rests on: the running intersection became
empty, the draws are not alike over time (``exchangeable``), or the recent draws contradict the verdict: the
data changed while they came, ``audit``), and **not runnable here** (the claim needs something this checkout
lacks: never a silent pass). A run that failed twice is imputed at the design's limits (``samples``), so a
verdict holds at both extremes; exclusion rates that differ between the sides are a warning. Each verdict says
why its claim stopped taking runs (``STOPPED``) and carries a drift check (its first half of observations
against its second). The number on the page is the statistic's estimand on the values observed
(``ClaimStatistic.estimand``), with the fixed-sample bootstrap interval beside the anytime-valid one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fecbench.analysis import stats
from fecbench.analysis.stats import group_seed
from fecbench.verdicts import draws as dr
from fecbench.verdicts import samples
from fecbench.verdicts import sequential as sq
from fecbench.verdicts import statistics as st
from fecbench.verdicts.pack import Claim, Pack
from fecbench.verdicts.samples import Data
from fecbench.verdicts.statistics import error_control as ec

NOT_RUNNABLE = "not runnable here"
AT_THRESHOLD = "at the threshold"
NOT_JUDGED = "not judged"
VERDICTS = ("holds", "fails", AT_THRESHOLD, "inconclusive", NOT_JUDGED, NOT_RUNNABLE)
#: Why a claim stopped taking runs (the verdict table's "stopped" column).
STOPPED = {"holds": "decided", "fails": "decided", AT_THRESHOLD: "at threshold", "inconclusive": "budget",
           NOT_JUDGED: "budget", NOT_RUNNABLE: "not runnable"}
NO_SEQUENCE_STOP = "no sequential test"
#: Why a claim whose audit found a change stopped: it is not judged and takes no more runs.
REOPENED_STOP = "re-opened: the data changed"
#: The fewest draws a recent window of the audit reads.
AUDIT_MIN = 10
#: Observations before a drift check says anything.
DRIFT_MIN = 10

__all__ = ["Data", "Verdict", "evaluate", "evaluate_claim", "page_alpha"]


@dataclass
class Verdict:
    claim: Claim
    profile: str
    verdict: str
    estimate: st.Estimate | None
    reason: str = ""
    sequence: sq.Sequence | None = None     # the anytime-valid interval the verdict comes from
    alpha: float = sq.ALPHA                 # its error level (the page's α split over its verdicts)
    stopped: str = ""                       # why the claim stopped taking runs (STOPPED)
    looks: int = 0                          # evaluations of this claim so far (session's look log)
    drift: str = ""                         # its first half of observations against its second
    settled: frozenset[str] = frozenset()   # a census's cells whose own interval needs no more seeds
    audit: str = ""                         # what the observations after the verdict say (``audit``)

    def __post_init__(self) -> None:
        if not self.stopped:
            self.stopped = STOPPED[self.verdict]

    def interval_text(self) -> str:
        s = self.sequence
        if s is None or math.isnan(s.value):
            e = self.estimate
            return "–" if e is None or math.isnan(e.value) else f"{_fmt(e.value)} [no anytime interval]"
        if s.empty:
            return f"{_fmt(s.value)} [empty after observation {s.empty_at}]"
        return f"{_fmt(s.value)} [{_fmt(s.low)}, {_fmt(s.high)}]"

    def bootstrap_text(self) -> str:
        e = self.estimate
        if e is None or math.isnan(e.value):
            return "–"
        return f"{_fmt(e.value)} [{_fmt(e.low)}, {_fmt(e.high)}]" if e.has_interval else f"{_fmt(e.value)} [–]"

    @property
    def decided(self) -> bool:
        return self.verdict in ("holds", "fails", AT_THRESHOLD, NOT_RUNNABLE) \
            or self.stopped in (NO_SEQUENCE_STOP, REOPENED_STOP)


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.3g}"


def page_alpha(pack: Pack, profiles: list[str]) -> float:
    """Each verdict's error level: α split evenly over every verdict one page can give, the pack's claims that can
    take one (``Pack.judgeable``: those not runnable here give none; those without runs yet count, so the level does
    not change as designs arrive; a subset's, ``Pack.subset``: its own claims only) in each profile (Bonferroni)."""
    return sq.ALPHA / max(1, pack.judgeable * max(1, len(profiles)))


def evaluate(pack: Pack, dbs: dict[tuple[str, str], Path], profiles: list[str],
             spaces: dict[tuple[str, str], dr.DrawSpace], seed: int = 2019, bootstrap: bool = True,
             rule: str = ec.FAMILY_WISE) -> list[Verdict]:
    """A verdict for every claim and profile; ``dbs`` and ``spaces`` (each design's, ``draws``) by (profile,
    design alias). ``rule``: how the verdicts share the page's α (``error_control``): family-wise, each at
    ``page_alpha``; false-discovery, each at the Benjamini–Yekutieli level of the claims' anytime p-values."""
    cache: dict[Path, Data] = {}
    alpha = page_alpha(pack, profiles)
    if rule == ec.FALSE_DISCOVERY:
        alpha = discovery_alpha([(judged, data, space) for _, judged, data, space, _ in
                                 _runnable(pack, dbs, profiles, spaces, cache)],
                                max(1, pack.judgeable * max(1, len(profiles))))
    out = []
    for profile, claim in ((profile, claim) for profile in profiles for claim in pack.claims):
        db, space = dbs.get((profile, claim.design)), spaces.get((profile, claim.design))
        if claim.needs:
            out.append(Verdict(claim, profile, NOT_RUNNABLE, None, f"needs {claim.needs}", alpha=alpha))
            continue
        if db is None or not db.is_file() or space is None:
            out.append(Verdict(claim, profile, "inconclusive", None, "no runs yet (no database)", alpha=alpha))
            continue
        data = cache.setdefault(db, Data(db))
        judged = pack.profiles[profile].judged(claim) if profile in pack.profiles else claim
        verdict = evaluate_claim(judged, profile, data, space, group_seed(seed, [pack.name, claim.id, profile]),
                                 alpha=alpha, bootstrap=bootstrap)
        if judged is not claim:   # the page's claim, with the labels this profile judged it on
            verdict.claim = claim
            verdict.reason = "; ".join(filter(None, [f"judged on {judged.label} ÷ {judged.baseline}",
                                                     verdict.reason]))
        out.append(verdict)
    return out


def _runnable(pack: Pack, dbs: dict[tuple[str, str], Path], profiles: list[str],
              spaces: dict[tuple[str, str], dr.DrawSpace], cache: dict[Path, Data]):
    """(profile, the claim as the profile judges it, its data, its space, the page's claim) of every claim that
    has runs to judge."""
    for profile in profiles:
        for claim in pack.claims:
            db, space = dbs.get((profile, claim.design)), spaces.get((profile, claim.design))
            if claim.needs or db is None or not db.is_file() or space is None:
                continue
            judged = pack.profiles[profile].judged(claim) if profile in pack.profiles else claim
            yield profile, judged, cache.setdefault(db, Data(db)), space, claim


def discovery_alpha(judged: list[tuple[Claim, Data, dr.DrawSpace]], m: int) -> float:
    """The level every verdict of a page of ``m`` is judged at under the false-discovery rule: Benjamini–Yekutieli's
    step-up over the anytime p-values of the claims with runs (``judged``: each as its profile judges it)."""
    floor = ec.smallest_level(m, sq.ALPHA)
    return ec.step_up([p_value(claim, data, space, floor) for claim, data, space in judged], m, sq.ALPHA)[1]


def _decides(claim: Claim, observations, level: float) -> bool:
    """Whether the claim's confidence sequence at ``level`` on ``observations`` (what its statistic reads) decides
    it: holds, fails or at the threshold."""
    s = claim.stat.sequence(observations, claim.params, level)
    return s is not None and not s.empty and \
        sq.decide(s.low, s.high, claim.compare, claim.threshold, claim.tolerance) != "inconclusive"


def p_value(claim: Claim, data: Data, space: dr.DrawSpace, floor: float) -> float:
    """The claim's anytime p-value (``error_control.anytime_p``): the smallest level in [``floor``, α] at which
    its confidence sequence on the draws done decides it; 1 with no observations or no sequence."""
    stat = claim.stat
    if stat.reads == st.FLOWS and samples.flows_missing(data):
        return 1.0
    found = samples.sample(claim, data, dr.draws(claim, space))
    if found.observations == 0:
        return 1.0
    read = found.rows if stat.reads == st.PAIRS else samples.runs(found.rows)
    return ec.anytime_p(lambda level: _decides(claim, read, level), floor, sq.ALPHA)


def evaluate_claim(claim: Claim, profile: str, data: Data, space: dr.DrawSpace, seed: int, *,
                   alpha: float = sq.ALPHA, bootstrap: bool = True) -> Verdict:
    """One claim's verdict from its anytime-valid interval at level 1 − ``alpha`` (``bootstrap``: with the
    fixed-sample estimate beside it, for the page)."""
    stat = claim.stat
    if stat.reads == st.FLOWS and (missing := samples.flows_missing(data)):
        return Verdict(claim, profile, NOT_RUNNABLE, None, f"needs per-flow columns {', '.join(missing)} in "
                       "fecbench.analysis.studies.flows.flows", alpha=alpha)
    found = samples.sample(claim, data, dr.draws(claim, space))
    if found.observations == 0:
        notes = ["no observations yet", _excluded_text(claim, found), found.waiting]
        return Verdict(claim, profile, "inconclusive", None, "; ".join(n for n in notes if n), alpha=alpha)

    def read(rows: pd.DataFrame):
        return rows if stat.reads == st.PAIRS else samples.runs(rows)

    observed = samples.observed(found.rows)
    n_boot = st.N_BOOT if bootstrap else 0
    estimate = _bootstrap(lambda n: stat.estimate(read(observed), claim.params, seed=seed, n_boot=n), n_boot)
    sequence = stat.sequence(read(found.rows), claim.params, alpha)
    if sequence is not None:      # the page's number: the estimand on the values observed (one function)
        sequence.value = estimate.value
    verdict = _judge(claim, profile, estimate, sequence, found, alpha)
    if sequence is not None and stat.census:
        verdict.settled = stat.settled_cells(found.rows, claim.params, alpha, claim.compare, claim.threshold,
                                             claim.tolerance)
    if sequence is not None and not stat.census and verdict.verdict != NOT_JUDGED:
        exchangeable(verdict, found.rows, alpha, seed)
    if sequence is not None and verdict.verdict in ("holds", "fails", AT_THRESHOLD):
        audit(verdict, found.rows, read, alpha)
    if claim.average_proxy and sequence is not None:
        verdict.reason = "; ".join(filter(None, [verdict.reason, proxy_text(claim, observed, estimate.value)]))
    if imputed := _imputed_text(claim, found.rows, read, sequence, alpha):
        verdict.reason = "; ".join(filter(None, [verdict.reason, imputed]))
    verdict.drift = drift(found.rows)
    return verdict


def proxy_text(claim: Claim, rows: pd.DataFrame, value: float) -> str:
    """A claim whose passage states an average, judged on another statistic as its proxy: the mean of its draws'
    ratios (each draw's ratio of medians, a censored one left out and counted) beside the value judged, and whether
    the two sit on the same side of the threshold (reproduce/README.md, "Averages")."""
    ratios = samples.per_draw(rows)
    finite = ratios[np.isfinite(ratios)]
    head = f"judged on {claim.statistic} as the proxy of the average the passage states ({claim.average_proxy})"
    if finite.size == 0:
        return f"{head}: no draw with a finite ratio yet"
    mean = float(np.mean(finite))
    left = f", {ratios.size - finite.size} censored draw(s) left out" if finite.size < ratios.size else ""
    same = sq.decide(mean, mean, claim.compare, claim.threshold, claim.tolerance) == \
        sq.decide(value, value, claim.compare, claim.threshold, claim.tolerance)
    return (f"{head}: the mean of {finite.size} draws' ratios is {_fmt(mean)}{left} against {_fmt(value)} judged, "
            f"{'on the same side of' if same else 'on the other side of'} the threshold")


def _draws_from(rows: pd.DataFrame, first: int) -> pd.DataFrame:
    """The rows of the draws from the ``first``-th on (0-based, in drawn order)."""
    order = sorted(rows["draw"].unique())
    kept = rows[rows["draw"].isin(order[first:])]
    kept.attrs.update(rows.attrs)
    return kept


def _decided_at(claim: Claim, rows: pd.DataFrame, read, alpha: float) -> int:
    """The fewest draws whose running interval decides the claim (a running intersection only narrows, so once
    decided it stays: found by bisection)."""
    order = sorted(rows["draw"].unique())

    def decides(n: int) -> bool:
        return _decides(claim, read(rows[rows["draw"].isin(order[:n])]), alpha)

    low, high = 0, len(order)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return high


def audit(verdict: Verdict, rows: pd.DataFrame, read, alpha: float) -> None:
    """Drift decides nothing: a verdict stands only while the recent observations do not contradict it: those after
    the verdict (the audit draws the allocator keeps giving a decided claim) and the last half, quarter and eighth of
    all of them (a change late in a long sample). Each check is the statistic's own confidence sequence on those
    draws alone, at the claim's level split over the windows: under unchanged data it covers the value the verdict
    is about, so it contradicts a true verdict rarely; a contradiction re-opens the claim (not judged, no more runs)
    and says when and why. Re-opening never makes a verdict, so it costs power, never validity."""
    claim = verdict.claim
    n = rows["draw"].nunique()
    decided = _decided_at(claim, rows, read, alpha)
    windows = [("after the verdict", decided)] if n > decided else []
    windows += [(f"in the last {part}", n - n // k) for part, k in (("half", 2), ("quarter", 4), ("eighth", 8))
                if n // k >= AUDIT_MIN]
    for what, first in windows:
        s = claim.stat.sequence(read(_draws_from(rows, first)), claim.params, alpha / len(windows))
        if s is None or s.n == 0:
            continue
        text = f"{s.n} {claim.stat.sequence_unit} {what} (from draw {first + 1}): [{_fmt(s.low)}, {_fmt(s.high)}]"
        if s.empty or sq.contradicts(verdict.verdict, s.low, s.high, claim.compare, claim.threshold, claim.tolerance):
            _reopen(verdict, f"re-opened: {verdict.verdict} at draw {decided} of {n}, but the {text} contradict it",
                    text)
            return
        if what == "after the verdict":
            verdict.audit = f"no change: {text}"


def _imputed_text(claim: Claim, rows: pd.DataFrame, read, sequence: sq.Sequence | None, alpha: float) -> str:
    """How many values were imputed at the design's limits, how far they moved each bound, and the number with them."""
    if rows.empty or "imputed" not in rows or not (rows["imputed"] > 0).any() or sequence is None:
        return ""
    without = claim.stat.sequence(read(samples.observed(rows)), claim.params, alpha)
    moved = "" if without is None or without.n == 0 else (
        f": lower bound {_fmt(without.low)} → {_fmt(sequence.low)}, upper {_fmt(without.high)} → "
        f"{_fmt(sequence.high)} with them")
    low, high = sorted(claim.stat.estimand(read(samples.at_limits(rows, up)), claim.params) for up in (False, True))
    return (f"{int(rows['imputed'].sum())} value(s) imputed at the design's limits (runs failed, or flagged twice: "
            f"each could be anywhere, so the verdict must hold at both extremes){moved}; the number over the same runs "
            f"as the interval, with them at either extreme: {_fmt(low)} to {_fmt(high)}")


def _bootstrap(compute, n_boot: int) -> st.Estimate:
    """The fixed-sample estimate; with ``n_boot`` 0 its value and samples only (replays skip the resamples)."""
    estimate = compute(max(n_boot, 1))
    if n_boot == 0:
        estimate.low = estimate.high = math.nan
    return estimate


def exclusions_differ(claim: Claim, found: samples.Sample) -> str:
    """Why the claim cannot be judged on its survivors, or "": its sides' runs were excluded at shares that
    differ (`fecbench.analysis.stats.exclusions_differ`: the report's rule too)."""
    n = found.draws
    mine, base = found.excluded.get("label", 0), found.excluded.get("baseline", 0)
    if stats.exclusions_differ(mine, n, base, n) is None:
        return ""
    return (f"exclusions differ: {claim.label} {mine} of {n}, {claim.baseline} {base} of {n} draws "
            f"(failed, or flagged after a second run)")


def _excluded_text(claim: Claim, found: samples.Sample) -> str:
    parts = []
    unclassed = {k: v for k, v in found.why.items() if k.endswith("not classed")}
    if found.excluded:
        why = ", ".join(f"{k} {v}" for k, v in sorted(found.why.items()) if k not in unclassed)
        parts.append(f"{sum(found.excluded.values())} of {found.draws} draws excluded ({why})")
    if unclassed:
        sides = ", ".join(f"{k.split()[0]} {v}" for k, v in sorted(unclassed.items()))
        parts.append(f"{sum(unclassed.values())} run(s) not classed by their data ({sides}): unknown values, "
                     "they widen the interval")
    if found.filtered:
        parts.append(f"{found.filtered} draws outside the claim's loss class")
    return "; ".join(parts)


def _judge(claim: Claim, profile: str, estimate: st.Estimate, sequence: sq.Sequence | None,
           found: samples.Sample, alpha: float) -> Verdict:
    excluded = _excluded_text(claim, found)
    if sequence is None:
        why = claim.stat.no_sequence or "no anytime-valid interval"
        return Verdict(claim, profile, "inconclusive", estimate,
                       "; ".join(n for n in (f"{estimate.n} {estimate.unit}", f"no anytime-valid interval: {why}",
                                             excluded) if n),
                       None, alpha, NO_SEQUENCE_STOP)
    differ = exclusions_differ(claim, found)
    if sequence.empty:
        return Verdict(claim, profile, NOT_JUDGED, estimate,
                       f"the data changed during the run: the running intersection of the interval became empty "
                       f"after observation {sequence.empty_at} of {sequence.n} (drift, or a machine that became "
                       "busy: a coverage failure has probability ≤ α)", sequence, alpha)
    verdict = sq.decide(sequence.low, sequence.high, claim.compare, claim.threshold, claim.tolerance)
    notes = [f"{sequence.n} {claim.stat.sequence_unit}", estimate.note, excluded, found.waiting,
             f"warning: {differ} (their values are imputed, so the interval covers either way)" if differ else ""]
    if verdict == "inconclusive":
        notes.insert(1, "the interval straddles the threshold")
    return Verdict(claim, profile, verdict, estimate, "; ".join(n for n in notes if n), sequence, alpha)


def exchangeable(verdict: Verdict, rows: pd.DataFrame, alpha: float, seed: int) -> None:
    """Whether the claim's draws stayed alike over time (``exchangeability.martingale``: each draw ranked among the
    earlier draws of its cell, an anytime test at the claim's level); when not, no verdict stands on them (not
    judged, no more runs). A census is left out: its cells' own running intervals watch their data."""
    cells = rows.groupby("draw", sort=True)["group"].agg(lambda g: "/".join(sorted(set(g)))).to_numpy() \
        if len(rows) else None
    wealth, at = st.exchangeability.martingale(samples.per_draw(rows), seed, cells)
    if wealth < 1 / alpha:
        return
    text = (f"the draws are not alike over time: ranking each draw among its cell's earlier ones, a test martingale "
            f"reached {wealth:.3g} ≥ 1/α = {1 / alpha:.3g} at draw {at} of {len(rows['draw'].unique())}")
    was = verdict.verdict
    _reopen(verdict, f"re-opened: {was}, but {text}" if was != "inconclusive" else text, text)


def _reopen(verdict: Verdict, why: str, found: str) -> None:
    """No verdict stands on data that changed: not judged, no more runs, and why (the audit's finding)."""
    verdict.verdict, verdict.stopped = NOT_JUDGED, REOPENED_STOP
    verdict.reason = "; ".join(filter(None, [f"{why}: the data changed (drift, or a machine that became busy), so no "
                                             "verdict stands", verdict.reason]))
    verdict.audit = f"change found: {found}"


def drift(rows: pd.DataFrame) -> str:
    """The claim's first half of observations against its second (each draw's ratio of medians): medians
    and a Mann-Whitney test, for the page (a check of the assumption that the draws are alike over time)."""
    from scipy.stats import mannwhitneyu

    values = samples.per_draw(rows)
    values = values[~np.isnan(values)]
    if len(values) < DRIFT_MIN:
        return ""
    first, second = values[: len(values) // 2], values[len(values) // 2:]
    p = float(mannwhitneyu(first, second).pvalue)
    return (f"first half median {_fmt(float(np.median(first)))}, second half {_fmt(float(np.median(second)))} "
            f"(Mann-Whitney p = {p:.2g}, {len(values)} draws)")


def count_looks(log: Path, verdicts: list[Verdict]) -> None:
    """One more look at each verdict's claim, kept in ``log`` (``looks.json`` beside the page): how often
    its interval was evaluated. The intervals stay valid however large this grows; the page says it."""
    try:
        counts = json.loads(log.read_text()) if log.is_file() else {}
    except (OSError, ValueError):
        counts = {}
    counts = counts if isinstance(counts, dict) else {}
    for v in verdicts:
        key = f"{v.profile}/{v.claim.id}"
        counts[key] = int(counts.get(key, 0)) + 1
        v.looks = counts[key]
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(json.dumps(counts, indent=1, sort_keys=True))


def table(verdicts: list[Verdict], profiles: list[str]) -> pd.DataFrame:
    """One row per claim, the paper's value and, per profile, verdict and value [interval]."""
    rows: dict[str, dict[str, object]] = {}
    for v in verdicts:
        row = rows.setdefault(v.claim.id, {"claim": v.claim.id, "statement": v.claim.text,
                                           "statistic": v.claim.stat.describe(v.claim.params, v.claim.label,
                                                                              v.claim.baseline),
                                           "expected": expectation(v.claim), "the paper's value": paper_text(v.claim)})
        row[f"{v.profile}: verdict"] = v.verdict
        row[f"{v.profile}: value [anytime CS]"] = v.interval_text()
        row[f"{v.profile}: level"] = f"{1 - v.alpha:.4g}"
        row[f"{v.profile}: looks"] = v.looks
        row[f"{v.profile}: stopped"] = v.stopped
        row[f"{v.profile}: note"] = v.reason
        row[f"{v.profile}: drift check"] = v.drift or "–"
        row[f"{v.profile}: audit"] = v.audit or "–"
        row[f"{v.profile}: fixed-sample bootstrap [95 %]"] = v.bootstrap_text()
    return pd.DataFrame(list(rows.values()))


def expectation(claim: Claim) -> str:
    if claim.compare == "approx":
        return f"≈ {claim.threshold:g} ± {claim.tolerance:g}"
    return f"{claim.compare} {claim.threshold:g}"


def paper_text(claim: Claim) -> str:
    parts = []
    if claim.paper_value is not None:
        parts.append(f"{claim.paper_value:.3g}")
    if claim.paper_text:
        parts.append(claim.paper_text)
    return " — ".join(parts) or "–"
