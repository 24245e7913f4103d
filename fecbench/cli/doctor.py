"""`fecbench doctor`: what this machine can do, and how to fix what it cannot.

Every check is a real probe (a BPF syscall, a qdisc added in a throwaway network namespace, an
import), not a guess from version numbers. Optional capabilities (netem, OVS) are reported as such.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fecbench.host import bpfsys, cleanup
from fecbench.host.paths import REPO_ROOT as ROOT

MIN_KERNEL = (5, 12)  # BPF atomic fetch-add (the dropper's index), ring buffer, spin locks in tc programs

# Native artefacts built by `make bootstrap`, relative to the checkout.
ARTEFACTS = {
    "dropper": "dropper/build",
    "delayline": "delayline/build/delayline",
    "schedlat": "schedlat/build/schedlat",
    "fecq": "quic-impls/fecq/target/release/fecq",
    "tquic": "quic-impls/tquic/build/bin/tquic_client",
}
# Built on demand, not by bootstrap (`make test` builds them for their tests).
OPTIONAL_ARTEFACTS = {
    "xquic": ("quic-impls/xquic/build/bin/test_client", "make xquic"),
    "rquic": ("quic-impls/rquic/build/bin/rquic-fecbench", "make rquic"),
}


@dataclass
class Check:
    name: str
    status: str  # ok | missing | optional (an optional capability that is absent) | skipped
    detail: str
    fix: str = ""
    required: bool = True


def _run(argv: list[str], timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _tool_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    proc = _run(argv)
    return _first_line(proc.stdout or proc.stderr) or "present"


@contextlib.contextmanager
def _scratch_netns() -> Iterator[str]:
    """A named network namespace of our own for probes, removed afterwards."""
    name = f"{cleanup.prefix()}doc{uuid.uuid4().hex[:6]}"
    proc = _run(["ip", "netns", "add", name])
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or "ip netns add failed")
    cleanup.record("netns", name)
    try:
        _run(["ip", "-n", name, "link", "set", "lo", "up"])
        yield name
    finally:
        _run(["ip", "netns", "delete", name])
        cleanup.forget("netns", name)


def _probe(ns: str, argv: list[str]) -> tuple[bool, str]:
    proc = _run(["ip", "netns", "exec", ns, *argv])
    return proc.returncode == 0, _first_line(proc.stderr)


def check_root() -> Check:
    if os.geteuid() == 0:
        return Check("root", "ok", "running as root")
    return Check("root", "missing", f"running as uid {os.geteuid()}",
                 "run as root (sudo): namespaces, BPF and Mininet need it")


def check_kernel() -> Check:
    release = platform.release()
    try:
        version = tuple(int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        version = (0, 0)
    if version >= MIN_KERNEL:
        return Check("kernel", "ok", f"Linux {release}")
    return Check("kernel", "missing", f"Linux {release}",
                 f"use a kernel >= {MIN_KERNEL[0]}.{MIN_KERNEL[1]} (BPF atomic fetch-add, ring buffer, spin locks)")


def check_bpf_syscall() -> Check:
    """Create (and close) a one-entry BPF array map through the bpf(2) syscall."""
    if os.geteuid() != 0:
        return Check("bpf syscall", "skipped", "needs root to probe", "run doctor as root")
    attr = (ctypes.c_uint32 * 32)()
    attr[0], attr[1], attr[2], attr[3] = 2, 4, 4, 1  # BPF_MAP_TYPE_ARRAY, key 4 B, value 4 B, 1 entry
    try:
        fd = bpfsys.syscall(bpfsys.BPF_MAP_CREATE, attr)
    except bpfsys.BpfUnavailable as exc:
        return Check("bpf syscall", "missing", exc.strerror)
    except OSError as exc:
        return Check("bpf syscall", "missing", f"bpf(BPF_MAP_CREATE) failed: {exc.strerror}",
                     "enable CONFIG_BPF_SYSCALL; check kernel.unprivileged_bpf_disabled and lockdown")
    os.close(fd)
    return Check("bpf syscall", "ok", "bpf(2) creates maps")


def check_tcx() -> Check:
    """tcx links (Linux >= 6.6): optional, the dropper falls back to a clsact cls_bpf filter."""
    if os.geteuid() != 0:
        return Check("tcx links", "skipped", "needs root to probe", "run doctor as root", required=False)
    from fecbench.dropper.dropper import tcx_available

    if tcx_available():
        return Check("tcx links", "ok", "BPF tcx hooks: the dropper attaches through tcx links", required=False)
    return Check("tcx links", "optional", "absent (Linux < 6.6): the dropper attaches as a clsact filter",
                 "optional: Linux >= 6.6 adds tcx links", required=False)


def check_btf() -> Check:
    if Path("/sys/kernel/btf/vmlinux").exists():
        return Check("BTF", "ok", "/sys/kernel/btf/vmlinux present")
    return Check("BTF", "missing", "/sys/kernel/btf/vmlinux absent", "use a kernel built with CONFIG_DEBUG_INFO_BTF=y")


def bpffs_mounted(path: str = "/sys/fs/bpf") -> bool:
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == path and line.split()[2] == "bpf" for line in mounts)


def check_bpffs() -> Check:
    if bpffs_mounted():
        return Check("bpffs", "ok", "mounted at /sys/fs/bpf")
    if os.geteuid() != 0:
        return Check("bpffs", "missing", "/sys/fs/bpf not mounted", "run as root: mount -t bpf bpf /sys/fs/bpf")
    proc = _run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"])
    if proc.returncode == 0:
        return Check("bpffs", "ok", "was not mounted: mounted it at /sys/fs/bpf")
    return Check("bpffs", "missing", f"mount failed: {_first_line(proc.stderr)}", "mount -t bpf bpf /sys/fs/bpf")


def check_netns_features() -> list[Check]:
    """Probe qdiscs, classifiers and link types inside a throwaway network namespace."""
    names = ["clsact", "cls_bpf", "tbf", "veth", "netem", "dummy links"]
    if os.geteuid() != 0:
        return [Check(n, "skipped", "needs root to probe", "run doctor as root", n not in ("netem", "dummy links"))
                for n in names]
    checks: list[Check] = []
    with _scratch_netns() as ns:
        ok, err = _probe(ns, ["tc", "qdisc", "add", "dev", "lo", "clsact"])
        checks.append(Check("clsact", "ok" if ok else "missing", "clsact qdisc" if ok else err,
                            "" if ok else "kernel needs CONFIG_NET_SCH_INGRESS (clsact)"))
        ok, err = _probe(ns, ["tc", "filter", "add", "dev", "lo", "egress", "bpf", "bytecode", "1,6 0 0 4294967295,"])
        checks.append(Check("cls_bpf", "ok" if ok else "missing", "bpf classifier on clsact egress" if ok else err,
                            "" if ok else "kernel needs CONFIG_NET_CLS_BPF"))
        ok, err = _probe(ns, ["ip", "link", "add", "fbv0", "type", "veth", "peer", "name", "fbv1"])
        checks.append(Check("veth", "ok" if ok else "missing", "veth pairs" if ok else err,
                            "" if ok else "kernel needs CONFIG_VETH"))
        ok, err = _probe(ns, ["tc", "qdisc", "add", "dev", "fbv0" if ok else "lo", "root", "tbf",
                              "rate", "10mbit", "burst", "15k", "limit", "30k"])
        checks.append(Check("tbf", "ok" if ok else "missing", "token bucket rate limiting" if ok else err,
                            "" if ok else "kernel needs CONFIG_NET_SCH_TBF"))
        if ok:
            checks.append(_check_link_as_built(ns, "fbv0"))
        ok, err = _probe(ns, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
        checks.append(Check("netem", "ok" if ok else "optional",
                            "netem delay available" if ok else f"absent ({err}): the delayline backend is used",
                            "" if ok else "optional: CONFIG_NET_SCH_NETEM enables the netem link backend",
                            required=False))
        ok, err = _probe(ns, ["ip", "link", "add", "fbd0", "type", "dummy"])
        checks.append(Check("dummy links", "ok" if ok else "optional",
                            "dummy links available" if ok else f"absent ({err}): not needed",
                            required=False))
    return checks


def _check_link_as_built(ns: str, dev: str) -> Check:
    """fecbench's own rate limiter and queues on a scratch interface, read back from the kernel: the bucket as
    small as designed (emulation.layout.tbf_burst), a queue in packets and one in bytes held as written."""
    from fecbench.emulation.layout import built, built_mismatches, shaping_commands, tbf_burst
    from fecbench.emulation.spec import Shaping

    wrong = []
    for asked in (Shaping(bw=4.0, owd=0.0, queue=20), Shaping(bw=4.0, owd=0.0, queue=30_000, queue_unit="bytes")):
        lines = "".join(" ".join(c) + "\n" for c in shaping_commands(dev, asked, "delayline"))
        proc = subprocess.run(["ip", "netns", "exec", ns, "tc", "-batch", "-"], input=lines, capture_output=True,
                              text=True, timeout=10, check=False)
        shown = _run(["ip", "netns", "exec", ns, "tc", "-j", "qdisc", "show", "dev", dev])
        try:
            have = built(json.loads(shown.stdout or "[]"), dev)
        except json.JSONDecodeError:
            have = {}
        wrong += ([_first_line(proc.stderr)] if proc.returncode else []) + built_mismatches(asked, have)
    if wrong:
        return Check("rate limiter and queue", "missing", "; ".join(wrong),
                     "the kernel does not hold fecbench's tbf with a pfifo/bfifo child as set: report it")
    return Check("rate limiter and queue", "ok", f"tbf bucket {tbf_burst(4.0)} bytes at 4 Mbit/s, queues of 20 "
                 "packets and 30,000 bytes held as written (read back)")


def check_choices() -> list[Check]:
    """What fecbench chooses here when nothing is requested: the link backend and the dropper's hook."""
    if os.geteuid() != 0:
        return [Check(name, "skipped", "needs root to probe", "run doctor as root")
                for name in ("link backend", "dropper hook")]
    from fecbench.dropper.dropper import HOOK_ENV, resolve_hook
    from fecbench.emulation.backend import ENV_VAR, select_backend
    from fecbench.inputs.errors import UserError

    checks = []
    try:
        backend = select_backend(None)
        why = (f"from ${ENV_VAR}" if os.environ.get(ENV_VAR) else
               "default: this kernel has netem" if backend == "netem" else
               "default: no netem in this kernel, so fecbench's delay element")
        checks.append(Check("link backend", "ok", f"{backend} ({why}; --link-backend or ${ENV_VAR} overrides)"))
    except UserError as exc:
        checks.append(Check("link backend", "missing", str(exc),
                            "make bootstrap (builds the delay element), or a kernel with netem (sch_netem)"))
    try:
        hook = resolve_hook(None)
        why = (f"from ${HOOK_ENV}" if os.environ.get(HOOK_ENV) else
               "default: tcx links" if hook == "tcx" else "default: no tcx links (Linux < 6.6), a clsact filter")
        checks.append(Check("dropper hook", "ok", f"{hook} ({why}; ${HOOK_ENV} overrides)"))
    except UserError as exc:
        checks.append(Check("dropper hook", "missing", str(exc), f"unset ${HOOK_ENV} or set it to auto, tcx or clsact"))
    return checks


def check_preemption() -> Check:
    """The kernel's preemption model: with none, a woken delay element waits until whatever runs on its CPU
    leaves the kernel (fecbench.host.affinity); optional, it only costs emulation accuracy under load. The line also
    says where campaigns put their processes and whether the kernel groups other load by session (autogroup)."""
    from fecbench.host import affinity

    model = affinity.preemption_model()
    cpus = len(affinity.all_cpus())
    placement = (f"campaigns keep their own processes off CPU {max(affinity.all_cpus())}, left to the delay "
                 f"elements and the endpoints (FECBENCH_CPU_AFFINITY={affinity.policy()})" if affinity.cpu_sets()
                 else "one CPU, or FECBENCH_CPU_AFFINITY=off: no CPU left to the delay elements")
    grouping = {"on": "autogroup on (the processes of one session, e.g. hogs started from one shell, share one "
                      "CPU share)",
                "off": "autogroup off (every CPU hog on the host takes a CPU share of its own)",
                "absent": "no autogroup"}[affinity.autogroup()]
    if model.split()[0] in ("full", "rt", "lazy"):
        return Check("kernel preemption", "ok", f"{model}; {grouping}; {placement}", required=False)
    fix = ("boot with preempt=full (PREEMPT_DYNAMIC kernels) for the delay elements' accuracy under load"
           if "none" in model or "voluntary" in model or "DYNAMIC" in model else "")
    return Check("kernel preemption", "optional", f"{model} ({cpus} CPUs): kernel code on a CPU delays a woken "
                 f"delay element; {grouping}; {placement}", fix, required=False)


def check_endpoint_timing() -> list[Check]:
    """Endpoint cgroups (which layout, what isolates) and the scheduler tracer (attached and detached again)."""
    from fecbench.host import cgroups
    from fecbench.timekeeping import schedlat

    if not cgroups.enabled():
        return [Check("endpoint timing", "optional", f"turned off ({cgroups.ENV}=off): runs record no endpoint "
                      "timing and --jobs auto cannot judge the endpoints", f"unset {cgroups.ENV}", required=False)]
    layout = cgroups.detect()
    group = Check("endpoint cgroups", "ok", layout.describe(), required=False)
    if layout.cpu is None:
        group = Check("endpoint cgroups", "optional", f"{layout.describe()}: networks' endpoints are measured but "
                      "not isolated from each other", "enable the cpu controller (cgroup v2: +cpu in the root's "
                      "cgroup.subtree_control)", required=False)
    if os.geteuid() != 0:
        return [group, Check("scheduler tracer", "skipped", "needs root to probe", "run doctor as root",
                             required=False)]
    try:
        tracer = schedlat.Tracer.acquire()
    except schedlat.Unavailable as exc:
        return [group, Check("scheduler tracer", "optional", f"cannot attach: {exc}; runs record no endpoint "
                             "timing", "a kernel with BTF and BPF tracing (tp_btf), make -C schedlat",
                             required=False)]
    tracer.release()
    return [group, Check("scheduler tracer", "ok", "BPF programs on sched_wakeup/sched_switch attach and detach",
                         required=False)]


def check_ovs() -> Check:
    if Path("/sys/module/openvswitch").exists():
        return Check("openvswitch", "ok", "module loaded (not needed)", required=False)
    return Check("openvswitch", "optional", "no openvswitch module: not needed, topologies are switchless",
                 required=False)


def check_mininet() -> Check:
    try:
        import mininet.net  # noqa: F401
        from mininet.net import VERSION
    except ImportError as exc:
        return Check("mininet", "missing", f"not importable: {exc}",
                     "apt-get install mininet; use the venv made by `make bootstrap` (system site-packages)")
    mnexec = shutil.which("mnexec")
    if mnexec is None:
        return Check("mininet", "missing", f"Mininet {VERSION} importable but mnexec not on PATH",
                     "apt-get install mininet")
    return Check("mininet", "ok", f"Mininet {VERSION}, mnexec at {mnexec}")


def check_clang_bpf() -> Check:
    if shutil.which("clang") is None:
        return Check("clang (bpf target)", "missing", "clang not found", "apt-get install clang llvm")
    proc = _run(["clang", "-print-targets"])
    version = _first_line(_run(["clang", "--version"]).stdout)
    if "bpf" in proc.stdout:
        return Check("clang (bpf target)", "ok", version)
    return Check("clang (bpf target)", "missing", f"{version} lacks the bpf target", "apt-get install clang llvm")


def _tool_check(name: str, argv: list[str], fix: str, required: bool = True) -> Check:
    version = _tool_version(argv)
    if version is None:
        return Check(name, "missing" if required else "optional", f"{argv[0]} not found", fix, required)
    return Check(name, "ok", version, required=required)


def check_artefacts() -> list[Check]:
    checks = []
    for name, rel in ARTEFACTS.items():
        path = ROOT / rel
        present = path.is_dir() and any(path.iterdir()) if rel.endswith("build") else path.is_file()
        checks.append(Check(f"built: {name}", "ok" if present else "missing", rel if present else f"{rel} not built",
                            "" if present else "make bootstrap"))
    for name, (rel, fix) in OPTIONAL_ARTEFACTS.items():
        present = (ROOT / rel).is_file()
        checks.append(Check(f"built: {name}", "ok" if present else "optional", rel if present else f"{rel} not built",
                            "" if present else fix, required=False))
    return checks


def check_sqlite() -> Check:
    version = sqlite3.sqlite_version
    if tuple(int(x) for x in version.split(".")) >= (3, 31):
        return Check("sqlite", "ok", f"SQLite {version}")
    return Check("sqlite", "missing", f"SQLite {version}", "need SQLite >= 3.31 (WAL, generated columns)")


def run_checks() -> list[Check]:
    steps: list[Callable[[], Check | list[Check]]] = [
        check_root, check_kernel, check_bpf_syscall, check_tcx, check_btf, check_bpffs, check_netns_features,
        check_choices, check_preemption, check_endpoint_timing, check_ovs,
        check_mininet, check_clang_bpf,
        lambda: _tool_check("bpftool", ["bpftool", "version"], "apt-get install bpftool"),
        lambda: _tool_check("tc (iproute2)", ["tc", "-V"], "apt-get install iproute2"),
        lambda: _tool_check("ethtool", ["ethtool", "--version"], "apt-get install ethtool"),
        lambda: _tool_check("ping", ["ping", "-V"], "apt-get install iputils-ping"),
        lambda: _tool_check("iperf3", ["iperf3", "--version"], "apt-get install iperf3", required=False),
        lambda: _tool_check("cargo", ["cargo", "--version"], "install Rust with rustup (stable)"),
        check_artefacts, check_sqlite,
    ]
    checks: list[Check] = []
    for step in steps:
        result = step()
        checks.extend(result if isinstance(result, list) else [result])
    return checks


def main(json_out: bool = False) -> int:
    checks = run_checks()
    failed = [c for c in checks if c.required and c.status != "ok"]
    if json_out:
        print(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=2))
        return 1 if failed else 0
    colours = {"ok": "green", "missing": "red", "optional": "yellow", "skipped": "yellow"}
    table = Table(title="fecbench doctor")
    for column in ("capability", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for c in checks:
        status = "absent (optional)" if c.status == "optional" else c.status
        table.add_row(c.name, f"[{colours[c.status]}]{status}[/]", c.detail, c.fix)
    console = Console()
    console.print(table)
    if failed:
        console.print(f"[red]{len(failed)} required capability(ies) missing:[/] {', '.join(c.name for c in failed)}")
    else:
        console.print("[green]all required capabilities present[/]")
    return 1 if failed else 0
