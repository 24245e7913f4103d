"""Waiting for a quieter machine before fidelity-flagged runs run again.

A run flagged `fidelity` was disturbed by the machine (its endpoints or the delay element waited for a CPU).
Running it again at once, beside the same load, mostly flags it again. So the engine re-runs flagged runs at
the end of a campaign, one at a time, after waiting until the CPU is quieter: the kernel's pressure stall
information (``/proc/pressure/cpu``, "some avg10": the share of the last 10 s in which a runnable task waited
for a CPU) at or under `QUIET_PRESSURE`, or `QUIET_WAIT_S` at most. What it waited and the pressure it
started the round at are recorded with each re-run (``earlier_outcomes.why_again``) and in the session.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fecbench.inputs.environment import env_number

#: Rounds of re-runs of the runs a campaign flagged `fidelity`, at its end (`fecbench run --reruns`).
FIDELITY_RERUNS = 3
PRESSURE_FILE = Path("/proc/pressure/cpu")
#: The CPU pressure (some avg10, a share) under which the machine counts as quiet.
QUIET_PRESSURE = 0.10
#: The longest wait for it before a round of re-runs (s); they run then anyway, one at a time.
#: FECBENCH_QUIET_WAIT_S replaces it (0: do not wait; the test suite's own campaigns).
QUIET_WAIT_S = 60.0
QUIET_WAIT_ENV = "FECBENCH_QUIET_WAIT_S"
POLL_S = 2.0


def cpu_pressure(path: Path = PRESSURE_FILE) -> float | None:
    """The CPU's "some avg10" pressure as a share (0.032 for 3.2 %), or None where the kernel has no PSI."""
    try:
        first = path.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    for field in first.split()[1:]:
        name, _, value = field.partition("=")
        if name == "avg10":
            try:
                return float(value) / 100
            except ValueError:
                return None
    return None


@dataclass
class Quiet:
    """What a wait for a quieter machine found: seconds waited, the pressure then, and whether it was quiet."""
    waited_s: float
    pressure: float | None
    quiet: bool

    def text(self) -> str:
        if self.pressure is None:
            return "no CPU pressure information here (/proc/pressure/cpu): not waited"
        how = "quiet" if self.quiet else f"still busy after {self.waited_s:.0f} s (the longest wait)"
        return f"CPU pressure {100 * self.pressure:.0f} % after waiting {self.waited_s:.0f} s: {how}"


def max_wait_s() -> float:
    """The longest wait: FECBENCH_QUIET_WAIT_S (seconds, 0 or more), else `QUIET_WAIT_S`."""
    return env_number(QUIET_WAIT_ENV, QUIET_WAIT_S, high=float("inf"), expected="seconds (0 or more)", zero_ok=True)


def wait_for_quiet(limit: float = QUIET_PRESSURE, max_wait: float | None = None,
                   read: Callable[[], float | None] = cpu_pressure, sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> Quiet:
    """Wait until the CPU pressure is at most ``limit``, ``max_wait`` seconds at most (default `max_wait_s`)."""
    longest = max_wait_s() if max_wait is None else max_wait
    start = clock()
    while True:
        pressure = read()
        waited = clock() - start
        if pressure is None or pressure <= limit:
            return Quiet(waited, pressure, pressure is not None)
        if waited >= longest:
            return Quiet(waited, pressure, False)
        sleep(min(POLL_S, longest - waited))
