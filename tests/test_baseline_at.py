"""One label across two points (issue 70, item 3; pure logic): a claim whose baseline runs at another design point
(`baseline_at`), e.g. QUIC at 3 % loss against QUIC at 0 %, the same size and seeds. Its cells pair each of the
claim's points with the point that differs only in the factors it sets; its units read the two runs there."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench.inputs.errors import SpecError
from fecbench.verdicts import draws as dr
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts.pack import Claim, Source, load_pack
from tests.test_reproduce import CLAIM, _pack

SPACE = dr.DrawSpace(points={0: {"p": 0.0, "owd": 50.0}, 1: {"p": 0.03, "owd": 50.0}, 2: {"p": 0.07, "owd": 50.0},
                             3: {"p": 0.03, "owd": 80.0}},
                     sizes=(1000,), seed=70, repetitions=10)


def _claim(**kw) -> Claim:
    return Claim(id="c", text="t", design="d", statistic="median_point_ratio", label="quic", baseline="quic",
                 metric="dct_ms", where={"p": [0.03]}, compare=">", threshold=5.0, tolerance=0.0,
                 source=Source("x", "s", "", "q"), params={"min_seeds": 3, "loss_direction": "any"},
                 baseline_at={"p": 0.0}, **kw)


def test_each_point_is_paired_with_the_point_that_differs_only_in_the_factors_set() -> None:
    cells = dr.claim_cells(_claim(), SPACE)
    assert cells == [(1, 0, 1000)]          # p = 0.03 at 50 ms against p = 0 at 50 ms; 80 ms has no p = 0 point
    unit = dr.draws(_claim(), SPACE)[0].units[0]
    assert unit.mine[0] == 1 and unit.base[0] == 0 and unit.mine[1] == unit.base[1]     # the same seed
    assert unit.mine[3] == unit.base[3] == "quic"


def test_the_verdict_reads_the_label_at_both_points() -> None:
    rng = np.random.default_rng(70)
    rows = []
    for rep in range(60):
        for point, p in ((0, 0.0), (1, 0.03), (2, 0.07)):
            value = 1200.0 * (12.7 if point == 1 else 1.0) * math.exp(0.1 * rng.standard_normal())
            rows.append({"key": f"{point}-{rep}", "point": point, "repetition": rep, "size": 1000, "label": "quic",
                         "status": "ok", "dct_ms": value, "timeout_s": 900.0, "p": p, "owd": 50.0, "retried": False})
    frame = pd.DataFrame(rows)
    frame.attrs.update(factors=["p", "owd"], labels=["quic"], sizes=[1000])
    verdict = ev.evaluate_claim(_claim(), "p", ev.Data(Path("/nonexistent"), frame), SPACE, seed=1, alpha=0.05,
                                bootstrap=False)
    assert verdict.verdict == "holds", verdict.reason
    assert verdict.estimate.value == pytest.approx(12.7, rel=0.1)


@pytest.mark.parametrize(("more", "problem"), [
    ('baseline_at = { nope = 0 }', "no factor 'nope'"),
    ('baseline_at = { p = "zero" }', "baseline_at.p"),
])
def test_a_bad_baseline_point_is_refused(tmp_path: Path, more: str, problem: str) -> None:
    with pytest.raises(SpecError, match=problem):
        load_pack(_pack(tmp_path, CLAIM.format(more=more)))


def test_a_label_against_itself_needs_another_point(tmp_path: Path) -> None:
    claim = CLAIM.format(more="").replace('"quic-fec-rs"', '"quic"')
    with pytest.raises(SpecError, match="with itself"):
        load_pack(_pack(tmp_path, claim))
    factor = next(iter(load_pack(_pack(tmp_path / "b", CLAIM.format(more=""))).designs["d"].factors))
    loaded = load_pack(_pack(tmp_path / "c", claim.replace('compare = "<"', f'baseline_at = {{ {factor} = 1 }}\n'
                                                                            '    compare = "<"')))
    assert loaded.claims[0].baseline_at == {factor: 1.0}


def test_the_short_messages_loss_cost_claim_is_runnable() -> None:
    claim = next(c for c in load_pack("short-messages").claims if c.id == "quic-3pct-1MB-13x-slower")
    assert not claim.needs and claim.label == claim.baseline == "quic" and claim.baseline_at == {"p": 0.0}
