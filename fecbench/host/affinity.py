"""Which CPUs a campaign's processes run on, so the delay elements are never kept waiting by them.

The delay elements run at real-time priority (delayline/README.md), yet on a kernel built without
preemption of kernel code (``preempt=none``, the default of many distribution and cloud kernels:
see ``preemption_model``), a woken real-time task still waits until whatever runs on its CPU leaves
the kernel. On this project's 2-core machine, tracing the scheduler during an 8-network campaign
showed what kept a delay element from its CPU for 0.25-0.53 ms when a frame was due: the campaign's
own process start-ups and configuration commands in kernel code (``mnexec`` entering a namespace,
``ip``, ``tc``, ``fecdrop``'s BPF calls, Python starting) and kernel workers (designs/README.md,
"How accurate each run was").

So on a machine with at least 2 CPUs, a campaign keeps its own processes (fecbench itself, and
through inheritance every command, probe and helper it starts) off the last CPU; the delay elements
may use every CPU (the real-time scheduler puts a woken one on an idle CPU first, so a second one due
at the same moment is not queued behind the first), and so may the **endpoints** (the servers and
clients a run starts on its hosts, `fecbench.emulation.endpoints`): they are what a campaign's CPU is
for. Confined with the harness (the policy until issue 67), they had one CPU of two: four networks of
link-bound 20 Mbit/s downloads (0.3-0.4 core each) waited for it up to 42 % of a run's time and were all
flagged, although the delay elements kept time better with them spread (designs/README.md, "Where the
endpoints run"). ``FECBENCH_CPU_AFFINITY`` = ``on`` (that default), ``strict`` (endpoints with the
harness: the former policy, kept to compare) or ``off`` (the kernel's default placement). What was set
is recorded with the campaign (host information).
"""

from __future__ import annotations

import gzip
import os
import platform
from pathlib import Path
from typing import Any

ENV = "FECBENCH_CPU_AFFINITY"
#: The policies ENV may name (``off`` also as 0, no, false).
POLICIES = ("on", "strict", "off")


def policy() -> str:
    """The placement asked for: ``on`` (the default), ``strict`` or ``off`` (see the module); any other value is
    refused (UserError, exit 2), never read as the default."""
    value = os.environ.get(ENV, "on").strip().lower() or "on"
    if value in ("off", "0", "no", "false"):
        return "off"
    if value not in POLICIES:
        from fecbench.inputs.errors import UserError
        raise UserError(f"{ENV}={os.environ[ENV]!r}: not a placement; use on (the default: the endpoints on every "
                        "CPU), strict (the endpoints with the harness, off the delay elements' CPU) or off (the "
                        "kernel places everything)")
    return value


def enabled() -> bool:
    return policy() != "off"


def all_cpus() -> set[int]:
    """The CPUs this process may use now (its cpuset), whatever its own affinity mask says."""
    try:
        text = Path("/sys/fs/cgroup/cpuset/cpuset.effective_cpus").read_text().strip()
        cpus = parse_list(text) if text else set()
    except (OSError, ValueError):
        cpus = set()
    online = _online()
    return (cpus & online) or online or set(os.sched_getaffinity(0))


def _online() -> set[int]:
    try:
        return parse_list(Path("/sys/devices/system/cpu/online").read_text().strip())
    except (OSError, ValueError):
        return set(range(os.cpu_count() or 1))


def parse_list(text: str) -> set[int]:
    """A CPU list in the kernel's and taskset's form ("0-3,6") as a set; ValueError for anything else
    (an empty item, an open or reversed range, a negative or non-integer number)."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        first, last = int(low), int(high if dash else low)
        if not 0 <= first <= last:
            raise ValueError(f"not a CPU list: {text!r}")
        cpus.update(range(first, last + 1))
    return cpus


def cpu_sets(cpus: set[int] | None = None) -> dict[str, Any] | None:
    """Where a campaign's processes go: `harness` (every CPU but the last), `delay` (every CPU) and `endpoints`
    (every CPU, or the harness's with ``strict``); None when it cannot help (one CPU) or is turned off."""
    cpus = all_cpus() if cpus is None else cpus
    if not enabled() or len(cpus) < 2:
        return None
    harness = sorted(cpus - {max(cpus)})
    return {"harness": harness, "delay": sorted(cpus), "endpoints": harness if policy() == "strict" else sorted(cpus),
            "reserved": max(cpus)}


def endpoint_cpus() -> list[int] | None:
    """The CPUs a run's endpoints are started on when they differ from what they would inherit from the
    harness; None: they inherit (turned off, strict, one CPU)."""
    chosen = cpu_sets()
    if chosen is None or chosen["endpoints"] == chosen["harness"]:
        return None
    return chosen["endpoints"]


def confine_harness() -> str | None:
    """Keep this process (the calling thread, and every thread and process it starts from now on) off
    the CPU left to the delay elements; None, or why it could not."""
    chosen = cpu_sets()
    if chosen is None:
        return None
    try:
        os.sched_setaffinity(0, chosen["harness"])
    except OSError as exc:
        return f"CPU affinity {chosen['harness']} not set: {exc}"
    return None


def describe() -> dict[str, Any]:
    """What a campaign records (host information): the CPUs this process and what it starts use, the
    CPUs delay elements use, the kernel's preemption model and whether it groups processes by session."""
    own, every = sorted(os.sched_getaffinity(0)), sorted(all_cpus())
    endpoints = endpoint_cpus() or own
    return {"harness_cpus": own, "delay_cpus": every, "endpoint_cpus": endpoints, "preemption": preemption_model(),
            "autogroup": autogroup(), "policy": _placement_text(own, every, endpoints)}


def _placement_text(own: list[int], every: list[int], endpoints: list[int]) -> str:
    """The placement that ran, in words (``describe``)."""
    if not enabled():
        return "off"
    if own == every or max(every) in own:
        return "every process on every CPU"
    if endpoints == every:
        return "the harness off the last CPU; endpoints and delay elements on every CPU"
    return "delay elements alone on the last CPU"


def delay_cpus() -> set[int]:
    """The CPUs a delay element may run on (every CPU, also when its starter is confined)."""
    return all_cpus()


def autogroup(path: Path = Path("/proc/sys/kernel/sched_autogroup_enabled")) -> str:
    """Whether the kernel schedules processes grouped by session ("on", "off", or "absent": built
    without it). It decides what other load on the host costs the endpoints: with it on, CPU hogs
    started from one shell share one CPU share, and left the endpoints of a `--jobs 8` campaign on time;
    the same hogs each in a session of its own took a share each and made them late (designs/README.md,
    "What other load on the host does")."""
    try:
        value = path.read_text().strip()
    except OSError:
        return "absent"
    return "off" if value == "0" else "on"


def preemption_model() -> str:
    """The kernel's preemption model as far as it can be read: "full", "voluntary", "none", "rt" or
    "lazy" (with how it was read), or "unknown". With "none", kernel code running on a CPU keeps a woken
    real-time task waiting until it leaves the kernel (`fecbench doctor` says how to change it)."""
    version = platform.version()
    if "PREEMPT_RT" in version:
        return "rt"
    try:
        text = Path("/sys/kernel/debug/sched/preempt").read_text()
        current = [word.strip("()") for word in text.split() if word.startswith("(")]
        if current:
            return f"{current[0]} (debugfs)"
    except OSError:
        pass
    try:
        cmdline = Path("/proc/cmdline").read_text().split()
    except OSError:
        cmdline = []
    for arg in cmdline:
        if arg.startswith("preempt="):
            return f"{arg.split('=', 1)[1]} (kernel command line)"
    try:
        config = gzip.decompress(Path("/proc/config.gz").read_bytes()).decode(errors="replace").splitlines()
    except OSError:
        config = []
    for line in config:
        for option, name in (("CONFIG_PREEMPT_NONE=y", "none"), ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary"),
                             ("CONFIG_PREEMPT=y", "full"), ("CONFIG_PREEMPT_LAZY=y", "lazy")):
            if line.strip() == option:
                return f"{name} (kernel configuration default)"
    if "PREEMPT " in f"{version} " or "PREEMPT_DYNAMIC" in version:
        return "unknown (PREEMPT_DYNAMIC)"
    return "unknown"
