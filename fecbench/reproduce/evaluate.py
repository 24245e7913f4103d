"""Every claim of a pack, per profile: the statistic on the campaign's database and its verdict.

Verdicts come from the statistic's anytime-valid interval (``Claim.stat.sequence``, ``sequential``: a
confidence sequence, valid however often it is looked at) at level 1 − α/K for a pack of K claims (α = 0.05
family-wise per profile, Bonferroni): **holds** (the interval lies on the claim's side of its
threshold, or within threshold ± tolerance for ``approx``), **fails** (entirely on the other side),
**at the threshold** (a ``<`` or ``>`` claim with a tolerance whose interval lies inside threshold ±
tolerance: no budget would decide it), **inconclusive** (it straddles the threshold, or no runs yet:
the reason says which), and **not runnable here** (the claim needs something this checkout lacks,
e.g. a design another issue adds: never a silent pass). Each verdict also says why its claim stopped
taking runs (``STOPPED``). The fixed-sample bootstrap estimate of ``statistics`` stays beside it (the
figure's samples; a fixed-sample interval for information).

Data, by what the claim's statistic reads (``stat.reads``). Pairs: the label's runs paired with the
baseline's on the same point, seed and size (``fecbench.analysis.ratios.pairs``: timeouts censored,
failed or flagged runs excluded and counted);
``where`` keeps the points, sizes and loss classes the claim is about (``loss_class``: each run by
its own verdict log; ``baseline_class``: a pair by its baseline run's, the paired analysis of a loss
class). Runs: each label's runs (timeouts at +inf). Flows: the foreground flows of the
per-flow table of competing-flow runs (issue #26).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from fecbench.analysis import ratios, results
from fecbench.analysis.stats import group_seed
from fecbench.analysis.studies import flows, loss_position
from fecbench.reproduce import sequential as sq
from fecbench.reproduce import statistics as st
from fecbench.reproduce.pack import Claim, Pack
from fecbench.reproduce.plan import matches

NOT_RUNNABLE = "not runnable here"
AT_THRESHOLD = "at the threshold"
VERDICTS = ("holds", "fails", AT_THRESHOLD, "inconclusive", NOT_RUNNABLE)
#: Why a claim stopped taking runs (the verdict table's "stopped" column).
STOPPED = {"holds": "decided", "fails": "decided", AT_THRESHOLD: "at threshold", "inconclusive": "budget",
           NOT_RUNNABLE: "not runnable"}
NO_SEQUENCE_STOP = "no sequential test"
#: The columns a flows claim reads from the per-flow table (fecbench.analysis.studies.flows).
FLOW_COLUMNS = ("run_key", "role", "label", "dct_ms")


@dataclass
class Verdict:
    claim: Claim
    profile: str
    verdict: str
    estimate: st.Estimate | None
    reason: str = ""
    sequence: sq.Sequence | None = None     # the anytime-valid interval the verdict comes from
    alpha: float = sq.ALPHA                 # its error level (the pack's α split over its claims)
    stopped: str = ""                       # why the claim stopped taking runs (STOPPED)
    looks: int = 0                          # evaluations of this claim so far (session's look log)

    def __post_init__(self) -> None:
        if not self.stopped:
            self.stopped = STOPPED[self.verdict]

    def interval_text(self) -> str:
        s = self.sequence
        if s is None or math.isnan(s.value):
            e = self.estimate
            return "–" if e is None or math.isnan(e.value) else f"{_fmt(e.value)} [no anytime interval]"
        return f"{_fmt(s.value)} [{_fmt(s.low)}, {_fmt(s.high)}]"

    def bootstrap_text(self) -> str:
        e = self.estimate
        if e is None or math.isnan(e.value):
            return "–"
        return f"{_fmt(e.value)} [{_fmt(e.low)}, {_fmt(e.high)}]" if e.has_interval else f"{_fmt(e.value)} [–]"

    @property
    def decided(self) -> bool:
        return self.verdict in ("holds", "fails", AT_THRESHOLD, NOT_RUNNABLE) or self.stopped == NO_SEQUENCE_STOP


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.3g}"


class Recording(Protocol):
    """Where a replay's runs were recorded: its per-run tables, keyed by the recorded run's ``run_key``."""

    @property
    def classes(self) -> pd.DataFrame: ...       # loss classes (``loss_position.classify_logs``)

    @property
    def flows(self) -> pd.DataFrame: ...         # the per-flow table (``flows.flows``)


class Data:
    """The frames of one campaign database, loaded once for all its claims."""

    def __init__(self, db: Path, frame: pd.DataFrame | None = None, recording: Recording | None = None) -> None:
        self.db = db
        if frame is None:
            frame = results.load(db) if db.is_file() else pd.DataFrame()
        self.frame = frame
        self.recording = recording
        self._classified: pd.DataFrame | None = None
        self._flows: pd.DataFrame | None = None
        self.samples: dict[tuple, tuple[pd.DataFrame | st.Runs | None, str]] = {}

    @classmethod
    def replayed(cls, frame: pd.DataFrame, recording: Recording) -> Data:
        """A replay's runs (``frame``: each run's ``recorded_key`` names the recorded run it stands for): the
        per-run tables of ``recording`` follow the runs the replay drew, under the replay's keys, and
        nothing else of the recording is read."""
        return cls(Path("/nonexistent"), frame, recording)

    def classified(self) -> pd.DataFrame:
        """The runs with a verdict log, with their loss classes (``loss_position.classify_runs``)."""
        if self._classified is None:
            if self.recording is None:
                self._classified = loss_position.classify_runs(self.db)
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


def claim_alpha(pack: Pack) -> float:
    """Each claim's error level: the pack's α split evenly over its claims (family-wise, Bonferroni)."""
    return sq.ALPHA / max(1, len(pack.claims))


def evaluate(pack: Pack, dbs: dict[tuple[str, str], Path], profiles: list[str], seed: int = 2019,
             bootstrap: bool = True) -> list[Verdict]:
    """A verdict for every claim and profile; ``dbs`` maps (profile, design alias) to a database."""
    cache: dict[Path, Data] = {}
    alpha = claim_alpha(pack)
    out = []
    for profile in profiles:
        for claim in pack.claims:
            db = dbs.get((profile, claim.design))
            if claim.needs:
                out.append(Verdict(claim, profile, NOT_RUNNABLE, None, f"needs {claim.needs}"))
                continue
            if db is None or not db.is_file():
                out.append(Verdict(claim, profile, "inconclusive", None, "no runs yet (no database)"))
                continue
            data = cache.setdefault(db, Data(db))
            out.append(evaluate_claim(claim, profile, data, group_seed(seed, [pack.name, claim.id, profile]),
                                      alpha=alpha, bootstrap=bootstrap))
    return out


def evaluate_claim(claim: Claim, profile: str, data: Data, seed: int, *, alpha: float = sq.ALPHA,
                   bootstrap: bool = True) -> Verdict:
    """One claim's verdict from its anytime-valid interval at level 1 − ``alpha`` (``bootstrap``: with
    the fixed-sample estimate beside it, for the page)."""
    n_boot = st.N_BOOT if bootstrap else 0
    stat = claim.stat
    if stat.reads == st.FLOWS:
        return _flows(claim, profile, data, seed, alpha)
    key = _sample_key(claim)
    if key not in data.samples:     # claims on the same runs share their sample (a replay judges every look)
        data.samples[key] = _sample(claim, data)
    sample, reason = data.samples[key]
    if sample is None:
        return Verdict(claim, profile, "inconclusive", None, "no runs of the claim's labels yet", alpha=alpha)
    estimate = _bootstrap(lambda n: stat.estimate(sample, claim.params, seed=seed, n_boot=n), n_boot)
    sequence = stat.sequence(sample, claim.params, alpha)
    return _judge(claim, profile, estimate, sequence, reason, alpha)


def _sample_key(claim: Claim) -> tuple:
    """What a claim's sample depends on: claims with the same key read the same sample."""
    where = tuple(sorted((k, repr(v)) for k, v in claim.where.items()))
    return (claim.stat.reads, claim.label, claim.baseline, claim.metric, where,
            claim.params.get("loss_direction"), claim.params.get("factor"))


def _sample(claim: Claim, data: Data) -> tuple[pd.DataFrame | st.Runs | None, str]:
    """The claim's sample (pairs, or each label's runs) and what was excluded; None without runs of both labels."""
    frame = _filter_runs(claim, data.classified() if _uses_classes(claim) else data.frame)
    if frame.empty or not {claim.label, claim.baseline} <= set(frame["label"]):
        return None, ""
    if claim.stat.reads == st.RUNS:
        return st.Runs(*(_run_values(frame[frame["label"] == name], claim.metric)
                         for name in (claim.label, claim.baseline))), ""
    return _pair_sample(claim, frame, data)


def _bootstrap(compute, n_boot: int) -> st.Estimate:
    """The fixed-sample estimate; with ``n_boot`` 0 its value and samples only (replays skip the resamples)."""
    estimate = compute(max(n_boot, 1))
    if n_boot == 0:
        estimate.low = estimate.high = math.nan
    return estimate


def _judge(claim: Claim, profile: str, estimate: st.Estimate, sequence: sq.Sequence | None, reason: str,
           alpha: float) -> Verdict:
    if sequence is None:
        why = claim.stat.no_sequence or "no anytime-valid interval"
        return Verdict(claim, profile, "inconclusive", estimate,
                       "; ".join(n for n in (f"{estimate.n} {estimate.unit}", f"no anytime-valid interval: {why}",
                                             reason) if n),
                       None, alpha, NO_SEQUENCE_STOP)
    verdict = sq.decide(sequence.low, sequence.high, claim.compare, claim.threshold, claim.tolerance)
    notes = [f"{sequence.n} {claim.stat.sequence_unit}", estimate.note, reason]
    if verdict == "inconclusive":
        notes.insert(1, "no observations yet" if sequence.n == 0 else "the interval straddles the threshold")
    if sequence.empty:
        notes.append("the running intersection is empty (a coverage failure, probability ≤ α)")
    return Verdict(claim, profile, verdict, estimate, "; ".join(n for n in notes if n), sequence, alpha)


def _uses_classes(claim: Claim) -> bool:
    return "loss_class" in claim.where or "baseline_class" in claim.where


def _filter_runs(claim: Claim, frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    keep = frame["label"].isin([claim.label, claim.baseline])
    for key, wanted in claim.where.items():
        if key == "size":
            keep &= frame["size"].isin(wanted)
        elif key == "loss_class":
            keep &= frame[f"class_{claim.params['loss_direction']}"].isin(wanted)
        elif key != "baseline_class":
            column = key if key in frame else f"factor_{key}"
            keep &= frame[column].map(lambda v, w=wanted: v is not None and not pd.isna(v) and matches(float(v), w))
    out = frame[keep]
    out.attrs.update(frame.attrs)
    return out


def _run_values(runs: pd.DataFrame, metric: str) -> np.ndarray:
    """Finished runs' metric, +inf for timed-out runs of a duration metric, in the order the runs
    started; other runs left out."""
    if "started_at" in runs:
        runs = runs.assign(_at=runs["started_at"].fillna("\uffff").astype(str)).sort_values(["_at", "key"])
    finished = (runs["status"] == "ok") & runs[metric].notna()
    censored = (runs["status"] == "timeout") & (metric in ratios.CENSORED_METRICS)
    values = np.where(censored, np.inf, runs[metric].to_numpy(float) if len(runs) else np.array([]))
    return values[(finished | censored).to_numpy()].astype(float)


def _pair_sample(claim: Claim, frame: pd.DataFrame, data: Data) -> tuple[pd.DataFrame, str]:
    """One row per usable pair: group (point and size), value, base, ratio (+inf/0 where a side timed
    out), the trend factor; and what was excluded."""
    by = ["point", "rep", "size"] if frame["size"].notna().any() else ["point", "rep"]
    pairs = ratios.pairs(frame, baseline=claim.baseline, by=by, metric=claim.metric, labels=[claim.label])
    if "baseline_class" in claim.where:
        classes = data.classified().set_index("key")[f"class_{claim.params['loss_direction']}"]
        pairs = pairs[pairs["baseline_key"].map(classes).isin(claim.where["baseline_class"])]
    # Pairs whose runs were not done yet (pending, interrupted, missing) are not results: not counted.
    why = pairs.loc[pairs["outcome"] == "excluded", "excluded_why"]
    excluded = why[~why.str.contains("pending|interrupted|missing")].value_counts()
    both = int((pairs["outcome"] == "both timed out").sum())
    used = pairs[pairs["outcome"].isin(["finished", "label timed out", "baseline timed out"])]
    label_to = used["outcome"] == "label timed out"
    base_to = used["outcome"] == "baseline timed out"
    sample = pd.DataFrame({
        "group": used["point"].astype(str) + "|" + (used["size"].astype(str) if "size" in used else ""),
        "value": np.where(label_to, np.inf, used["value"]),
        "base": np.where(base_to, np.inf, used["baseline_value"]),
        "ratio": np.where(label_to, np.inf, np.where(base_to, 0.0, used["ratio"]))})
    if "started_at" in frame:  # when the pair was available: the later start of its two runs (planned order)
        started = frame.set_index("key")["started_at"]
        a = used["key"].map(started).fillna("").astype(str).to_numpy()
        b = used["baseline_key"].map(started).fillna("").astype(str).to_numpy()
        later = np.where(a >= b, a, b)
        sample["order"] = np.where(later == "", None, later) if len(later) else []
    factor = claim.params.get("factor")
    if factor:
        column = factor if factor in used else f"factor_{factor}"
        sample["factor"] = used[column].to_numpy(float)
    parts = [f"{n} excluded ({why})" for why, n in excluded.items()]
    if both:
        parts.append(f"{both} with both sides timed out")
    return sample.reset_index(drop=True), ", ".join(parts)


def _flows(claim: Claim, profile: str, data: Data, seed: int, alpha: float) -> Verdict:
    """Foreground flows' DCT with one background label ÷ with another (issue #26's per-flow table)."""
    table = data.flow_table()
    missing = [c for c in FLOW_COLUMNS if c not in table]
    if missing:
        return Verdict(claim, profile, NOT_RUNNABLE, None,
                       f"needs per-flow columns {', '.join(missing)} in fecbench.analysis.studies.flows.flows")
    background = table[table["role"] != claim.params["role"]].groupby("run_key")["label"].first()
    fore = table[table["role"] == claim.params["role"]].assign(background=lambda f: f["run_key"].map(background))
    runs = data.frame.set_index("key")["status"] if not data.frame.empty else pd.Series(dtype=object)
    fore = fore.assign(status=fore["run_key"].map(runs).fillna("ok"))
    runs = st.Runs(*(_run_values(fore[fore["background"] == name], "dct_ms") for name in (claim.label, claim.baseline)))
    estimate = claim.stat.estimate(runs, claim.params, seed=seed)
    return _judge(claim, profile, estimate, claim.stat.sequence(runs, claim.params, alpha),
                  f"foreground DCT with background {claim.label} ÷ with {claim.baseline}", alpha)


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
                                           "expected": expectation(v.claim), "paper": paper_text(v.claim)})
        row[f"{v.profile}: verdict"] = v.verdict
        row[f"{v.profile}: value [anytime CS]"] = v.interval_text()
        row[f"{v.profile}: level"] = f"{1 - v.alpha:.4g}"
        row[f"{v.profile}: looks"] = v.looks
        row[f"{v.profile}: stopped"] = v.stopped
        row[f"{v.profile}: note"] = v.reason
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
