"""Shared pytest configuration: the `require_root` marker skips (with a reason) when not root."""

from __future__ import annotations

import os
import signal

import pytest

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
    for variable in ("FECBENCH_ENDPOINT_BOUND_MS", "FECBENCH_LATENESS_BOUND_MS"):
        os.environ.setdefault(variable, GENEROUS_BOUND_MS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, BPF, Mininet); run the tests as root")
    for item in items:
        if "require_root" in item.keywords:
            item.add_marker(skip)


# --- the smoke campaign, run once per session (runner engineer) ---------------------------------

@pytest.fixture(scope="session")
def smoke_db(tmp_path_factory: pytest.TempPathFactory):
    """Run designs/smoke.toml for real (root, Mininet, fecq) into a temp folder; return the database path."""
    import subprocess
    import sys
    from pathlib import Path

    if os.geteuid() != 0:
        pytest.skip("the smoke campaign needs root (network namespaces, BPF, Mininet)")
    root = Path(__file__).resolve().parent.parent
    if not (root / "quic-impls" / "fecq" / "target" / "release" / "fecq").exists():
        pytest.skip("fecq is not built (make bootstrap)")
    db = tmp_path_factory.mktemp("smoke") / "smoke.sqlite"
    out = subprocess.run([sys.executable, "-m", "fecbench", "run", str(root / "designs" / "smoke.toml"),
                          "--db", str(db)], capture_output=True, text=True, cwd=root, timeout=600, check=False)
    if out.returncode != 0:
        pytest.fail(f"smoke campaign failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return db


# --- the multipath smoke campaign (tquic single-path vs multipath), run once per session ---------

@pytest.fixture(scope="session")
def multipath_db(tmp_path_factory: pytest.TempPathFactory):
    """Run designs/multipath-smoke.toml for real (root, Mininet, tquic); return the database path.
    tquic is built by `make bootstrap` (make native), so a missing build is a failure, not a skip."""
    import subprocess
    import sys
    from pathlib import Path

    if os.geteuid() != 0:
        pytest.skip("the multipath campaign needs root (network namespaces, BPF, Mininet)")
    root = Path(__file__).resolve().parent.parent
    client = root / "quic-impls" / "tquic" / "build" / "bin" / "tquic_client"
    assert client.exists(), f"{client} is missing: build it with `make native` (part of make bootstrap)"
    db = tmp_path_factory.mktemp("multipath") / "multipath-smoke.sqlite"
    out = subprocess.run([sys.executable, "-m", "fecbench", "run", str(root / "designs" / "multipath-smoke.toml"),
                          "--db", str(db)], capture_output=True, text=True, cwd=root, timeout=600, check=False)
    if out.returncode != 0:
        pytest.fail(f"multipath campaign failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return db


# --- the competing-flows smoke campaign, run once per session -----------------------------------

@pytest.fixture(scope="session")
def flows_db(tmp_path_factory: pytest.TempPathFactory):
    """Run designs/flows-smoke.toml for real (root, Mininet, fecq, iperf3); return the database path."""
    import subprocess
    import sys
    from pathlib import Path

    if os.geteuid() != 0:
        pytest.skip("the competing-flows campaign needs root (network namespaces, BPF, Mininet)")
    root = Path(__file__).resolve().parent.parent
    if not (root / "quic-impls" / "fecq" / "target" / "release" / "fecq").exists():
        pytest.skip("fecq is not built (make bootstrap)")
    folder = tmp_path_factory.mktemp("flows")
    design = folder / "flows-smoke.toml"
    design.write_text((root / "designs" / "flows-smoke.toml").read_text().replace(
        'topology = "topologies/single.toml"', f'topology = "{root / "topologies" / "single.toml"}"'))
    db = folder / "flows-smoke.sqlite"
    out = subprocess.run([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db)],
                         capture_output=True, text=True, cwd=root, timeout=600, check=False)
    if out.returncode != 0:
        pytest.fail(f"flows campaign failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return db
