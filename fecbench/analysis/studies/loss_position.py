"""Where did a transfer lose its packets? Loss-position classes from the droppers' verdict logs.

Michel & Bonaventure's Starlink study splits 50 kB uploads into all transfers, transfers with
losses, and transfers with losses among their **last 10 packets** (where a tail loss costs a
retransmission timeout and FEC at the end of a transfer helps most). This module does the same
for any workload and implementation, from the verdict logs a design keeps with ``verdict_log = true``
(table ``verdict_logs``: per run, link and direction, one record per packet the dropper matched,
in stream-index order).

Classes, per run and per log (one link, one direction), exclusive:

- ``no loss``: no packet dropped;
- ``tail loss``: at least one of the last ``k`` packets dropped (default ``k`` = 10);
- ``loss``: packets dropped, none of them among the last ``k``.

"Packets" are every packet the dropper matched during the run (handshake, data, acknowledgements,
close), in the order the dropper saw them. ``min_len`` (bytes, IP length as the dropper records it)
keeps only packets at least that long, e.g. 1000 to look at full-size data packets and ignore
acknowledgements. A direction crossing several lossy links (multipath) takes the worst class of its
links, each link judged on its own packets (the logs of two links have no common order).
Direction ``any`` is the worst class of both directions: ``tail loss`` > ``loss`` > ``no loss``.

``starlink_table`` gives the seed's table, nested as in the slides: all transfers, transfers with
losses (``loss`` or ``tail loss``), transfers with losses in the last k packets (``tail loss``),
with runs, median and 95th percentile of a metric (DCT) per label; its figure, ``class_ecdf``, is in
``figures.loss_position_plots`` (the verdicts classify runs without importing the plotting stack). A run that
reached the time limit counts at +∞ (its verdict log is kept): a quantile that falls among them is +∞ (shown as
``inf``), never a finished value. Failed runs are left out (``status_counts`` says how many).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from fecbench.analysis import results, stats
from fecbench.inputs.directions import CLASS_DIRECTIONS, DATA_DIRECTION

NO_LOSS, LOSS, TAIL = "no loss", "loss", "tail loss"
CLASSES = (NO_LOSS, LOSS, TAIL)
DEFAULT_K = 10
_RANK = {NO_LOSS: 0, LOSS: 1, TAIL: 2}
# The direction that carries a workload's data: where the slides' "last 10 packets" are (a lost
# acknowledgement is not a lost packet of the transfer). reqresp carries data both ways.
DIRECTION_NAMES = {"forward": "client → server", "reverse": "server → client", "any": "either direction"}


def data_direction(classified: pd.DataFrame) -> str:
    """The direction carrying the data of the runs' workload(s); ``any`` when they differ."""
    directions = {DATA_DIRECTION.get(w, "any") for w in classified["workload"].dropna().unique()}
    return directions.pop() if len(directions) == 1 else "any"


def classify(verdicts: Iterable[int] | np.ndarray, k: int = DEFAULT_K) -> str:
    """The class of one packet sequence (1 = dropped), in the order the packets crossed the dropper."""
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k!r}")
    dropped = np.asarray(list(verdicts) if not isinstance(verdicts, np.ndarray) else verdicts).astype(bool)
    if not dropped.any():
        return NO_LOSS
    return TAIL if dropped[-k:].any() else LOSS


def summarise(records: np.ndarray, k: int = DEFAULT_K, min_len: int = 0) -> dict[str, object]:
    """Class, packets, drops and drops among the last ``k`` of one verdict log (fields index, verdict,
    len; sorted by index here, whatever the order given)."""
    records = records[np.argsort(records["index"], kind="stable")]
    if min_len:
        records = records[records["len"] >= min_len]
    verdicts = records["verdict"].astype(bool)
    return {"class": classify(verdicts, k), "packets": int(len(verdicts)), "drops": int(verdicts.sum()),
            "tail_drops": int(verdicts[-k:].sum())}


def worst(classes: Iterable[str]) -> str:
    """The worst of several classes (``no loss`` for none)."""
    return max(classes, key=_RANK.__getitem__, default=NO_LOSS)


def verdict_logs(db: results.DbLike) -> pd.DataFrame:
    """Every stored verdict log: run_key, link, direction and ``records`` (a structured array)."""
    rows = results.rows(db, "verdict_logs", ["run_key", "link", "direction", "data"],
                        order_by=["run_key", "link", "direction"])
    return pd.DataFrame([{"run_key": key, "link": link, "direction": direction,
                          "records": np.load(io.BytesIO(data), allow_pickle=False)}
                         for key, link, direction, data in rows],
                        columns=["run_key", "link", "direction", "records"])


def classify_logs(logs: pd.DataFrame, k: int = DEFAULT_K, min_len: int = 0) -> pd.DataFrame:
    """One row per run with a verdict log: ``class_<d>``, ``packets_<d>``, ``drops_<d>`` and
    ``tail_drops_<d>`` for d in forward, reverse and any (NaN / None where a direction has no log)."""
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k!r}")
    rows: dict[str, dict[str, object]] = {}
    for run_key, group in logs.groupby("run_key", sort=True):
        row: dict[str, object] = {"run_key": run_key}
        seen: list[str] = []
        for direction in ("forward", "reverse"):
            mine = [summarise(r, k, min_len) for r in group.loc[group["direction"] == direction, "records"]]
            if not mine:
                row.update({f"class_{direction}": None, f"packets_{direction}": math.nan,
                            f"drops_{direction}": math.nan, f"tail_drops_{direction}": math.nan})
                continue
            row[f"class_{direction}"] = worst(s["class"] for s in mine)
            for field in ("packets", "drops", "tail_drops"):
                row[f"{field}_{direction}"] = sum(int(s[field]) for s in mine)
            seen.append(direction)
        row["class_any"] = worst(row[f"class_{d}"] for d in seen)
        for field in ("packets", "drops", "tail_drops"):
            row[f"{field}_any"] = sum(row[f"{field}_{d}"] for d in seen)
        rows[str(run_key)] = row
    columns = ["run_key"] + [f"{f}_{d}" for d in CLASS_DIRECTIONS for f in ("class", "packets", "drops", "tail_drops")]
    return pd.DataFrame(list(rows.values()), columns=columns)


def classify_runs(db: results.DbLike, k: int = DEFAULT_K, min_len: int = 0) -> pd.DataFrame:
    """The runs frame of ``results.load`` restricted to runs with a verdict log, with their classes
    (see ``classify_logs``); ``attrs["k"]`` and ``attrs["min_len"]`` say how they were judged."""
    out = with_classes(results.load(db), classify_logs(verdict_logs(db), k, min_len))
    out.attrs.update(k=k, min_len=min_len)
    return out


def with_classes(runs: pd.DataFrame, classes: pd.DataFrame, on: str = "key") -> pd.DataFrame:
    """``runs`` that have classes (``classify_logs``, by ``run_key``), with them; ``on``: the runs' column
    naming the run the classes were judged on (a replay's ``recorded_key``)."""
    out = runs.merge(classes, left_on=on, right_on="run_key", how="inner").drop(columns="run_key")
    out.attrs.update(runs.attrs)
    return out


def quantile(values: np.ndarray, q: float) -> float:
    """Linear-interpolation quantile where +∞ stands for timed-out runs: +∞ as soon as the
    interpolation touches one of them (their true value is unknown), NaN for no values."""
    values = np.sort(np.asarray(values, dtype=float))
    if len(values) == 0:
        return math.nan
    pos = q * (len(values) - 1)
    low, high = math.floor(pos), math.ceil(pos)
    if math.isinf(values[high]):
        return math.inf
    return float(values[low] + (values[high] - values[low]) * (pos - low))


def finished_values(frame: pd.DataFrame, metric: str) -> pd.Series:
    """The metric of finished runs, +∞ for runs that timed out; other runs are not in the result."""
    finished = (frame["status"] == "ok") & frame[metric].notna()
    timed_out = frame["status"] == "timeout"
    return frame[metric].where(finished, math.inf)[finished | timed_out].astype(float)


def nested_rows(k: int) -> dict[str, tuple[str, ...]]:
    """The table's rows (as in the slides) and the classes each one takes."""
    return {"all transfers": CLASSES, "transfers with losses": (LOSS, TAIL),
            f"transfers with losses in the last {k} packets": (TAIL,)}


def starlink_table(classified: pd.DataFrame, direction: str = "any", metric: str = "dct_ms",
                   by: tuple[str, ...] = ("workload", "size")) -> pd.DataFrame:
    """Per ``by`` group and nested class: runs, median and 95th percentile of ``metric`` per label
    (columns ``runs <label>``, ``median <label>``, ``p95 <label>``; timeouts as +∞, see the module)."""
    if direction not in CLASS_DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(CLASS_DIRECTIONS)}, got {direction!r}")
    k = int(classified.attrs.get("k", DEFAULT_K))
    labels = sorted(classified["label"].dropna().unique()) if len(classified) else []
    keys = [c for c in by if c in classified.columns]
    rows = []
    groups = classified.groupby(keys, dropna=False, sort=True) if keys else [((), classified)]
    for group_key, group in groups:
        group_key = group_key if isinstance(group_key, tuple) else (group_key,)
        for row_name, members in nested_rows(k).items():
            row: dict[str, object] = dict(zip(keys, group_key, strict=True))
            row["class"] = row_name
            sub = group[group[f"class_{direction}"].isin(members)]
            for label in labels:
                values = finished_values(sub[sub["label"] == label], metric).to_numpy()
                row[f"runs {label}"] = len(values)
                row[f"median {label}"] = quantile(values, 0.5)
                row[f"p95 {label}"] = quantile(values, 0.95)
            rows.append(row)
    columns = [*keys, "class", *[f"{s} {lbl}" for s in ("runs", "median", "p95") for lbl in labels]]
    return pd.DataFrame(rows, columns=columns)


def paired_tail(classified: pd.DataFrame, baseline: str, direction: str = "any", metric: str = "dct_ms",
                level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """The tail class, paired: every (point, repetition, size) whose ``baseline`` run lost a packet among its
    last k (class tail loss in ``direction``), against each other label's run on the same loss seed,
    whatever that run's own class (a label's repairs shift packet indices, so the same seed hits other
    packets: unpaired classes compare different transfers). Per label: pairs, the median of the per-pair
    ratios label ÷ baseline with its bootstrap interval (timeouts at +∞), the share of pairs the label was
    faster, and both sides' median and p95 over the same pairs."""
    keys = [c for c in results.CONDITION if c in classified.columns]
    values = classified.assign(value=classified[metric].where((classified["status"] == "ok")
                                                               & classified[metric].notna(), math.inf))
    values = values[(values["status"] == "ok") | (values["status"] == "timeout")]
    base = values[(values["label"] == baseline) & (values[f"class_{direction}"] == TAIL)]
    rows = []
    for label in sorted(set(values["label"]) - {baseline}):
        pairs = base[[*keys, "value"]].merge(values[values["label"] == label][[*keys, "value"]], on=keys,
                                             suffixes=("_base", "_label"))
        a, b = pairs["value_label"].to_numpy(float), pairs["value_base"].to_numpy(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios = np.where(np.isinf(a) & np.isinf(b), np.nan, a / b)
        ratios = ratios[~np.isnan(ratios)]
        low, high = stats.bootstrap_median(ratios, level=level, seed=stats.group_seed(seed, label))
        rows.append({"label": label, "baseline": baseline, "pairs": len(pairs),
                     "median_ratio": float(np.median(ratios)) if len(ratios) else math.nan,
                     "ci_low": low, "ci_high": high, "faster_share": float((a < b).mean()) if len(a) else math.nan,
                     f"median {label}": quantile(a, 0.5), f"p95 {label}": quantile(a, 0.95),
                     f"median {baseline}": quantile(b, 0.5), f"p95 {baseline}": quantile(b, 0.95)})
    return pd.DataFrame(rows)
