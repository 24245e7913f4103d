"""Networks idle in a campaign's tail take more of its runs (issue 67): the engine asks for them when a network
frees while others still run, refuses what it holds, records the new runs pending first; a reproduction's
``TailFill`` chooses them from the last look, within what the longest run in flight still takes, counting the
draws taken since that look against what each claim needs."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from fecbench.host import cleanup
from fecbench.records.status import Status
from fecbench.runners.executors.engine import Engine, Tail
from fecbench.runners.executors.jobs import JobsExecutor
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.experiment.prepare import prepare
from fecbench.verdicts import allocate, profiles
from fecbench.verdicts import campaign as cp
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts import sequential as sq
from fecbench.verdicts.pack import load_pack
from fecbench.verdicts.session import ReproductionRuns, TailFill
from tests.helpers.campaign import fake_design, rows
from tests.helpers.fake_testbed import FakeTestbed


def test_an_idle_network_takes_the_runs_the_tail_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")
    # "hang" waits out its 3 s limit: the "ok" run beside it ends first and leaves its network idle.
    prepared = prepare(fake_design(tmp_path / "t.toml", {"ok": {}, "hang": {"behave": "hang"}}, timeout_s=3))
    db = tmp_path / "t.sqlite"
    by = {(r.label, r.point): r for r in prepared.runs}
    hang, first, later = by[("hang", 0)], by[("ok", 0)], by[("ok", 1)]
    # A run beyond the design's (a reproduction's extra seed): no pending row until the engine adds one.
    extra = dataclasses.replace(later, key="extra-" + later.key, index=len(prepared.runs), repetition=7)
    prepared.runs.append(extra)
    asked: list[Tail] = []

    def fill_tail(tail: Tail) -> list:
        asked.append(tail)
        return [hang, later, extra] if len(asked) == 1 else []   # the run in flight is the engine's: refused

    executor = JobsExecutor(prepared, db, 2, link_backend=None,
                            testbed_factory=lambda topo, values, backend: FakeTestbed(topo, values, backend))
    summary = Engine(prepared, db, executor, SilentReporter(), todo=[hang, first], fill_tail=fill_tail).run(set())
    assert asked and set(asked[0].running) == {hang.key} and asked[0].idle == 1 and hang.key in asked[0].held
    recorded = {r["key"]: r for r in rows(db, "SELECT key, status, attempts FROM runs")}
    assert recorded[hang.key]["status"] == Status.TIMEOUT and recorded[hang.key]["attempts"] == 1
    for run in (first, later, extra):
        assert recorded[run.key]["status"] == Status.OK and recorded[run.key]["attempts"] == 1
    assert summary.selected == 4 and sum(summary.counts.values()) == 4


@pytest.fixture()
def smoke(tmp_path: Path):
    pack = load_pack("smoke")
    target = profiles.write(pack, pack.profile("defaults"), pack.designs["smoke"], tmp_path)
    campaign = cp.Campaign("defaults", "smoke", target.db, prepare(target.design), {})
    claims = [c for c in pack.claims if c.id in ("share-below", "ratio-of-medians-1kB")]
    verdicts = [ev.Verdict(claims[0], "defaults", "inconclusive", None, "", sq.Sequence(0.98, 0.4, 1.0, 12)),
                ev.Verdict(claims[1], "defaults", "inconclusive", None, "", sq.Sequence(1.5, 1.1, 2.05, 12))]
    return dataclasses.replace(pack, claims=claims), campaign, verdicts


def test_draws_taken_since_the_look_count_against_a_claims_need(smoke) -> None:
    pack, campaign, verdicts = smoke
    campaigns = {("defaults", "smoke"): campaign}
    near = pack.claims[1]
    need = allocate.need_draws(near, [verdicts[1]])
    assert 1 <= need < math.inf
    unit = max(campaign.seconds(r) for r in campaign.prepared.runs)
    before, _ = allocate.next_batch(pack.claims, campaigns, verdicts, capacity=4 * unit)
    assert before.claim_draws.get(near.id, 0) >= 1
    covered, idle = allocate.next_batch(pack.claims, campaigns, verdicts, capacity=4 * unit,
                                        taken={near.id: math.ceil(need)})
    assert idle[near.id] == "runs under way" and covered.claim_draws.get(near.id, 0) == 0
    assert covered.claim_draws.get(pack.claims[0].id, 0) >= 1   # the idle networks go to the other claim


def test_the_tail_fills_what_the_longest_run_in_flight_leaves_and_never_what_is_held(smoke) -> None:
    pack, campaign, verdicts = smoke
    runs = sorted(campaign.prepared.runs, key=campaign.seconds)
    longest, held = runs[-1], {runs[-1].key, runs[0].key}
    fill = TailFill(pack, ReproductionRuns(planned={"batches": 1, "runs": 0, "estimated_s": 0.0}))
    fill.verdicts = verdicts
    left = campaign.seconds(longest)   # just started
    chosen = fill(campaign, Tail(running={longest.key: 0.0}, held=held, idle=2))
    assert chosen and not {r.key for r in chosen} & held and campaign.held == set()
    assert sum(campaign.seconds(r) for r in chosen) <= 2 * left
    assert sum(fill.taken.values()) >= 1 and fill.runs.planned["runs"] == len(chosen)
    again = fill(campaign, Tail(running={longest.key: 0.0}, held=held | {r.key for r in chosen}, idle=2))
    assert not {r.key for r in again} & {r.key for r in chosen}
    assert fill(campaign, Tail(running={longest.key: campaign.seconds(longest) + 5}, held=held, idle=2)) == []
    assert fill(campaign, Tail(running={longest.key: 0.0}, held=held, idle=0)) == []

