"""A small results database with hand-made verdict logs (loss-position analysis tests and notebook 05).

Every run is a 50 kB upload with 20 packets forward (the data, 1250 B) and 8 reverse (acks, 60 B);
``LOGS`` says which packet positions each run lost, so the expected classes can be read off:
a drop among positions 10..19 of the 20 forward packets is a loss in the last 10 packets.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from fecbench.dropper.dropper import RECORD_DTYPE
from fecbench.records import db as dbmod
from fecbench.records import run_records

FORWARD, REVERSE = 20, 8
#: run -> (label, status, dct_ms, forward positions dropped, reverse positions dropped)
LOGS = {
    "a": ("none", "ok", 250.0, [], []),            # no loss
    "b": ("none", "ok", 280.0, [3], []),           # loss, early
    "c": ("none", "ok", 400.0, [15], []),          # loss in the last 10
    "d": ("none", "ok", 300.0, [9], []),           # position 9: the 11th from the end -> loss (k = 10)
    "e": ("none", "timeout", None, [19], []),      # last packet lost, never finished
    "f": ("fec", "ok", 245.0, [], []),
    "g": ("fec", "ok", 270.0, [2], [7]),           # forward loss, reverse tail loss -> any: tail
    "h": ("fec", "ok", 290.0, [12, 13], []),
    "i": ("fec", "failed", None, [18], []),        # failed: classified, never in the DCT table
}
#: The classes the module documents for LOGS with k = 10 (forward, reverse, any).
EXPECTED = {"a": ("no loss", "no loss", "no loss"), "b": ("loss", "no loss", "loss"),
            "c": ("tail loss", "no loss", "tail loss"), "d": ("loss", "no loss", "loss"),
            "e": ("tail loss", "no loss", "tail loss"), "f": ("no loss", "no loss", "no loss"),
            "g": ("loss", "tail loss", "tail loss"), "h": ("tail loss", "no loss", "tail loss"),
            "i": ("tail loss", "no loss", "tail loss")}


def records(count: int, dropped: list[int], length: int, *, shuffle: int | None = None) -> np.ndarray:
    """A verdict log of ``count`` packets (indices 0..count-1) with ``dropped`` positions lost."""
    out = np.zeros(count, dtype=RECORD_DTYPE)
    out["index"] = np.arange(count)
    out["verdict"][dropped] = 1
    out["len"] = length
    if shuffle is not None:  # the ring buffer may deliver records out of order
        out = out[np.random.default_rng(shuffle).permutation(count)]
    return out


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array[["index", "verdict", "state", "len"]], allow_pickle=False)
    return buffer.getvalue()


def make_loss_position_db(path: Path) -> Path:
    conn = dbmod.connect(path)
    with dbmod.transaction(conn):
        cid = dbmod.insert_campaign(conn, name="uploads", design_path="designs/uploads.toml",
                                    design_text='[design]\nname = "uploads"\ntimeout_s = 10\n',
                                    design_hash="h" * 64, fecbench_version="test", git_sha="test",
                                    created_at="2026-01-01T00:00:00Z", host_json={}, impls_json={},
                                    plan_json={}, seed=1, repetitions=9, topology="single", link_backend="netem")
        dbmod.insert_points(conn, cid, [{"point": 0}])
    for rep, (run, (label, status, dct, fwd, rev)) in enumerate(LOGS.items()):
        key = f"run-{run}"
        with dbmod.transaction(conn):
            run_records.insert_pending_runs(conn, [{
                "key": key, "campaign_id": cid, "point": 0, "impl": "fecq", "label": label,
                "impl_args": json.dumps({"fec": label}), "workload": "upload", "size": 50_000,
                "repetition": rep, "loss_seed": rep}])
        run_records.start_run(conn, key, "2026-01-01T00:00:00Z", "netem", "test")
        run_records.finish_run(conn, key, status=status, error=None, server_log_tail="", client_log_tail="",
                         finished_at="2026-01-01T00:00:01Z", duration_s=1.0,
                         metrics=None if dct is None else {"dct_ms": dct},
                         verdict_logs=[("bottleneck", "forward", npy(records(FORWARD, fwd, 1250, shuffle=rep))),
                                       ("bottleneck", "reverse", npy(records(REVERSE, rev, 60)))])
    conn.close()
    return path
