"""The host fingerprint recorded with every campaign: kernel, CPU, memory, tool versions."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from fecbench.host import affinity
from fecbench.timekeeping.delayline import CPUS_ENV as DELAYLINE_CPUS_ENV

_TOOLS = {
    "tc": ["tc", "-V"],
    "ip": ["ip", "-V"],
    "clang": ["clang", "--version"],
    "bpftool": ["bpftool", "version"],
    "cargo": ["cargo", "--version"],
    "rustc": ["rustc", "--version"],
}


def _first_line(argv: list[str]) -> str | None:
    cargo_bin = Path.home() / ".cargo" / "bin"
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{cargo_bin}"}
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _mem_total_kib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def fingerprint(link_backend: str | None = None) -> dict[str, Any]:
    """What machine and software a campaign ran on."""
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "mem_kib": _mem_total_kib(),
        "python": sys.version.split()[0],
        "link_backend": link_backend,
        "delayline_cpus": os.environ.get(DELAYLINE_CPUS_ENV) or None,   # delay elements pinned
        "tools": {name: _first_line(argv) for name, argv in _TOOLS.items()},
        "cpu_affinity": affinity.describe(),
    }
    try:
        import mininet.net

        info["tools"]["mininet"] = mininet.net.VERSION
    except ImportError:
        info["tools"]["mininet"] = None
    for module in ("numpy", "scipy", "pandas"):
        try:
            info["tools"][module] = __import__(module).__version__
        except ImportError:
            info["tools"][module] = None
    return info
