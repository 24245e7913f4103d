"""How long each test file took in the last measured `make test`, so that the parallel pass can start the
longest files first (tests/conftest.py) and end with its workers finishing together.

pytest-xdist hands whole files to its workers (`--dist loadfile`), each to the first worker free. Handed out
longest first, the pass ends within the longest file of its ideal share; handed out in any other order, a
two-minute file picked up last keeps one worker busy alone at the end (measured: 637 s instead of ~500 s).

    python -m tests.durations JUNIT.xml [...]    # refresh tests/file_durations.json (`make test-durations`)

The figures only order the files: a stale or missing one makes the pass slower, never wrong.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

FILE = Path(__file__).resolve().parent / "file_durations.json"
#: What a file with `slow` tests is expected to take before it was measured (new files: about a campaign).
SLOW_UNMEASURED_S = 30.0


def file_of(case: ET.Element) -> str:
    """tests/test_x.py from a junit test case's classname (`tests.test_x`, `tests.test_x.TestSomething`,
    `tests.cluster.test_y`): the dotted path up to its first test module. A module skipped whole has no
    classname: its name is the module's."""
    parts = (case.get("classname") or case.get("name", "")).split(".")
    module = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
    return "/".join(parts[:module + 1]) + ".py"


def measured(junits: list[Path]) -> dict[str, float]:
    """Seconds per test file (set-up, call and tear-down of its tests) in these pytest junit reports."""
    seconds: dict[str, float] = defaultdict(float)
    for junit in junits:
        for case in ET.parse(junit).getroot().iter("testcase"):
            seconds[file_of(case)] += float(case.get("time", 0))
    return dict(seconds)


def load() -> dict[str, float]:
    """The committed figures (file name → seconds); empty when the file is absent."""
    if not FILE.exists():
        return {}
    return {Path(name).name: seconds for name, seconds in json.loads(FILE.read_text()).items()}


def longest_files_first(items: list, seconds: dict[str, float]) -> None:
    """Sort pytest items (in place) by their file's measured seconds, longest first; each file's tests stay
    together and in their order (the sort is stable). A file not measured yet counts as SLOW_UNMEASURED_S
    when it has `slow` tests, else as nothing."""
    slow_files = {item.path for item in items if "slow" in item.keywords}

    def expected(item) -> float:
        return seconds.get(item.path.name, SLOW_UNMEASURED_S if item.path in slow_files else 0.0)

    items.sort(key=lambda item: -expected(item))


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tests.durations JUNIT.xml [...]", file=sys.stderr)
        return 2
    missing = [name for name in argv if not Path(name).exists()]
    if missing:
        print(f"no junit report at {', '.join(missing)}: run `make test` first", file=sys.stderr)
        return 2
    seconds = measured([Path(name) for name in argv])
    FILE.write_text(json.dumps({name: round(s, 1) for name, s in sorted(seconds.items())}, indent=0) + "\n")
    print(f"{FILE}: {len(seconds)} files, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
