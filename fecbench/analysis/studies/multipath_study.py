"""Multipath against single path, label by label (the thesis's §5.9 study).

A campaign like ``designs/thesis2018-multipath.toml`` runs several multipath labels (round-robin,
min-RTT, with and without FEC) next to single-path ones. Each multipath label is compared with its
**single-path twin** (``fecbench.analysis.baselines``, the report's rule): the single-path label of the
same implementation with the same FEC code whose every argument it repeats with the same value, the
multipath ones aside (``sp-rs`` = fecq ``fec = rs:30,20`` is the
twin of ``mp-rr-rs`` = the same plus ``multipath = on, scheduler = round-robin``), on the same
design points and loss patterns. Comparing ``mp-rr-rs`` with a single path *without* FEC would mix
two effects.

``setup(runs)`` puts the time before the transfer beside it: a multipath client may wait for its paths
before its request (fecq opens every path first: ``setup_ms``), which ``dct_ms`` (request → last byte)
leaves out, so each multipath label's medians of ``handshake_ms``, ``setup_ms``, ``dct_ms`` and the
client's wall time are shown against its twin's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fecbench.analysis import baselines, ratios


def twins(runs: pd.DataFrame, impls: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """Each multipath label → its single-path twin (``baselines.single_path_twin``: the same implementation,
    multipath off, the same FEC code, every argument the single-path label sets set alike in the multipath
    label; of several, the one setting the most; two equally close: none), or the design's named one.
    ``impls``: ``baselines.recorded_impls(db)`` (default: read from the runs' ``impl_args``)."""
    known = set(runs["label"])
    impls = {k: v for k, v in (baselines.from_runs(runs) if impls is None else impls).items() if k in known}
    return dict(sorted(baselines.of_kind(baselines.twins(impls), baselines.SINGLE_PATH).items()))


def pairs(runs: pd.DataFrame, metric: str, by: Sequence[str] = ("point", "rep"),
          twin_of: dict[str, str] | None = None) -> pd.DataFrame:
    """Every pair (condition × multipath label) against the label's twin (``twin_of``, default
    ``twins(runs)``), as ``ratios.pairs``: ``ratio`` = multipath ÷ single path (above 1: more data
    received, or more re-buffering)."""
    frames = [ratios.pairs(runs, baseline=base, by=by, metric=metric, labels=[label])
              for label, base in (twins(runs) if twin_of is None else twin_of).items()]
    if not frames:
        return pd.DataFrame(columns=["label", "baseline", "outcome", "ratio"])
    out = pd.concat(frames, ignore_index=True)
    out.attrs.update(frames[0].attrs)
    return out


#: The times a multipath comparison shows: before the transfer (handshake, set-up: the paths opened), the
#: transfer itself, and the client's whole life (fecbench's own measurement, any implementation).
SETUP_METRICS = ("handshake_ms", "setup_ms", "dct_ms", "client_wall_ms")


def setup(runs: pd.DataFrame, twin_of: dict[str, str] | None = None) -> pd.DataFrame:
    """Per multipath label and size: its ok runs' medians of ``SETUP_METRICS`` (``<metric>_mp``), its twin's
    (``<metric>_sp``), and the difference (``<metric>_added``: multipath − single path), so that a multipath
    penalty outside ``dct_ms`` (paths opened before the request, a wait before the first packet) shows.
    A metric the implementation does not report is NaN."""
    ok = runs[runs["status"] == "ok"]
    rows = []
    for label, base in (twins(runs) if twin_of is None else twin_of).items():
        for size, group in ok[ok["label"].isin([label, base])].groupby("size", dropna=False):
            row: dict[str, object] = {"label": label, "baseline": base, "size": size,
                                      "runs_mp": int((group["label"] == label).sum()),
                                      "runs_sp": int((group["label"] == base).sum())}
            for metric in SETUP_METRICS:
                values = {side: pd.to_numeric(group.loc[group["label"] == name, metric], errors="coerce").dropna()
                          if metric in group else pd.Series(dtype=float)
                          for side, name in (("mp", label), ("sp", base))}
                medians = {side: float(v.median()) if len(v) else np.nan for side, v in values.items()}
                row.update({f"{metric}_mp": medians["mp"], f"{metric}_sp": medians["sp"],
                            f"{metric}_added": medians["mp"] - medians["sp"]})
            rows.append(row)
    columns = ["label", "baseline", "size", "runs_mp", "runs_sp",
               *(f"{m}_{side}" for m in SETUP_METRICS for side in ("mp", "sp", "added"))]
    return pd.DataFrame(rows, columns=columns)


def loss_factors(runs: pd.DataFrame) -> list[str]:
    """The design factors that describe each path's losses and delay (p, r, owd, or their per-path
    forms p_1, p_2, …) and vary in the campaign: the x axes of the ratio against the loss setting."""
    factors = runs.attrs.get("factors", [])
    bases = ("p", "r", "k", "h", "owd")
    return [f for f in factors if (f in bases or f.rsplit("_", 1)[0] in bases)
            and f in runs and runs[f].nunique() > 1]


def recoveries(per_path: pd.DataFrame) -> pd.DataFrame:
    """Per multipath label and path, from ``path_metrics`` (ok runs): the server's share of its
    datagrams on the path, repairs it sent there, and what the client lost and rebuilt there
    (medians and sums over runs)."""
    client = per_path[(per_path["status"] == "ok") & (per_path["side"] == "client")]
    server = per_path[(per_path["status"] == "ok") & (per_path["side"] == "server")]
    sent = server.groupby(["label", "path"]).agg(
        runs=("key", "nunique"), server_share_median=("share_sent", "median"),
        repair_sent_sum=("repair_sent", "sum"))
    rebuilt = client.groupby(["label", "path"]).agg(
        client_recovered_sum=("recovered", "sum"), client_recovered_median=("recovered", "median"))
    return sent.join(rebuilt, how="outer").reset_index()
