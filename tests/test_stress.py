"""tests/stress.py's reading of a round: which tests ran and which failed (pure logic)."""

from __future__ import annotations

from pathlib import Path

from tests import stress


def test_a_round_counts_failures_and_errors_not_skips(tmp_path: Path) -> None:
    junit = tmp_path / "round.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="test_ok"/>'
        '<testcase classname="tests.test_a" name="test_late"><failure message="late"/></testcase>'
        '<testcase classname="tests.test_b" name="test_setup"><error message="boom"/></testcase>'
        '<testcase classname="tests.test_b" name="test_skip"><skipped message="no netem"/></testcase>'
        '<testcase classname="tests.cluster.test_c.TestHosts" name="test_gone"><failure message="x"/></testcase>'
        '</testsuite></testsuites>')
    assert stress.failures(junit) == (4, ["tests/test_a.py::test_late", "tests/test_b.py::test_setup",
                                          "tests/cluster/test_c.py::test_gone"])
    assert stress.failures(tmp_path / "missing.xml") == (0, ["(pytest wrote no report: it crashed)"])
    # What each failure said, printed with it (the round's pytest output is kept too).
    assert stress.messages(junit) == {"tests/test_a.py::test_late": "late", "tests/test_b.py::test_setup": "boom",
                                      "tests/cluster/test_c.py::test_gone": "x"}


def test_the_default_selection_holds_the_timing_files() -> None:
    chosen = stress.default_selection()
    assert "tests/test_schedule_compose.py" in chosen and "tests/test_flows.py" in chosen
    assert all(Path(stress.REPO, c).exists() for c in chosen)
