"""rQUIC's buffer timeout (BTO) swept, as rQUIC 2021 §VI-E (Figs. 12, 13) reads it: each coded run's completion rate
ξ against the BTO it ran with (designs/rquic2021-bto.toml; quic-impls/rquic/README.md, `bto_ms`, `bto_rtts`).

- ``completion_rates(runs, baseline)``: one row per ok run of an rQUIC label with coding, its point's RTT
  (``rtt_ms`` = 2 × ``owd``), its BTO in ms (``bto_ms``; ``bto_rtts`` × that RTT; rQUIC's own rule, max_ack_delay −
  1 ms = 25 ms, where neither is set: ``bto_rule`` says which) and ξ, its completion time ÷ the *average*
  completion time of the ``baseline`` label's ok runs at the same point and size (the paper's Eq. 4);
- ``rate_summary(rates)``: per point, size and label, the mean ξ (what the paper plots) and the median, with the
  number of runs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

#: rQUIC's own BTO: max_ack_delay (26 ms in its quic-go) − its 1 ms margin (§III, Eq. 2).
RULE_BTO_MS = 25.0
COLUMNS = ["key", "label", "point", "size", "repetition", "owd", "rtt_ms", "bw", "p", "bto_ms", "bto_rule", "dct_ms",
           "xi"]


def _bto(args: dict, rtt_ms: float) -> tuple[float, str]:
    """The BTO in ms a label's arguments ask for at a point of this RTT, and by which rule."""
    if args.get("bto_rtts") not in (None, "", "0"):
        return float(args["bto_rtts"]) * rtt_ms, "rtt"
    if args.get("bto_ms") not in (None, "", "0"):
        return float(args["bto_ms"]), "fixed"
    return RULE_BTO_MS, "rquic"


def completion_rates(runs: pd.DataFrame, baseline: str = "rquic") -> pd.DataFrame:
    """ξ of every ok coded rQUIC run of ``runs`` (``results.load``'s frame) against ``baseline``'s average."""
    ok = runs[(runs["status"] == "ok") & runs["dct_ms"].notna()]
    if ok.empty or "owd" not in ok or baseline not in set(ok["label"]):
        return pd.DataFrame(columns=COLUMNS)
    average = ok[ok["label"] == baseline].groupby(["point", "size"])["dct_ms"].mean()
    rows = []
    for run in ok[(ok["impl"] == "rquic") & (ok["label"] != baseline)].itertuples():
        args = json.loads(run.impl_args) if isinstance(run.impl_args, str) and run.impl_args else {}
        if args.get("fec", "none") == "none" or (run.point, run.size) not in average.index:
            continue
        rtt_ms = 2.0 * float(run.owd)   # the point's configured RTT: its one-way delay each way
        bto_ms, rule = _bto(args, rtt_ms)
        rows.append({"key": run.key, "label": run.label, "point": run.point, "size": run.size,
                     "repetition": run.repetition, "owd": run.owd, "rtt_ms": rtt_ms, "bw": getattr(run, "bw", np.nan),
                     "p": getattr(run, "p", np.nan), "bto_ms": bto_ms, "bto_rule": rule, "dct_ms": run.dct_ms,
                     "xi": float(run.dct_ms) / float(average[(run.point, run.size)])})
    return pd.DataFrame(rows, columns=COLUMNS)


def rate_summary(rates: pd.DataFrame) -> pd.DataFrame:
    """Per point, size and label: its BTO, the runs, the mean ξ (the paper's figures) and the median ξ."""
    keys = ["point", "size", "owd", "rtt_ms", "bw", "p", "label", "bto_ms", "bto_rule"]
    if rates.empty:
        return pd.DataFrame(columns=[*keys, "runs", "mean_xi", "median_xi"])
    grouped = rates.groupby(keys, sort=True, dropna=False)["xi"]
    out = grouped.agg(runs="size", mean_xi="mean", median_xi="median").reset_index()
    return out.sort_values(["point", "size", "bto_ms"]).reset_index(drop=True)
