"""Each label is compared within its own implementation (fecbench.analysis.baselines), and a headline
sentence whose interval holds 1 says "no clear difference" (the report once compared XQUIC with FEC
against fecq without it, changing two things at once, and said "faster at 3 of 4 points" of a tie)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from fecbench.analysis.baselines import baselines, comparisons
from fecbench.analysis.report import build, sentences
from fecbench.records import db as dbmod

FECQ = {"name": "fecq", "fec_args": ["fec", "signal"]}
XQUIC = {"name": "xquic", "fec_args": ["fec", "fec_rate"]}


def test_a_fec_label_is_compared_with_its_own_stack_without_fec() -> None:
    impls = {"quic": {**FECQ, "args": {"fec": "none", "cc": "cubic"}},
             "quic-rs": {**FECQ, "args": {"fec": "rs:30,20", "signal": "hide", "cc": "cubic"}},
             "quic-rs-bbr": {**FECQ, "args": {"fec": "rs:30,20", "cc": "bbr"}},   # two things differ
             "xquic": {**XQUIC, "args": {"fec": "none"}},
             "xquic-rs": {**XQUIC, "args": {"fec": "rs", "fec_rate": "0.5"}},
             "xquic-pm": {**XQUIC, "args": {"fec": "pm"}, "baseline": "quic"}}   # the design asked
    assert baselines(impls, default="quic") == {"quic": None, "quic-rs": "quic", "quic-rs-bbr": None,
                                                "xquic": None, "xquic-rs": "xquic", "xquic-pm": "quic"}
    groups, unpaired = comparisons(impls, sorted(impls), "quic")
    assert groups == {"quic": ["quic-rs", "xquic-pm"], "xquic": ["xquic-rs"]} and unpaired == ["quic-rs-bbr"]
    assert comparisons(impls, ["quic", "xquic-rs"], "quic") == ({}, ["xquic-rs"])   # never across stacks
    assert comparisons(impls, ["quic", "xquic-rs"], "quic", explicit="quic")[0] == {"quic": ["xquic-rs"]}


def _db(path: Path) -> Path:
    """A download campaign of fecq without FEC and XQUIC with FEC (labels quic, xquic-rs) on 4 points."""
    conn = dbmod.connect(path)
    conn.execute("INSERT INTO campaigns (id, name, design_text, design_hash, seed, repetitions) "
                 "VALUES (1, 'x', '[design]', 'h', 1, 3)")
    conn.execute("ALTER TABLE points ADD COLUMN bw REAL")
    rng = np.random.default_rng(1)
    for point in range(4):
        conn.execute("INSERT INTO points (campaign_id, point, bw) VALUES (1, ?, ?)", (point, 1.0 + point))
        for label, impl, args in (("quic", "fecq", {"fec": "none"}), ("xquic-rs", "xquic", {"fec": "rs"})):
            for rep in range(3):
                key = f"{label}{point}{rep}"
                conn.execute("INSERT INTO runs (key, campaign_id, point, impl, label, impl_args, workload, size, "
                             "repetition, loss_seed, status) VALUES (?, 1, ?, ?, ?, ?, 'download', 1000, ?, ?, "
                             "'ok')", (key, point, impl, label, json.dumps(args), rep, rep + 1))
                conn.execute("INSERT INTO metrics (run_key, dct_ms) VALUES (?, ?)", (key, 100 + rng.normal(0, 5)))
    conn.close()
    return path


def test_the_report_never_pairs_two_stacks_unasked(tmp_path: Path) -> None:
    written = build(_db(tmp_path / "x.sqlite"), tmp_path / "out")
    assert not any(name.startswith("DCT: ratio of medians") for name in written.headline)
    assert any(s.startswith("xquic-rs: no label of the same implementation without FEC") for s in written.sentences)
    asked = build(tmp_path / "x.sqlite", tmp_path / "asked", baseline="quic")   # the user asks: compared
    assert "DCT: ratio of medians label / quic per design point" in asked.headline


def test_a_tie_is_no_clear_difference() -> None:
    points = pd.DataFrame({"label": "rs", "size": 1000, "workload": "download", "seeds": 3,
                           "ratio": [0.97, 1.02, 0.98, 1.01, 0.99, 1.03],
                           "ratio_low": [0.9, 0.95, 0.92, 0.96, 0.93, 0.97],
                           "ratio_high": [0.99, 1.08, 0.995, 1.06, 0.999, 1.09], "state": "exact"})
    pairs = pd.DataFrame({"label": "rs", "size": 1000, "outcome": ["finished"] * 18, "excluded_why": None})
    first = sentences.downloads(points, pairs, "quic", seed=1)[0]
    assert first.startswith("rs: no clear difference from quic for 1 kB downloads (median ratio ")
    assert "faster at 3–6 of 6 design points" in first   # ratio_high < 1 at 3, ratio_low < 1 at 6
    slower = sentences.downloads(points.assign(ratio=points["ratio"] + 0.5, ratio_low=points["ratio_low"] + 0.5,
                                               ratio_high=points["ratio_high"] + 0.5), pairs, "quic", seed=1)[0]
    assert slower.startswith("rs was slower than quic for 1 kB downloads")
