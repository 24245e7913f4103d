"""The time rule of a reproduction's batch (fecbench.verdicts.execute.share_ends, issue 72 item 3): a pure function,
so every way it can end a campaign's share is checked without running one."""

from __future__ import annotations

import pytest

from fecbench.verdicts.execute import CAMPAIGN_START_S, SHARE_MARGIN, share_ends


def test_no_deadline_no_end() -> None:
    assert share_ends(100.0, None, 60.0, 0.0, typical_s=5.0, later=3) is None


def test_a_share_is_its_estimate_a_quarter_more_plus_what_earlier_campaigns_saved() -> None:
    far = 1e9
    assert share_ends(100.0, far, 60.0, 0.0, typical_s=5.0, later=0) == pytest.approx(100.0 + 60.0 * SHARE_MARGIN)
    assert share_ends(100.0, far, 60.0, 20.0, typical_s=5.0, later=0) == pytest.approx(100.0 + 75.0 + 20.0)
    # an earlier campaign that overran takes nothing from this one's own share
    assert share_ends(100.0, far, 60.0, -50.0, typical_s=5.0, later=0) == pytest.approx(175.0)


def test_the_deadline_leaves_a_typical_run_and_the_later_campaigns_starts() -> None:
    deadline = 200.0
    end = share_ends(100.0, deadline, 600.0, 0.0, typical_s=30.0, later=2)
    assert end == pytest.approx(deadline - 30.0 - 2 * CAMPAIGN_START_S)
    # nothing left for it: the caller records its runs out of time without starting one
    assert share_ends(190.0, deadline, 600.0, 0.0, typical_s=30.0, later=0) <= 190.0
