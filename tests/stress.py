"""Find the tests that fail by timing before CI does (`make test-stress`).

Runs the tests that touch real networks and clocks several rounds, each beside a CPU load (busy processes
started here and ended by PID), and prints each test's failure count. A test that fails in any round is a bug
to fix at its cause (a bound derived from what it measures, or a measurement made exact), never a retry.

    python -m tests.stress [--rounds 3] [--load 1] [--workers 1] [pytest selection ...]

The default selection: the `serial` files of tests/conftest.py (timing measurements) and the files whose tests
CI found failing by timing before (flows, multipath placement, reproduce budgets), plus whatever is given.
Exit status: 0 when no test failed in any round, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from tests import durations
from tests.conftest import SERIAL_FILES

REPO = Path(__file__).resolve().parent.parent
#: Files outside SERIAL_FILES whose tests measure what a loaded machine can change: CI found each failing by
#: timing once (a flow's end and ICMP attribution, per-path placement, reproduce budgets under load).
SENSITIVE_FILES = ("test_flows.py", "test_multipath_wire.py", "test_fecq_multipath.py", "test_reproduce_pack.py")


def default_selection() -> list[str]:
    names = sorted(set(SERIAL_FILES) | set(SENSITIVE_FILES))
    return [str(Path("tests") / n) for n in names if (REPO / "tests" / n).exists()]


def start_load(processes: int) -> list[subprocess.Popen]:
    """Busy processes, one core's worth each (ended by PID by `stop_load`)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]


def stop_load(load: list[subprocess.Popen]) -> None:
    for process in load:
        process.kill()
        process.wait()


def _test_id(case: ET.Element) -> str:
    return f"{durations.file_of(case)}::{case.get('name')}"


def _problem(case: ET.Element) -> ET.Element | None:
    """A test case's failure or error, if it has one."""
    failure = case.find("failure")
    return failure if failure is not None else case.find("error")


def failures(junit: Path) -> tuple[int, list[str]]:
    """(tests run, the ids of those that failed or errored) from a pytest junit file."""
    if not junit.exists():
        return 0, ["(pytest wrote no report: it crashed)"]
    root = ET.parse(junit).getroot()
    ran, failed = 0, []
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            continue
        ran += 1
        if _problem(case) is not None:
            failed.append(_test_id(case))
    return ran, failed


def messages(junit: Path) -> dict[str, str]:
    """Each failed test's message (its assertion, or the error's first line), by the ids `failures` gives."""
    if not junit.exists():
        return {}
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        problem = _problem(case)
        if problem is not None:
            out[_test_id(case)] = (problem.get("message") or problem.text or "").strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the whole selection")
    parser.add_argument("--load", type=int, default=1, help="busy processes beside the tests (this machine: 2 cores)")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers (1: one test at a time)")
    parser.add_argument("selection", nargs="*", help="pytest files or ids (default: the timing-sensitive files)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.load < 0 or args.workers < 1:
        parser.error("--rounds and --workers must be at least 1, --load at least 0")
    selection = args.selection or default_selection()
    counts: Counter[str] = Counter()
    print(f"{args.rounds} round(s) of {len(selection)} file(s)/id(s), {args.load} busy process(es) beside them, "
          f"{os.cpu_count()} CPUs", flush=True)
    # Each round's report and pytest's output are kept: a failure found once must be readable afterwards.
    kept = Path(tempfile.mkdtemp(prefix="fecbench-stress-"))
    print(f"each round's output and report: {kept}", flush=True)
    for round_no in range(1, args.rounds + 1):
        junit = kept / f"round{round_no}.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                   *(["-n", str(args.workers)] if args.workers > 1 else []), *selection]
        load = start_load(args.load)
        started = time.monotonic()
        try:
            with open(kept / f"round{round_no}.log", "w") as log:
                subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        finally:
            stop_load(load)
        ran, failed = failures(junit)
        counts.update(failed)
        said = messages(junit)
        print(f"round {round_no}: {ran} test(s) ran, {len(failed)} failed, {time.monotonic() - started:.0f} s"
              + "".join(f"\n  failed: {t}\n    {said.get(t, '')[:400]}" for t in failed), flush=True)
    print(f"\nfailures per test over {args.rounds} round(s) with {args.load} busy process(es):")
    for test, n in counts.most_common():
        print(f"  {n}/{args.rounds}  {test}")
    if not counts:
        print("  none")
    return 1 if counts else 0


if __name__ == "__main__":
    sys.exit(main())
