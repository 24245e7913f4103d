"""Issue 62 (7): what a multipath comparison leaves out, said in the report's sentences where it changes the answer."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fecbench.analysis.report import caveats
from fecbench.analysis.traces import losses

IMPLS = {"fecq-sp": {"name": "fecq", "args": {"fec": "none"}, "fec_args": ["fec"]},
         "fecq-mp": {"name": "fecq", "args": {"fec": "none", "multipath": "on", "scheduler": "min-rtt"},
                     "fec_args": ["fec"]},
         "fecq-mp-rs": {"name": "fecq", "args": {"fec": "rs:30,20", "multipath": "on", "scheduler": "min-rtt"},
                        "fec_args": ["fec"]},
         "fecq-sp-rs": {"name": "fecq", "args": {"fec": "rs:30,20"}, "fec_args": ["fec"]}}


def _runs() -> pd.DataFrame:
    rows = []
    for label, setup, wall, queue in (("fecq-sp", 20, 218, 0), ("fecq-mp", 120, 321, 114),
                                      ("fecq-sp-rs", 20, 230, 0), ("fecq-mp-rs", 25, 240, 2)):
        for rep in range(5):
            rows.append({"key": f"{label}-{rep}", "label": label, "size": 100_000, "status": "ok",
                         "workload": "download", "dct_ms": 200.0, "setup_ms": float(setup),
                         "client_wall_ms": float(wall), "queue": queue})
    return pd.DataFrame(rows)


def test_set_up_time_queue_drops_and_repairs_are_said(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _runs()
    monkeypatch.setattr(losses, "run_losses", lambda db: pd.DataFrame(
        {"run_key": runs["key"], "queue_reverse": runs["queue"], "queue_forward": 0}))
    said = caveats.multipath(Path("unused.sqlite"), runs, IMPLS)
    mp = next(s for s in said if s.startswith("fecq-mp against fecq-sp for 100 kB"))
    assert "set-up before the first request takes 120 ms (median) against 20 ms, which dct_ms leaves out" in mp
    assert "client wall time 321 against 218 ms" in mp
    assert "the bottleneck queues dropped a median 114 of its packets in the data's direction against 0" in mp
    # the RS pair sets up alike and drops alike: nothing to say of either, but its repairs in the path shares
    assert not any(s.startswith("fecq-mp-rs against") for s in said)
    assert any(s.startswith("fecq-mp-rs: its path shares count its FEC repairs") for s in said)
    assert not any(s.startswith("fecq-sp") for s in said)   # single path: nothing left out


def test_the_repair_caveat_is_said_without_a_single_path_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 72 item 5: XQUIC's FEC labels on two paths had no single-path FEC twin, and the repair caveat was
    skipped with the comparison it does not need."""
    runs = _runs()
    runs = runs[runs["label"] != "fecq-sp-rs"]
    monkeypatch.setattr(losses, "run_losses", lambda db: pd.DataFrame(
        {"run_key": runs["key"], "queue_reverse": runs["queue"], "queue_forward": 0}))
    impls = {k: v for k, v in IMPLS.items() if k != "fecq-sp-rs"}
    said = caveats.multipath(Path("unused.sqlite"), runs, impls)
    assert any(s.startswith("fecq-mp-rs: its path shares count its FEC repairs") for s in said), said
