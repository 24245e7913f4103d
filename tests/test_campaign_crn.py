"""Common random numbers: at one (point, repetition), two implementations meet the same loss pattern —
the droppers' verdict logs agree on every packet index both runs sent, and equal the reference model."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.campaign import FECQ, fecbench, rows
from tests.helpers.designs import QUIC_AND_RS, UNIFORM_P, design_file

pytestmark = [pytest.mark.require_root, pytest.mark.slow]


def test_verdict_logs_agree_across_implementations(tmp_path: Path) -> None:
    if not FECQ.exists():
        pytest.skip("fecq is not built (make bootstrap)")
    from fecbench.dropper import Uniform, reference_verdicts

    design = design_file(tmp_path / "crn.toml", seed=11, repetitions=2, timeout_s=30, settings={"verdict_log": True},
                         points=1, factors={"bw": (10, 20), "owd": (5, 10), "p": (0.08, 0.1)}, loss=UNIFORM_P,
                         workload={"kind": "download", "sizes": ["50kB"]}, impls=QUIC_AND_RS)
    db = tmp_path / "crn.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    runs = rows(db, "SELECT * FROM runs")
    assert len(runs) == 4 and all(r["status"] == "ok" for r in runs), [(r["label"], r["error"]) for r in runs]
    p = rows(db, "SELECT p FROM points")[0]["p"]

    logs = {}
    for log in rows(db, "SELECT v.*, r.label, r.repetition, r.loss_seed FROM verdict_logs v "
                        "JOIN runs r ON r.key = v.run_key"):
        records = np.load(io.BytesIO(log["data"]), allow_pickle=False)
        logs[(log["repetition"], log["direction"], log["label"])] = (records, log["loss_seed"])
    assert len(logs) == 2 * 2 * 2  # repetitions × directions × labels

    for repetition in (0, 1):
        for stream, direction in enumerate(("forward", "reverse")):
            a, seed_a = logs[(repetition, direction, "quic")]
            b, seed_b = logs[(repetition, direction, "quic-fec-rs")]
            assert seed_a == seed_b
            assert np.array_equal(a["index"], np.arange(len(a)))  # every packet logged, from index 0
            common = min(len(a), len(b))
            assert common > 10  # a 50 kB download: ~50 data packets one way, ~20 acks the other
            assert np.array_equal(a["verdict"][:common], b["verdict"][:common])
            # ... and both equal the reference model's sequence for this run's seed and stream.
            reference = reference_verdicts(Uniform(p), seed_a, stream, max(len(a), len(b)))
            assert np.array_equal(a["verdict"].astype(bool), reference[:len(a)])
            assert np.array_equal(b["verdict"].astype(bool), reference[:len(b)])
    # The two repetitions have different loss seeds, hence different patterns.
    r0, r1 = logs[(0, "reverse", "quic")][0], logs[(1, "reverse", "quic")][0]
    n = min(len(r0), len(r1))
    assert logs[(0, "reverse", "quic")][1] != logs[(1, "reverse", "quic")][1]
    assert not np.array_equal(r0["verdict"][:n], r1["verdict"][:n]) or r0["verdict"][:n].sum() == 0
