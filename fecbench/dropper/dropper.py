"""Attach, configure, read and detach dropper instances (through the `fecdrop` loader in dropper/build/).

An instance is a BPF program on one interface's egress or ingress, with its maps pinned under
/sys/fs/bpf/fecbench/<name>/ together with a record of where it is attached. Two hooks:
- tcx (Linux >= 6.6): a pinned tcx link; removing the pin directory detaches it;
- clsact (any kernel with clsact + cls_bpf, e.g. Debian 12's 6.1, Ubuntu 22.04's 5.15): a cls_bpf filter
  (direct action, priority 1, a handle of its own) on the clsact qdisc, created if absent. A filter does
  not go away with its pins: `detach` deletes it in its namespace, and `fecbench clean` does the same
  for a killed process (resource kind `tc_filter`).
`hook="auto"` (the default, or FECBENCH_DROPPER_HOOK) takes tcx when the kernel has it, else clsact.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fecbench.dropper.models import LossModel, NoLoss, model_class
from fecbench.dropper.models.base import GE_TABLE_LEN, ONE
from fecbench.host import bpfsys, cleanup
from fecbench.host.paths import REPO_ROOT as REPO
from fecbench.inputs.errors import UserError, require_root

PIN_ROOT = Path("/sys/fs/bpf/fecbench")
LOG_BYTES = 1 << 24  # ring buffer of the verdict log: ~700 000 records of 24 bytes
PROTOCOLS = {"udp": 17, "tcp": 6, None: None}
RECORD_DTYPE = np.dtype([("index", "<u8"), ("verdict", "u1"), ("state", "u1"), ("pad", "<u2"), ("len", "<u4")])
_NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,100}$")
_counter = itertools.count()
_handles = itertools.count(1)
HOOKS = ("auto", "tcx", "clsact")
HOOK_ENV = "FECBENCH_DROPPER_HOOK"
TC_PRIORITY = 1  # clsact filters: priority 1 (the loader's FD_TC_PRIORITY), before the hook's other filters


def fecdrop_binary() -> Path:
    path = Path(os.environ.get("FECBENCH_FECDROP", REPO / "dropper" / "build" / "fecdrop"))
    if not path.exists():
        raise UserError(f"the dropper loader {path} is not built: run `make -C {REPO / 'dropper'}`")
    return path


def run_fecdrop(*args: str) -> str:
    """Run the loader; its exit status 2 is a user error, anything else non-zero a failure."""
    proc = subprocess.run([str(fecdrop_binary()), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        message = proc.stderr.strip().removeprefix("fecdrop: error: ") or f"fecdrop exited {proc.returncode}"
        if proc.returncode == 2:
            raise UserError(f"dropper: {message}")
        raise RuntimeError(f"fecdrop {args[0]} failed: {message}")
    return proc.stdout


def ensure_bpffs() -> None:
    """Mount bpffs at /sys/fs/bpf when it is not mounted yet (pins live there)."""
    mounts = Path("/proc/mounts").read_text().split("\n")
    if not any(line.split()[1:3] == ["/sys/fs/bpf", "bpf"] for line in mounts if line):
        proc = subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], capture_output=True, text=True)
        if proc.returncode != 0 and "busy" not in proc.stderr:
            raise UserError(f"cannot mount bpffs at /sys/fs/bpf: {proc.stderr.strip()}")
    PIN_ROOT.mkdir(exist_ok=True)


def netns_path(netns: str | int | None) -> str | None:
    """None: this namespace; str: an `ip netns` name; int: a PID whose namespace to use."""
    if netns is None:
        return None
    if isinstance(netns, bool):
        raise UserError(f"netns must be a name or a PID, not {netns!r}")
    if isinstance(netns, int):
        path = Path(f"/proc/{netns}/ns/net")
        if not path.exists():
            raise UserError(f"no process with PID {netns} (network namespace of a Mininet host?)")
        return str(path)
    path = Path("/run/netns") / netns
    if "/" in netns or not path.exists():
        raise UserError(f"unknown network namespace {netns!r} (see `ip netns list`)")
    return str(path)


def tcx_available() -> bool | None:
    """Does this kernel have tcx links (Linux >= 6.6)? A real probe: BPF_PROG_QUERY for the tcx ingress
    attach type on the loopback interface, which older kernels reject with EINVAL. None: cannot tell
    (not root, no bpf syscall)."""
    attr = (ctypes.c_uint32 * 32)()
    attr[0], attr[1] = 1, 46  # target_ifindex 1 (lo), BPF_TCX_INGRESS; no id buffer: just the count
    try:
        bpfsys.syscall(bpfsys.BPF_PROG_QUERY, attr)
    except bpfsys.BpfUnavailable:
        return None
    except OSError as exc:
        return False if exc.errno == errno.EINVAL else None
    return True


def resolve_hook(hook: str | None) -> str:
    """The hook to use: `hook`, else $FECBENCH_DROPPER_HOOK, else auto; auto -> tcx if available, else clsact."""
    source = "hook"
    if hook is None:
        hook, source = os.environ.get(HOOK_ENV) or "auto", HOOK_ENV
    if hook not in HOOKS:
        raise UserError(f"dropper: {source} must be auto, tcx or clsact, not {hook!r}")
    if hook == "auto":
        return "clsact" if tcx_available() is False else "tcx"
    return hook


def hooks(dev: str, netns: str | int | None = None) -> dict[str, int]:
    """Number of dropper programs (tcx and clsact) on `dev`'s egress and ingress (for fidelity checks)."""
    require_root("querying tc hooks")
    ns = netns_path(netns)
    return json.loads(run_fecdrop("hooks", "--dev", dev, *(["--netns", ns] if ns else [])))


@dataclass(frozen=True)
class Filter:
    """Which IP packets the dropper considers; the others pass and do not advance the stream.
    proto: "udp", "tcp" or None; port: source or destination port; src/dst: IPv4 or IPv6 addresses."""

    proto: str | None = None
    port: int | None = None
    src: str | None = None
    dst: str | None = None

    def __post_init__(self) -> None:
        if self.proto not in PROTOCOLS:
            raise UserError(f"filter: proto must be udp, tcp or None, not {self.proto!r}")
        if self.port is not None and not (isinstance(self.port, int) and 0 <= self.port <= 65535):
            raise UserError(f"filter: port must be an integer in 0..65535, not {self.port!r}")
        import ipaddress

        families = set()
        for key in ("src", "dst"):
            value = getattr(self, key)
            if value is not None:
                try:
                    families.add(ipaddress.ip_address(value).version)
                except ValueError:
                    raise UserError(f"filter: {key} = {value!r} is not an IP address") from None
        if len(families) > 1:
            raise UserError("filter: src and dst must be both IPv4 or both IPv6")

    def args(self) -> list[str]:
        out: list[str] = []
        if self.proto:
            out += ["--proto", str(PROTOCOLS[self.proto])]
        if self.port is not None:
            out += ["--port", str(self.port)]
        if self.src:
            out += ["--src", self.src]
        if self.dst:
            out += ["--dst", self.dst]
        return out


def check_seed(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < 1 << 64:
        raise UserError(f"dropper: {name} must be an integer in [0, 2^64), not {value!r}")
    return int(value)


def model_args(model: LossModel, seed: int, stream: int, tmpdir: str,
               ge_table_len: int = GE_TABLE_LEN) -> list[str]:
    """The loader's command-line form of a model at a seed and stream (the model says its own part)."""
    return ["--seed", str(seed), "--stream", str(stream), *model.loader_args(tmpdir, ge_table_len)]


class Dropper:
    """One dropper instance on one interface hook. Use `Dropper.attach(...)`; a context manager."""

    def __init__(self, pin: Path, dev: str, direction: str, model: LossModel | None, seed: int, stream: int,
                 filter: Filter | None, log: bool, recorded: bool, hook: str = "?") -> None:
        self.pin, self.dev, self.direction, self.hook = pin, dev, direction, hook
        self.model, self.seed, self.stream, self.filter, self.log = model, seed, stream, filter, log
        self.ge_table_len = GE_TABLE_LEN
        self._recorded = recorded
        self._log_chunks: list[np.ndarray] = []
        self.attached = True

    @classmethod
    def attach(cls, dev: str, netns: str | int | None = None, direction: str = "egress",
               model: LossModel | None = None, seed: int = 0, stream: int = 0, filter: Filter | None = None,
               name: str | None = None, log: bool = False, log_bytes: int = LOG_BYTES,
               persistent: bool = False, hook: str | None = None) -> Dropper:
        """Attach a dropper to `dev`'s egress (default) or ingress inside `netns`.

        `hook`: "tcx", "clsact" or "auto" (tcx when the kernel has it); None = $FECBENCH_DROPPER_HOOK or
        auto. The instance is recorded for `fecbench clean` unless `persistent` (the CLI's attach, meant
        to outlive its process). Bad input raises UserError and leaves nothing attached."""
        require_root("attaching a dropper")
        hook = resolve_hook(hook)
        if direction not in ("egress", "ingress"):
            raise UserError(f"dropper: direction must be egress or ingress, not {direction!r}")
        if not isinstance(dev, str) or not dev or "/" in dev or len(dev) > 15:
            raise UserError(f"dropper: bad interface name {dev!r}")
        model = model or NoLoss()
        seed, stream = check_seed("seed", seed), check_seed("stream", stream)
        if log_bytes < 4096 or log_bytes & (log_bytes - 1):
            raise UserError("dropper: log_bytes must be a power of two >= 4096")
        ns = netns_path(netns)
        if name is None:
            name = f"{cleanup.prefix()}-{dev}-{direction}-{next(_counter)}"
        elif not persistent:
            name = f"{cleanup.prefix()}-{name}"
        if not _NAME_RE.match(name):
            raise UserError(f"dropper: bad name {name!r} (letters, digits, _ . @ - only)")
        ensure_bpffs()
        pin = PIN_ROOT / name
        if pin.exists():
            raise UserError(f"dropper: an instance named {name!r} already exists ({pin})")
        # a clsact filter's handle, unique among this machine's live instances (pid, counter)
        handle = ((os.getpid() << 10) | (next(_handles) & 0x3FF)) & 0xFFFFFFFF or 1
        args = ["attach", "--dev", dev, "--pin", str(pin), "--direction", direction, "--hook", hook,
                "--handle", str(handle)]
        if ns:
            args += ["--netns", ns]
        if log:
            args += ["--log-bytes", str(log_bytes)]
        args += (filter or Filter()).args()
        # recorded before the loader runs, so that a kill mid-attach leaves nothing behind
        ns_stat = os.stat(ns or "/proc/self/ns/net")
        tc_filter = {"netns": ns, "netns_dev": ns_stat.st_dev, "netns_ino": ns_stat.st_ino, "dev": dev,
                     "direction": direction, "handle": handle, "priority": TC_PRIORITY, "created_qdisc": False}
        cleanup.record("bpf_pin", str(pin), dev=dev, direction=direction)
        if hook == "clsact":
            cleanup.record("tc_filter", str(pin), **tc_filter)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                attached = json.loads(run_fecdrop(*args, *model_args(model, seed, stream, tmp)))
        except BaseException:
            cleanup.forget("tc_filter", str(pin))
            cleanup.forget("bpf_pin", str(pin))
            raise
        if hook == "clsact" and attached["created_qdisc"]:
            cleanup.forget("tc_filter", str(pin))
            cleanup.record("tc_filter", str(pin), **{**tc_filter, "created_qdisc": True})
        if persistent:
            cleanup.forget("tc_filter", str(pin))
            cleanup.forget("bpf_pin", str(pin))
        return cls(pin, dev, direction, model, seed, stream, filter, log, recorded=not persistent,
                   hook=attached["hook"])

    @classmethod
    def open(cls, name: str) -> Dropper:
        """An existing instance by its full name (as `fecbench dropper attach` printed it)."""
        pin = PIN_ROOT / name
        if not _NAME_RE.match(name) or not (pin / "attach").exists():
            raise UserError(f"dropper: no instance named {name!r} under {PIN_ROOT}")
        st = json.loads(run_fecdrop("stats", "--pin", str(pin)))
        model = model_class(st["model"]).from_readback(st["thresholds"])  # None: set() needs a model
        return cls(pin, "?", "?", model, st["seed"], st["stream"], None, False, recorded=False, hook=st["hook"])

    @property
    def name(self) -> str:
        return self.pin.name

    def _check(self) -> None:
        if not self.attached:
            raise UserError(f"dropper {self.name} is detached")

    def set(self, model: LossModel | None = None, seed: int | None = None, stream: int | None = None,
            flow_bin_ms: int | None = None, min_len: int = 0) -> None:
        """Change parameters without reloading; resets the stream (index 0, state Good) and counters.
        `flow_bin_ms`: also count packets per flow (protocol and ports) in bins of that many ms from now
        (`flows`); None: no per-flow counting. `min_len`: frames shorter than this many bytes (IP packet and
        Ethernet header) pass untouched and take no index (counted `unmatched`); 0: every packet takes one."""
        self._check()
        model = model or self.model
        if model is None:
            raise UserError(f"dropper {self.name}: the model in force (a trace) cannot be read back from "
                            "the kernel; give set() the model")
        seed = self.seed if seed is None else check_seed("seed", seed)
        stream = self.stream if stream is None else check_seed("stream", stream)
        flows = [] if flow_bin_ms is None else ["--flow-bin-ms", str(int(flow_bin_ms))]
        if isinstance(min_len, bool) or not isinstance(min_len, int) or not 0 <= min_len <= 65535:
            raise UserError(f"dropper {self.name}: min_len must be an integer in 0..65535, not {min_len!r}")
        with tempfile.TemporaryDirectory() as tmp:
            run_fecdrop("set", "--pin", str(self.pin), *model_args(model, seed, stream, tmp, self.ge_table_len),
                        *flows, *(["--min-len", str(min_len)] if min_len else []))
        self.model, self.seed, self.stream = model, seed, stream
        self._discard_log()

    def reset(self) -> None:
        """Back to index 0 and state Good with the same parameters; counters to zero."""
        self._check()
        run_fecdrop("reset", "--pin", str(self.pin))
        self._discard_log()

    def stats(self) -> dict[str, Any]:
        """Counters: seen, matched (= index), dropped, good, bad, bursts, longest_burst, gso, non_ip, ...;
        `hook`: "tcx" or "clsact"."""
        self._check()
        st = json.loads(run_fecdrop("stats", "--pin", str(self.pin)))
        st["matched"] = st["index"]  # every matching packet takes one index
        st["loss_rate"] = st["dropped"] / st["matched"] if st["matched"] else 0.0
        st["name"], st["dev"], st["direction"] = self.name, self.dev, self.direction
        # the parameters in force, read back from the kernel's thresholds
        st.update({f"model_{name}": t / ONE for name, t in st.pop("thresholds").items()})
        return st

    def flows(self) -> dict[str, Any]:
        """Per-flow counters since the last set (with flow_bin_ms): `t0_ns` (CLOCK_MONOTONIC, bin 0's
        start), `bin_ns`, and `flows`: rows [proto, sport, dport, bin, packets, bytes, dropped]."""
        self._check()
        return json.loads(run_fecdrop("flows", "--pin", str(self.pin)))

    def _drain_log(self) -> np.ndarray:
        with tempfile.NamedTemporaryFile(suffix=".bin") as out:
            run_fecdrop("log", "--pin", str(self.pin), "--out", out.name)
            return np.fromfile(out.name, dtype=RECORD_DTYPE)

    def _discard_log(self) -> None:
        if self.log:
            self._drain_log()
        self._log_chunks = []

    def verdict_log(self) -> np.ndarray:
        """Verdicts since the last set/reset, sorted by index: fields index, verdict, state, len.
        Needs log=True at attach (the ring buffer holds about log_bytes / 24 records; records that did
        not fit are counted in stats()["log_lost"])."""
        self._check()
        if not self.log:
            raise UserError(f"dropper {self.name} was attached without log=True")
        self._log_chunks.append(self._drain_log())
        records = np.concatenate(self._log_chunks)
        records = records[np.argsort(records["index"], kind="stable")]
        self._log_chunks = [records]
        return records[["index", "verdict", "state", "len"]]

    def detach(self) -> None:
        """Remove exactly what attach created (tcx link, or clsact filter and the qdisc if attach created
        it and nothing else uses it; pins); idempotent."""
        if not self.attached:
            return
        run_fecdrop("detach", "--pin", str(self.pin))
        if self._recorded:
            cleanup.forget("tc_filter", str(self.pin))
            cleanup.forget("bpf_pin", str(self.pin))
        self.attached = False

    def __enter__(self) -> Dropper:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.detach()

    def __repr__(self) -> str:
        return (f"Dropper({self.name}, {self.hook}, {self.model.describe() if self.model else '?'}, seed={self.seed}, "
                f"stream={self.stream})")
