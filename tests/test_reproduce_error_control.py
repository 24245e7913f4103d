"""Issue 58 (5): a page may state a false-discovery level instead of the family-wise one (`--error fdr`)."""

from __future__ import annotations

import numpy as np
import pytest

from fecbench.verdicts import sequential as sq
from fecbench.verdicts.statistics import error_control as ec


def test_the_step_up_is_benjamini_yekutielis() -> None:
    m, alpha = 10, 0.05
    level = alpha / (m * ec.harmonic(m))            # 0.0017: the level of a first decision
    assert abs(ec.smallest_level(m, alpha) - level) < 1e-15
    # the 4th smallest is under 4 levels, the 5th over 5: four decided, each at 4 levels (the 3rd's excess over 3
    # levels does not matter: step-up)
    p = [0.0001, 0.004, 0.0055, 0.0066, 0.009, 0.5, 1, 1]
    assert ec.step_up(p, m, alpha) == (4, 4 * level)
    assert ec.step_up([1.0, 0.3], m, alpha) == (0, level)        # none decided: the first decision's level
    # many decisions: each verdict at a level above the family-wise α / m, where FDR helps
    decided, at = ec.step_up([1e-6] * 60, 75, alpha)
    assert decided == 60 and at > 5 * alpha / 75


def test_the_anytime_p_value_is_the_smallest_deciding_level_and_valid_under_the_null() -> None:
    """A share's confidence sequence on fair coins against "> 0.5": P(p ≤ a) ≤ a at every a (anytime-valid,
    whatever the stopping), and p found by bisection decides at p and not much below."""
    rng = np.random.default_rng(58)
    ps = []
    for _ in range(200):
        hits = rng.random(400) < 0.5

        def decides(level: float, hits=hits) -> bool:
            s = sq.share(hits, level)
            return sq.decide(s.low, s.high, ">", 0.5, 0.0) != "inconclusive"

        p = ec.anytime_p(decides, 1e-6, 0.5)
        ps.append(p)
        if 1e-6 < p < 1:
            assert decides(p) and not decides(p * 0.98)
    ps = np.asarray(ps)
    for a in (0.05, 0.1, 0.2, 0.5):
        assert (ps <= a).mean() <= a, (a, (ps <= a).mean())
    effect = np.random.default_rng(1).random(400) < 0.7     # a real effect: decided at a tiny level
    assert ec.anytime_p(lambda lv: sq.decide(*(lambda s: (s.low, s.high))(sq.share(effect, lv)), ">", 0.5, 0.0)
                        != "inconclusive", 1e-6, 0.05) == 1e-6


def test_worlds_judged_at_the_false_discovery_level_say_no_falsehood() -> None:
    """Where every claim decides (overlap-0.25: k = 3 > H_3) each is judged at 3 α / (3 H_3) > α / 3, so nothing
    decided family-wise is lost; where few do (thresholds: 2 of 5 < H_5) the level is below α / 5: no false verdict
    in either."""
    from fecbench.verdicts.validation import worlds

    for name in ("overlap-0.25", "thresholds"):
        fwer, fdr = (worlds.bench_worlds(replays=2, budget_s=600.0, only=[name], rule=rule)[0]
                     for rule in (ec.FAMILY_WISE, ec.FALSE_DISCOVERY))
        assert fdr.false == 0 and fdr.fdp == 0 and fwer.false == 0, (name, fdr.finals)
        if name == "overlap-0.25":
            assert fdr.undecided <= fwer.undecided, (fwer.finals, fdr.finals)


def test_the_page_names_its_rule() -> None:
    assert "false-discovery rate" in ec.level_text(ec.FALSE_DISCOVERY, 0.05, 75, 0.002, 12)
    assert "any verdict on this page is false" in ec.level_text(ec.FAMILY_WISE, 0.05, 75, 0.05 / 75)


def test_a_pack_chooses_its_rule_and_says_why(tmp_path) -> None:
    """pack.toml's `error` is the page's rule unless --error says otherwise; a pack that sets it says why (SpecError
    naming the key, exit 2 from the command), and the page states the rule and the reason."""
    from fecbench.inputs.errors import SpecError
    from fecbench.verdicts.pack import load_pack
    from fecbench.verdicts.page import _level
    from tests.test_reproduce import CLAIM, _pack

    folder = _pack(tmp_path, CLAIM.format(more=""))
    pack_file = folder / "pack.toml"
    plain = load_pack(folder)
    assert plain.error_rule(None) == (ec.FAMILY_WISE, "the default")
    pack_file.write_text(pack_file.read_text().replace('default_profile = "a"', 'default_profile = "a"\nerror = "fdr"'))
    with pytest.raises(SpecError) as err:
        load_pack(folder)
    assert err.value.key == "pack.error_reason"
    pack_file.write_text(pack_file.read_text().replace('error = "fdr"', 'error = "fdr"\nerror_reason = "many decide"'))
    chosen = load_pack(folder)
    assert chosen.error_rule(None) == (ec.FALSE_DISCOVERY, "many decide")
    assert chosen.error_rule(ec.FAMILY_WISE) == (ec.FAMILY_WISE, "chosen with --error")
    assert "The pack&#x27;s rule (pack.toml): many decide" in _level([], chosen, ["a"], ec.FALSE_DISCOVERY)
    assert "Chosen with --error (the pack&#x27;s own rule: fdr: many decide)" in _level([], chosen, ["a"],
                                                                                         ec.FAMILY_WISE)
    assert load_pack("rquic2021").error == ec.FALSE_DISCOVERY and load_pack("thesis2018").error == ec.FAMILY_WISE
