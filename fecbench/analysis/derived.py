"""Metrics a run's record holds through others, derived where the runs are loaded (``results.load``) so the
analysis, the tables and the claims read one definition.

- ``coding_overhead``: the data sender's coded (repair) datagrams ÷ every datagram it sent
  (``repair_sent ÷ packets_sent``; rQUIC's Eq. 5 counts only the protected and coded ones, a few handshake and
  ACK-only datagrams fewer); unknown where either is.
- ``file_e2e_ms``: a file's end-to-end time as a client fetching files one after another reports it on
  average: the connection's set-up (``setup_ms``: the client's start to its first request, the handshake
  included) and its transfers (``dct_ms``), over the files it fetched (a request/response run's planned
  ``exchanges``; one for a download or an upload). The first file pays the handshake, the later ones run on
  the window the first opened. Unknown for other workloads and for a stack that reports no set-up time;
  a run that reached its time limit has none (its limit bounds the connection, not a file).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The columns derived here (a design factor of the same name becomes ``factor_<name>``).
METRICS = ("coding_overhead", "file_e2e_ms")
#: Files a run of each workload fetched, where the record does not say (request/response: ``exchanges``).
ONE_FILE = ("download", "upload")


#: What each derived column is computed from: a frame without those columns keeps what it has (a replay's).
INPUTS = {"coding_overhead": ("packets_sent", "repair_sent"), "file_e2e_ms": ("workload", "setup_ms", "dct_ms")}


def _numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(float)


def _files(frame: pd.DataFrame) -> np.ndarray:
    """How many files each run fetched: one for a download or an upload, a request/response's exchanges."""
    workload = frame["workload"].astype(object)
    return np.where(workload.isin(ONE_FILE).to_numpy(), 1.0,
                    np.where((workload == "reqresp").to_numpy(), _numbers(frame, "exchanges"), np.nan))


def with_derived_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the columns of ``METRICS`` whose inputs it has (see the module), NaN where a run's record
    cannot give them."""
    have = {name for name, inputs in INPUTS.items() if set(inputs) <= set(frame.columns)}
    with np.errstate(divide="ignore", invalid="ignore"):
        if "coding_overhead" in have:
            sent = _numbers(frame, "packets_sent")
            frame = frame.assign(coding_overhead=np.where(sent > 0, _numbers(frame, "repair_sent") / sent, np.nan))
        if "file_e2e_ms" in have:
            files = _files(frame)
            total = _numbers(frame, "setup_ms") + _numbers(frame, "dct_ms")
            frame = frame.assign(file_e2e_ms=np.where(files > 0, total / files, np.nan))
    return frame
