"""What a multipath comparison leaves out, said where it changes the answer (issue 62 item 7).

Per multipath label and size, against its single-path twin (``baselines.single_path_twin``), from its ok runs:

- **set-up time**: ``dct_ms`` counts from the first request, so the paths' set-up before it (``setup_ms``: client
  start to first request) is left out; when the multipath label's median set-up exceeds its twin's by more than a
  tenth of its median DCT, the difference is said, with both median client wall times;
- **queue drops**: packets the bottleneck queues dropped in the data's direction (losses by cause); when the
  multipath label's median exceeds its twin's by ``QUEUE_DROPS`` or more, said: its own traffic overflowed the
  queues, which the ratio of DCTs charges to multipath, not to the link's losses;
- **repairs in path shares**: a multipath label with FEC counts its repairs as traffic of the path that carried
  them (XQUIC with FEC keeps its second path for repairs), so a path's share is not its share of the data.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from fecbench.analysis import baselines
from fecbench.analysis.figures.style import format_size
from fecbench.analysis.traces import losses

#: Queue drops per run (median, data direction) above the single-path twin's from which the report says so.
QUEUE_DROPS = 5


def multipath(db: Path, downloads: pd.DataFrame, impls: dict[str, dict]) -> list[str]:
    """The sentences (see the module), one per multipath label and size where a caveat applies."""
    ok = downloads[downloads["status"] == "ok"]
    dropped = _queue_drops(db, ok)
    out = []
    for label in sorted(set(ok["label"])):
        if label not in impls or not baselines.is_multipath(impls[label]):
            continue
        if baselines.has_fec(impls[label]):    # whether or not it has a single-path twin to set beside it
            out.append(f"{label}: its path shares count its FEC repairs as traffic of the path that carried them "
                       "(a stack may keep a path for repairs): a path's share is not its share of the data.")
        twin = baselines.single_path_twin(label, impls).baseline
        if twin is None or twin not in set(ok["label"]):
            continue
        for size in sorted(set(ok.loc[ok["label"] == label, "size"])):
            mine, theirs = (ok[(ok["label"] == x) & (ok["size"] == size)] for x in (label, twin))
            said = [s for s in (_setup(mine, theirs, twin), _queue(dropped, mine, theirs, twin)) if s]
            if said:
                out.append(f"{label} against {twin} for {format_size(size)}: " + "; ".join(said) + ".")
    return out


def _median(frame: pd.DataFrame, column: str) -> float:
    return float(frame[column].median()) if column in frame and frame[column].notna().any() else math.nan


def _setup(mine: pd.DataFrame, theirs: pd.DataFrame, twin: str) -> str:
    setup, twin_setup, dct = _median(mine, "setup_ms"), _median(theirs, "setup_ms"), _median(mine, "dct_ms")
    if any(math.isnan(v) for v in (setup, twin_setup, dct)) or setup - twin_setup <= dct / 10:
        return ""
    wall, twin_wall = _median(mine, "client_wall_ms"), _median(theirs, "client_wall_ms")
    walls = "" if math.isnan(wall) or math.isnan(twin_wall) else \
        f"; client wall time {wall:.0f} against {twin_wall:.0f} ms"
    return (f"its set-up before the first request takes {setup:.0f} ms (median) against {twin_setup:.0f} ms, which "
            f"dct_ms leaves out{walls}")


def _queue_drops(db: Path, ok: pd.DataFrame) -> pd.DataFrame:
    table = losses.run_losses(db)
    if table.empty:
        return table
    table = table.merge(ok[["key", "workload"]], left_on="run_key", right_on="key")
    column = table["workload"].map({"download": "queue_reverse", "upload": "queue_forward"})
    table["queue_data"] = [row[c] if isinstance(c, str) else math.nan for (_, row), c in zip(table.iterrows(),
                                                                                                column, strict=True)]
    return table[["key", "queue_data"]]


def _queue(dropped: pd.DataFrame, mine: pd.DataFrame, theirs: pd.DataFrame, twin: str) -> str:
    if dropped.empty:
        return ""
    ours = dropped[dropped["key"].isin(mine["key"])]["queue_data"].astype(float)
    other = dropped[dropped["key"].isin(theirs["key"])]["queue_data"].astype(float)
    if ours.isna().all() or other.isna().all() or ours.median() - other.median() < QUEUE_DROPS:
        return ""
    return (f"the bottleneck queues dropped a median {ours.median():.0f} of its packets in the data's direction "
            f"against {other.median():.0f} for {twin}: its own traffic overflowed them, which the ratio charges to "
            "multipath, not to the link's losses (losses by cause)")
