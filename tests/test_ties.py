"""Ties that are ties (issue 69, item 2; pure logic): every share statistic counts a ratio within the claim's tie
margin of 1 as a tie, never a hit; the margin is never 0 and always has a source."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section
from fecbench.verdicts import statistics
from fecbench.verdicts.pack import load_pack
from fecbench.verdicts.statistics import ties

ALPHA = 0.05


def _pairs(ratios: list[float]) -> pd.DataFrame:
    base = np.full(len(ratios), 100.0)
    value = base * np.asarray(ratios)
    return pd.DataFrame({"draw": range(len(ratios)), "group": 0, "value": value, "base": base, "ratio": ratios,
                         "value_lo": value, "value_hi": value, "base_lo": base, "base_hi": base,
                         "ratio_lo": ratios, "ratio_hi": ratios})


def test_a_loss_free_block_at_0_999_is_a_tie_not_below_one() -> None:
    # networking2019's Fig. 8 claim: FEC always costs without loss. Loss-free 1 kB blocks sit at 0.998-1.002; one of
    # three below 1 by timing noise alone used to count as FEC faster.
    claim = next(c for c in load_pack("networking2019").claims if c.id == "fig8-fec-costs-without-loss")
    stat = claim.stat
    assert stat.shares and claim.params["tie_margin"] == 0.01
    blocks = np.array([0.999, 1.002, 0.998, 1.2, 1.3, 1.1])
    assert stat.over_values(blocks[None, :], claim.params)[0] == 0.0
    assert stat.over_values(blocks[None, :], {**claim.params, "tie_margin": 1e-9})[0] == pytest.approx(2 / 6)
    frame = pd.DataFrame({"draw": range(6), "cell": 0, "low": blocks, "high": blocks, "factor": 0.0})
    assert stat.over_blocks(frame, claim.params, ALPHA).value == 0.0
    assert "within 1 % of 1 is a tie" in stat.describe(claim.params, claim.label, claim.baseline)


def test_a_threshold_inside_the_band_moves_to_its_edge_and_one_outside_stays() -> None:
    assert ties.below(1.0, 0.01) == 0.99 and ties.above(1.0, 0.01) == 1.01
    assert ties.below(0.5, 0.01) == 0.5 and ties.above(1.05, 0.01) == 1.05
    assert ties.above(1.005, 0.027) == 1.027 and ties.below(0.99, 0.01) == 0.99
    below, above = statistics.get("share_pairs_below"), statistics.get("share_pairs_above")
    sample = _pairs([0.995, 1.004, 0.9, 1.2, 1.03])
    params = {"ratio_threshold": 1.0, "ties": "count", "tie_margin": 0.01}
    assert below.estimand(sample, params) == pytest.approx(1 / 5)       # 0.9 only
    assert above.estimand(sample, params) == pytest.approx(2 / 5)       # 1.2 and 1.03
    assert above.estimand(sample, {**params, "ratio_threshold": 1.05}) == pytest.approx(1 / 5)
    excluded = {**params, "ties": "exclude"}
    assert below.estimand(sample, excluded) == pytest.approx(1 / 3)     # of the three that are not ties
    assert below.counted(sample, excluded) == 3
    seq = below.sequence(sample, excluded, ALPHA)
    assert seq.n == 3 and seq.value == pytest.approx(1 / 3)


def test_paired_sign_ties_are_equal_values_or_within_the_margin() -> None:
    less = statistics.get("share_pairs_less")
    value = np.array([0.0, 101.0, 90.0, 120.0])
    base = np.array([0.0, 100.0, 100.0, 100.0])
    sample = pd.DataFrame({"draw": range(4), "value": value, "base": base, "ratio": value / np.where(base, base, 1),
                           "value_lo": value, "value_hi": value, "base_lo": base, "base_hi": base})
    params = {"tie_margin": 0.027}
    assert less.counted(sample, params) == 2
    assert less.estimand(sample, params) == pytest.approx(1 / 2)
    assert less.sequence(sample, params, ALPHA).n == 2


@pytest.mark.parametrize(("keys", "problem"), [
    ({"tie_margin": 0.0}, "never 0"),
    ({"tie_margin": 0.01}, "needs its source"),
    ({"tie_margin_source": "the paper"}, "without a tie_margin"),
    ({"tie_margin": 0.9, "tie_margin_source": "x"}, "tie_margin"),
])
def test_a_margin_is_stated_with_its_source_and_never_0(keys: dict, problem: str) -> None:
    with pytest.raises(SpecError) as refused:
        ties.read(Section(keys, "claims.toml", "claim[0]"))
    assert problem in str(refused.value)


def test_a_claim_that_states_none_is_judged_with_the_twins_spread() -> None:
    assert ties.read(Section({}, "claims.toml", "claim[0]")) == (ties.TWINS_MARGIN, ties.TWINS_SOURCE)
    assert ties.read(Section({"tie_margin": 0.005, "tie_margin_source": "§5.6.2"}, "c.toml")) == (0.005, "§5.6.2")
    for pack in ("networking2019", "thesis2018", "rquic2021", "aa", "smoke"):
        for claim in load_pack(pack).claims:
            assert not claim.stat.shares or claim.params["tie_margin"] > 0, (pack, claim.id)
