"""Shared pytest configuration: the `require_root` marker skips (with a reason) when not root; the
`serial` marker (timing measurements, machine-loading tests: run alone, after the parallel pass of
`make test`); the real campaigns several test files share, run once per session (also across
pytest-xdist workers)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import durations

#: Whole test files that measure timing (the delay element's accuracy, fidelity probes, endpoint wake-up
#: latency, deadlines of real-time messages, timeouts, schedulers that follow measured RTTs) or load the
#: machine themselves (--jobs auto, Dask clusters): `make test` runs them alone, after the others ran in
#: parallel, so that no other test's load is in their measurements.
SERIAL_FILES = {
    "test_delayline.py", "test_delayline_cpus.py", "test_topology_net.py", "test_campaign_fidelity.py",
    "test_link_rate.py", "test_schedule_compose.py",
    "test_endpoint_timing.py", "test_jobs.py", "test_schedule_net.py", "test_keepalive.py",
    "test_fecq_multipath_schedulers.py", "test_fecq_tail.py",
    # how a burst spreads over blocks follows how the sender's datagrams alternate between paths, which
    # other tests' load changes (it batches a message's datagrams to one path: 1 block instead of 2-9)
    "test_fecq_multipath_burst.py",
    "test_trace_link.py", "test_page_timing.py",
}

GENEROUS_BOUND_MS = "1000"


def pytest_configure(config: pytest.Config) -> None:
    # A test suite started in the background by a non-interactive shell (`make test &`, a CI runner's
    # script) inherits SIGINT ignored, and so would every campaign and server the tests start: the tests
    # that press Ctrl-C on them would see it ignored (exit 0 instead of 130). A handler here (not an
    # ignored signal) is reset to the default in every program the tests start.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The suite checks the harness, not how busy the machine running it is: runs of its campaigns are
    # judged by generous accuracy bounds (a run above a bound is recorded `fidelity`), inherited by every
    # campaign it starts. The tests of the bounds set their own (tests/test_endpoint_timing.py).
    for variable in ("FECBENCH_ENDPOINT_BOUND_MS", "FECBENCH_LATENESS_BOUND_MS", "FECBENCH_SCHEDULE_BOUND_MS"):
        os.environ.setdefault(variable, GENEROUS_BOUND_MS)
    # A run flagged all the same is re-run at once: the suite keeps the machine busy on purpose, waiting for it
    # to be quiet would only add time (tests/test_quiet.py tests the wait).
    os.environ.setdefault("FECBENCH_QUIET_WAIT_S", "0")


@pytest.fixture(autouse=True, scope="session")
def _calibrations_of_the_suite(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`--jobs auto` in the suite keeps its calibrations in the session's folder, not in the machine's store
    (fecbench.runners.executors.calibrations): a test reuses a calibration only when it made one on purpose."""
    from fecbench.runners.executors.calibrations import STORE_ENV
    from fecbench.runners.experiment.estimate import HISTORY_ENV

    if STORE_ENV not in os.environ:
        os.environ[STORE_ENV] = str(tmp_path_factory.mktemp("calibrations") / "jobs-calibrations.json")
    if HISTORY_ENV not in os.environ:   # the suite's campaigns are not this machine's history
        os.environ[HISTORY_ENV] = str(tmp_path_factory.mktemp("history") / "databases.txt")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
    # The longest files first, each file's tests kept together and in order (module fixtures made once):
    # pytest-xdist hands whole files out in this order (`--dist loadfile`), and a two-minute file handed
    # out last would keep one worker busy alone at the end of the parallel pass (tests/durations.py).
    durations.longest_files_first(items, durations.load())
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, BPF, Mininet); run the tests as root")
    for item in items:
        if "require_root" in item.keywords:
            item.add_marker(skip)


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]) -> Path:
    """`make(folder)` once per test session: under pytest-xdist, the first worker to ask makes it (the
    others wait on a lock) and every worker gets its result, instead of one campaign per worker."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER") is None:   # one process: a session fixture is once already
        return make(tmp_path_factory.mktemp(name))
    shared = base.parent                                # the session's folder, shared by its workers
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / f"{name}.done"
        if done.exists():
            return Path(done.read_text())
        folder = shared / name
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
        result = make(folder)
        done.write_text(str(result))
        return result


ROOT = Path(__file__).resolve().parent.parent


def campaign(design_name: str, needs: Path) -> Callable[[Path], Path]:
    """A maker for `once_per_session`: designs/<design_name>.toml run for real, its database in the folder
    it gets."""
    import subprocess
    import sys

    def make(folder: Path) -> Path:
        db = folder / f"{design_name}.sqlite"
        design = ROOT / "designs" / f"{design_name}.toml"   # the shipped file itself: its keys, its hash
        out = subprocess.run([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db)],
                             capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
        if out.returncode != 0:
            pytest.fail(f"{design_name} campaign failed ({out.returncode}):\n{out.stdout[-3000:]}\n"
                        f"{out.stderr[-3000:]}")
        return db

    if os.geteuid() != 0:
        pytest.skip(f"the {design_name} campaign needs root (network namespaces, BPF, Mininet)")
    if not needs.exists():
        pytest.skip(f"{needs} is not built (make bootstrap)")
    return make


FECQ_BINARY = ROOT / "quic-impls" / "fecq" / "target" / "release" / "fecq"


@pytest.fixture(scope="session")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """designs/smoke.toml run for real (root, Mininet, fecq): its database."""
    return once_per_session(tmp_path_factory, "smoke", campaign("smoke", FECQ_BINARY))


@pytest.fixture(scope="session")
def multipath_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """designs/multipath-smoke.toml run for real (root, Mininet, tquic, fecq): its database. tquic is built
    by `make bootstrap` (make native), so a missing build is a failure, not a skip."""
    client = ROOT / "quic-impls" / "tquic" / "build" / "bin" / "tquic_client"
    assert client.exists() or os.geteuid() != 0, f"{client} is missing: build it with `make native`"
    return once_per_session(tmp_path_factory, "multipath", campaign("multipath-smoke", client))


@pytest.fixture(scope="session")
def flows_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """designs/flows-smoke.toml run for real (root, Mininet, fecq, iperf3): its database."""
    return once_per_session(tmp_path_factory, "flows", campaign("flows-smoke", FECQ_BINARY))
