"""`fecbench reproduce PACK --claims ID...` (issue 67, item 4, no root): a subset of a pack's claims is judged alone,
its α split over it alone, and its page says which subset it is; `--dry-run` shows what each claim would still take
to a verdict (`allocate.projection`, the number an undecided verdict's note gives)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from fecbench.inputs.errors import UserError
from fecbench.verdicts import allocate, page, session
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts import sequential as sq
from fecbench.verdicts.pack import load_pack
from tests.helpers.campaign import fecbench


def test_a_subset_by_id_and_by_pattern_keeps_the_packs_designs_and_profiles() -> None:
    pack = load_pack("networking2019")
    sub = pack.subset(["fig5-*", "fig9-recovered-frames-fair"])
    fig5 = [c.id for c in pack.claims if c.id.startswith("fig5-")]
    assert [c.id for c in sub.claims] == [c.id for c in pack.claims if c.id in fig5 or c.id ==
                                          "fig9-recovered-frames-fair"]     # the pack's order, each once
    assert len(fig5) > 5 and len(sub.claims) == len(fig5) + 1 < len(pack.claims)
    assert sub.designs == pack.designs and sub.profiles == pack.profiles and sub.default_profile == "paper"
    assert len(pack.claims) == 39 and pack.chosen == () and pack.chosen_text() == ""   # the pack itself unchanged
    assert sub.chosen_text() == (f"{len(fig5) + 1} of 39 claims chosen with --claims 'fig5-*' "
                                 "--claims fig9-recovered-frames-fair")
    # a subset's campaigns: only the designs its claims are on (--full runs no other design)
    assert set(sub.campaign_designs()) == {c.design for c in sub.claims} < set(pack.designs)
    assert pack.campaign_designs() == pack.designs
    # an exact id, and a subset of a subset still counts the whole pack
    one = sub.subset(["fig5-mss-small-better"])
    assert [c.id for c in one.claims] == ["fig5-mss-small-better"] and one.whole == 39
    assert pack.subset([]) is pack


def test_a_value_that_chooses_nothing_names_itself_and_lists_the_claims() -> None:
    pack = load_pack("smoke")
    with pytest.raises(UserError) as err:
        pack.subset(["ratio-*", "fig5-*"])
    text = str(err.value)
    assert "--claims 'fig5-*'" in text and "pack smoke" in text
    assert all(c.id in text for c in pack.claims), text
    with pytest.raises(UserError, match="'Share-below'"):   # case-sensitive, as the ids are written
        pack.subset(["Share-below"])


def test_the_error_level_is_split_over_the_chosen_claims_that_can_take_a_verdict() -> None:
    """A claim not runnable here (``needs``: absent-design) takes no verdict, so no share of α (issue 67): the smoke
    pack's 6 claims split it 5 ways, a subset of one runnable claim and that one takes α whole per profile."""
    pack = load_pack("smoke")
    sub = pack.subset(["ratio-of-medians-1kB", "absent-design"])   # a claim not runnable here is kept, as such
    assert ev.page_alpha(pack, ["defaults"]) == pytest.approx(sq.ALPHA / 5)
    assert ev.page_alpha(sub, ["defaults", "repair-free"]) == pytest.approx(sq.ALPHA / 2)
    verdicts = ev.evaluate(sub, {}, ["defaults"], {}, bootstrap=False)
    assert [(v.claim.id, v.verdict) for v in verdicts] == [("ratio-of-medians-1kB", "inconclusive"),
                                                            ("absent-design", ev.NOT_RUNNABLE)]
    assert all(v.alpha == pytest.approx(sq.ALPHA) for v in verdicts)


def test_a_subsets_page_says_which_claims_and_that_alpha_is_theirs(tmp_path: Path) -> None:
    sub = load_pack("smoke").subset(["absent-design", "p95-*"])
    verdicts = ev.evaluate(sub, {}, ["defaults"], {}, bootstrap=False)
    text = page.write(sub, ["defaults"], verdicts, {}, tmp_path).read_text()
    assert html.escape("A subset: 2 of 6 claims chosen with --claims absent-design --claims 'p95-*'; α split over "
                       "the 1 of them that can take a verdict, not over the pack's claims") in text
    assert "split evenly over the 1 verdict(s) it can show" in text and "(2 of 6 claims chosen with" in text
    assert "p95-ratio" in text and "share-below" not in text    # the rows: the subset's
    saved = json.loads((tmp_path / "verdicts.json").read_text())
    assert {v["claim"] for v in saved} == {"absent-design", "p95-ratio"}
    assert all(v["subset"].startswith("2 of 6 claims") and v["level"] == pytest.approx(0.95) for v in saved)
    whole = page.write(load_pack("smoke"), ["defaults"], verdicts, {}, tmp_path / "whole").read_text()
    assert "A subset" not in whole and "claims chosen with" not in whole


def test_only_the_chosen_claims_take_runs(tmp_path: Path) -> None:
    sub = load_pack("smoke").subset(["ratio-*", "absent-design"])
    batch = session.first_batch(sub, ["defaults"], 1800, False, tmp_path)
    assert {cid for cid, n in batch.selection.claim_draws.items() if n} == {"ratio-of-medians-1kB"}
    assert {v.claim.id for v in batch.verdicts} == {"ratio-of-medians-1kB", "absent-design"}
    absent = session.first_batch(load_pack("smoke").subset(["absent-design"]), ["defaults"], None, True, tmp_path)
    assert absent.campaigns == {} and not any(absent.selection.runs.values())   # --full runs no other design


def test_with_nothing_measured_a_verdict_takes_at_least_the_fewest_observations(tmp_path: Path) -> None:
    """The dry run's "≥" number: every observation agreeing (``fewest_observations`` at the page's level), each draw
    at its runs' seconds."""
    pack = load_pack("smoke").subset(["ratio-of-medians-1kB"])
    batch = session.first_batch(pack, ["defaults"], 1800, False, tmp_path)
    claim, (v,) = pack.claims[0], batch.verdicts
    draws, seconds, at_least = allocate.projection(claim, batch.verdicts, batch.campaigns)
    fewest = claim.stat.fewest_observations(claim.params, claim.compare, claim.threshold, claim.tolerance, v.alpha)
    assert at_least and draws == fewest and v.alpha == pytest.approx(sq.ALPHA)
    campaign = batch.campaigns[("defaults", "smoke")]
    sample = campaign.draws(claim)[:50]
    per_draw = sum(campaign.seconds(r) for d in sample for r in allocate.draw_runs(claim, campaign, d)) / len(sample)
    assert seconds == pytest.approx(fewest * per_draw) and seconds > 0


def test_the_cli_refuses_a_claim_the_pack_lacks(tmp_path: Path) -> None:
    done = fecbench("reproduce", "smoke", "--claims", "NOPE", "--dry-run", "--results", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--claims 'NOPE'" in done.stderr and "share-below, ratio-of-medians-1kB" in done.stderr
    done = fecbench("reproduce", "--claims", "share-below")
    assert done.returncode == 2 and "name the pack" in done.stderr


def test_the_dry_run_shows_each_claims_time_to_a_verdict(tmp_path: Path) -> None:
    done = fecbench("reproduce", "smoke", "--dry-run", "--results", str(tmp_path), columns=250)
    assert done.returncode == 0, done.stderr
    assert "expected min to a verdict" in done.stdout and "draws to a verdict" in done.stdout
    rows = {m[0]: m for m in re.findall(r"│\s+([\w.-]+) │\s+(\d+) │.*│\s+(≥ \d+|–) │\s+(≥ [\d.]+|not runnable) │",
                                        done.stdout)}
    assert set(rows) == {c.id for c in load_pack("smoke").claims}, done.stdout
    assert rows["ratio-of-medians-1kB"][2] == "≥ 12" and rows["absent-design"][3] == "not runnable"
    chosen = fecbench("reproduce", "smoke", "--dry-run", "--claims", "ratio-*", "--full", "--profile", "defaults",
                      "--profile", "repair-free", "--results", str(tmp_path), columns=250)
    assert chosen.returncode == 0, chosen.stderr
    assert "1 of 6 claims chosen with --claims 'ratio-*'" in chosen.stdout
    assert "ratio-of-medians-1kB" in chosen.stdout and "share-below" not in chosen.stdout
