"""The parallel pass's order (tests/durations.py): seconds per file from a junit report, files longest first
with each file's tests together and in order, and the committed figures naming files that exist."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests import durations

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_one" time="1.5"/>
<testcase classname="tests.test_a" name="test_two" time="2.0"><failure message="x"/></testcase>
<testcase classname="tests.test_b.TestThing" name="test_three" time="0.25"/>
<testcase classname="tests.cluster.test_c" name="test_four" time="4"/>
<testcase classname="" name="tests.cluster.test_d" time="0.000"><skipped message="collection skipped"/></testcase>
</testsuite></testsuites>
"""


@dataclass
class Item:
    path: Path
    name: str
    keywords: set[str] = field(default_factory=set)


def test_seconds_per_file_from_a_junit_report(tmp_path: Path) -> None:
    junit = tmp_path / "r.xml"
    junit.write_text(JUNIT)
    assert durations.measured([junit]) == {"tests/test_a.py": 3.5, "tests/test_b.py": 0.25,
                                          "tests/cluster/test_c.py": 4.0, "tests/cluster/test_d.py": 0.0}


def test_files_longest_first_each_files_tests_together_in_order() -> None:
    a, b, c, d = (Path(f"tests/test_{n}.py") for n in "abcd")
    items = [Item(a, "a1"), Item(a, "a2"), Item(b, "b1"), Item(c, "c1", {"slow"}), Item(c, "c2"),
             Item(d, "d1"), Item(b, "b2")]
    durations.longest_files_first(items, {"test_a.py": 5.0, "test_b.py": 100.0})
    # b measured longest; c unmeasured but slow (SLOW_UNMEASURED_S); a; d unmeasured and not slow.
    assert [i.name for i in items] == ["b1", "b2", "c1", "c2", "a1", "a2", "d1"]


def test_the_committed_figures_name_existing_files() -> None:
    here = Path(__file__).resolve().parent
    figures = durations.load()
    assert figures, f"{durations.FILE} is missing or empty: make test, then make test-durations"
    gone = [name for name in figures if not list(here.rglob(name))]
    assert not gone, f"{durations.FILE} names files that no longer exist: {gone} (make test-durations)"


def test_the_command_refuses_a_missing_report(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tests.durations", str(tmp_path / "none.xml")],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 2 and "run `make test` first" in out.stderr
