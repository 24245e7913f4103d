"""Link shaping backends: netem where the kernel has it, else the userspace delay element."""

from __future__ import annotations

import functools
import os
import subprocess

from fecbench.inputs.errors import UserError

BACKENDS = ("netem", "delayline")
ENV_VAR = "FECBENCH_LINK_BACKEND"


@functools.lru_cache(maxsize=1)
def netem_probe() -> tuple[bool, str]:
    """Try netem in a throwaway network namespace (nothing is left behind): (available, reason)."""
    try:
        proc = subprocess.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"cannot probe netem: {exc}"
    if proc.returncode == 0:
        return True, "netem delay works"
    reason = (proc.stderr or proc.stdout).strip().splitlines()
    return False, reason[0] if reason else f"tc exited with status {proc.returncode}"


def netem_available() -> bool:
    """Whether this kernel has netem (probed once per process; needs root to probe)."""
    return netem_probe()[0]


def delayline_available() -> tuple[bool, str]:
    try:
        from fecbench.timekeeping.delayline import binary_path
    except ImportError as exc:
        return False, f"fecbench.timekeeping.delayline is not importable: {exc}"
    try:
        path = binary_path()
    except Exception as exc:  # noqa: BLE001 - the wrapper says why the binary is missing
        return False, str(exc)
    if not os.access(str(path), os.X_OK):
        return False, f"{path} is not built: run `make -C delayline`"
    return True, str(path)


def select_backend(requested: str | None = None, trace_link: str | None = None) -> str:
    """The backend to use: the request (or $FECBENCH_LINK_BACKEND), else netem if present, else delayline.
    `trace_link` (a link direction driven by a packet-delivery trace or a delay series, named) needs the delay
    element: the kernel has no qdisc that serves a trace's delivery opportunities, and a rate limiter would only
    approximate one."""
    choice = requested or os.environ.get(ENV_VAR) or "auto"
    if choice not in (*BACKENDS, "auto"):
        source = "--link-backend" if requested else ENV_VAR
        raise UserError(f"{source}: unknown link backend {choice!r} (allowed: auto, netem, delayline)")
    if trace_link and choice == "netem":
        raise UserError(f"link backend netem: {trace_link} follows a trace or a delay series, which only the delay "
                        "element replays (no kernel qdisc serves a trace's delivery opportunities or a series' "
                        "delays): use --link-backend delayline")
    if choice in ("netem", "auto") and not trace_link:
        ok, reason = netem_probe()
        if ok:
            return "netem"
        if choice == "netem":
            raise UserError(f"link backend netem: this kernel has no netem qdisc, module sch_netem "
                            f"(CONFIG_NET_SCH_NETEM; tc: {reason}); load it with `modprobe sch_netem` where "
                            "the kernel ships it, or use --link-backend delayline (fecbench's delay element)")
    ok, reason = delayline_available()
    if not ok:
        raise UserError(f"link backend delayline: {reason}")
    return "delayline"
