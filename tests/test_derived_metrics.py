"""Metrics derived from a run's record (fecbench.analysis.derived): the coding overhead and a file's end-to-end
time, read from real databases through ``results.load`` and checked by hand on rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fecbench.analysis import derived, results

ROOT = Path(__file__).resolve().parent.parent


def test_coding_overhead_is_repairs_over_every_datagram_the_sender_wrote() -> None:
    frame = pd.DataFrame({"repair_sent": [25, 0, None, 5], "packets_sent": [100, 80, 90, 0]})
    overhead = derived.with_derived_metrics(frame)["coding_overhead"].to_numpy(float)
    assert overhead[:2].tolist() == [0.25, 0.0] and np.isnan(overhead[2:]).all()
    assert "coding_overhead" not in derived.with_derived_metrics(pd.DataFrame({"dct_ms": [1.0]}))


def test_a_files_end_to_end_time_counts_the_set_up_once_over_the_files_fetched() -> None:
    frame = pd.DataFrame({"workload": ["reqresp", "download", "upload", "messages", "reqresp", "reqresp"],
                          "exchanges": [5, None, None, None, None, 4],
                          "setup_ms": [100.0, 100.0, 50.0, 100.0, 100.0, None],
                          "dct_ms": [900.0, 400.0, 250.0, 900.0, 900.0, 400.0]})
    e2e = derived.with_derived_metrics(frame)["file_e2e_ms"].to_numpy(float)
    # five files share one handshake; a download or an upload is one file; messages, or no count, or no set-up time:
    # unknown, never guessed
    assert e2e[:3].tolist() == [200.0, 500.0, 300.0] and np.isnan(e2e[3:]).all()


def test_the_short_messages_golden_runs_have_a_per_file_time_beside_the_connections() -> None:
    frame = results.load(ROOT / "golden" / "short-messages.sqlite")
    ok = frame[frame["status"] == "ok"]
    assert len(ok) and (ok["exchanges"] == 5).all()
    expected = (ok["setup_ms"] + ok["dct_ms"]) / 5
    assert np.allclose(ok["file_e2e_ms"], expected)
    # the first file pays the handshake: a file's time is more than a fifth of the five exchanges
    assert (ok["file_e2e_ms"] > ok["dct_ms"] / 5).all()
