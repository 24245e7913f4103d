"""What a campaign keeps to explain its runs: qlog (and the TLS key log) from the endpoints, packet captures.

A design's `[capture]` (or `fecbench run --capture`) says, per kind, which runs keep it:

```toml
[capture]
qlog = "failed+outliers+sample:4"    # all | off | failed | outliers | sample:N, combined with '+' (default)
pcap = "off"                         # the same words (default off)
max_mb = 500                         # the campaign's artifacts stop growing beyond this (default 500)
snaplen = 65535                      # bytes of each packet a capture keeps (default 65535: whole packets)
```

`failed` keeps the runs that did not end `ok` (fidelity-flagged included); `outliers` the runs whose outcome
metric lies beyond Q3 + 3 IQR of the label's earlier runs of the same size (5 runs or more);
`sample:N` N runs of the campaign drawn by the design seed. A kind that may be kept is written by every run
that could need it and removed after the run when it is not kept. Kept files are compressed into
`<db stem>.artifacts/<run key>/` and listed in the database's `artifacts` table.

Packet captures (runners.run.pcap, fecbench.emulation.pcap): pcapng from tcpdump at the client's interfaces (every
path: `client.pcapng.gz`) and at each bottleneck, both directions (`bottleneck-<link>.pcapng.gz`), from before
the server starts until the client has stopped, the TLS secrets the endpoints wrote embedded, so
`tshark -r client.pcapng.gz -Y quic` (add `-d udp.port==PORT,quic` if QUIC is not recognised on the design's
port) and Wireshark show the QUIC frames. The default snaplen keeps whole packets: decrypting a QUIC packet needs
all of it (AEAD), so a shorter snaplen leaves the frames unreadable. A run's captures together stay within what
max_mb has left.

An implementation says how to ask for qlog and its key log in its descriptor (`[capture]` in impl.toml):

```toml
[capture]
qlog = { server = ["--qlog-dir", "{qlog_dir}"], client = ["--qlog-dir", "{qlog_dir}"] }
keylog = { client = ["--keylog-file", "{keylog_file}"] }
off = { server = ["--qlog_disable"], client = ["--qlog_disable"] }   # what to pass when qlog is not wanted
files = ["ckeys.log"]                # other files of the run folder that belong to the capture
qlog_format = "xquic-text"           # what the qlog folder holds when not qlog (default "qlog"): converted
qlog_cost = 0.056                    # what writing its qlog adds to a run's DCT, measured (bench capture)
```

A stack whose qlog costs more than `QLOG_BUDGET` (2 % of the DCT: `fecbench bench capture --design
designs/bench-capture-stacks.toml` measures each) writes it only in runs known in advance to keep it (`all`,
or the runs `sample:N` drew): with `failed` or `outliers`, which are known only after a run, every run of it would
write a qlog and be measured slower than the stack is.
"""

from __future__ import annotations

import gzip
import random
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from statistics import quantiles
from typing import Any

from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section
from fecbench.records.status import Status

KINDS = ("qlog", "pcap")
WORDS = ("all", "off", "failed", "outliers")
DEFAULTS = {"qlog": "failed+outliers+sample:4", "pcap": "off"}
MAX_MB = 500.0
#: The most writing a qlog may add to a run's DCT (a share) for a stack to write it in every run that might keep it.
QLOG_BUDGET = 0.02
SNAPLEN = 65535      # whole packets: QUIC's AEAD decrypts a packet only whole (runners.run.pcap)
OUTLIER_MIN_RUNS = 5
SIDES = ("server", "client")
#: What an implementation's qlog folder may hold: qlog itself, or a text log fecbench converts (xquic_qlog).
QLOG_FORMATS = ("qlog", "xquic-text")


@dataclass(frozen=True)
class Rule:
    """Which runs keep one kind of artifact."""
    words: frozenset[str]
    sample: int = 0

    @classmethod
    def parse(cls, text: str, where: str, file: str | Path | None) -> Rule:
        words, sample = set(), 0
        for part in str(text).split("+"):
            part = part.strip()
            if part.startswith("sample:") and part[7:].isdigit() and int(part[7:]) > 0:
                sample = int(part[7:])
            elif part in WORDS:
                words.add(part)
            else:
                raise SpecError(file, where, f"unknown capture rule {part!r}",
                                "all, off, failed, outliers, sample:N, combined with '+'")
        if "off" in words and (len(words) > 1 or sample):
            raise SpecError(file, where, "'off' combines with nothing")
        return cls(frozenset(words - {"off"}), sample)

    @property
    def off(self) -> bool:
        return not self.words and not self.sample

    def text(self) -> str:
        parts = sorted(self.words) + ([f"sample:{self.sample}"] if self.sample else [])
        return "+".join(parts) or "off"


@dataclass(frozen=True)
class CapturePolicy:
    qlog: Rule = field(default_factory=lambda: Rule.parse(DEFAULTS["qlog"], "capture.qlog", None))
    pcap: Rule = field(default_factory=lambda: Rule.parse(DEFAULTS["pcap"], "capture.pcap", None))
    max_mb: float = MAX_MB
    snaplen: int = SNAPLEN

    def rule(self, kind: str) -> Rule:
        return self.qlog if kind == "qlog" else self.pcap

    def settings(self) -> dict[str, Any]:
        return {"qlog": self.qlog.text(), "pcap": self.pcap.text(), "max_mb": self.max_mb, "snaplen": self.snaplen}


def parse_capture(section: Section) -> CapturePolicy:
    """A design's `[capture]` (absent: the defaults)."""
    rules = {kind: Rule.parse(section.get(kind, str, DEFAULTS[kind]), section.key(kind), section.file)
             for kind in KINDS}
    policy = CapturePolicy(qlog=rules["qlog"], pcap=rules["pcap"],
                           max_mb=float(section.get("max_mb", float, MAX_MB, min=1, max=10**7)),
                           snaplen=section.get("snaplen", int, SNAPLEN, min=64, max=65535))
    section.done()
    return policy


def parse_option(text: str, policy: CapturePolicy) -> CapturePolicy:
    """`--capture all`, `--capture off`, `--capture qlog=all,pcap=sample:3`: the design's policy, overridden."""
    from fecbench.inputs.errors import UserError

    rules = {"qlog": policy.qlog, "pcap": policy.pcap}
    parts = [p.strip() for p in text.split(",") if p.strip()]
    for part in parts:
        kind, sep, value = part.partition("=")
        kinds = KINDS if not sep else (kind.strip(),)
        if not sep:
            value = kind
        for k in kinds:
            if k not in KINDS:
                raise UserError(f"--capture {text}: unknown kind {k!r} (allowed: qlog, pcap)")
            try:
                rules[k] = Rule.parse(value.strip(), f"--capture {k}", None)
            except SpecError as exc:
                raise UserError(f"--capture {text}: {exc.problem} (allowed: {exc.allowed})") from None
    return CapturePolicy(qlog=rules["qlog"], pcap=rules["pcap"], max_mb=policy.max_mb, snaplen=policy.snaplen)


@dataclass
class CaptureArgs:
    """An implementation's `[capture]`: argv fragments per side for qlog, key log and qlog off; extra files."""
    qlog: dict[str, list[str]] = field(default_factory=dict)
    keylog: dict[str, list[str]] = field(default_factory=dict)
    off: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    qlog_format: str = "qlog"
    qlog_cost: float = 0.0            # the DCT share its qlog writer adds, as measured (0: within the budget)

    @property
    def qlog_capable(self) -> bool:
        return bool(self.qlog)

    @property
    def qlog_in_advance_only(self) -> bool:
        """Its qlog costs more than the budget: written only where the run is known in advance to keep it."""
        return self.qlog_cost > QLOG_BUDGET

    def fragments(self, qlog: bool, values: dict[str, Any], keys: bool = False) -> dict[str, list[str]]:
        """server_args / client_args fragments for a run that wants qlog (and keys) or not; `keys`: the key log
        also without qlog (a packet capture the run may keep: runners.run.pcap)."""
        out: dict[str, list[str]] = {"server_args": [], "client_args": []}
        for side in SIDES:
            parts = self.qlog.get(side, []) if qlog else self.off.get(side, [])
            parts = parts + (self.keylog.get(side, []) if qlog or keys else [])
            side_values = {**values, "qlog_dir": values.get(f"qlog_dir_{side}", ""),
                           "keylog_file": values.get(f"keylog_file_{side}", "")}
            out[f"{side}_args"] = [part.format_map(side_values) for part in parts]
        return out


def parse_capture_args(section: Section) -> CaptureArgs:
    """An implementation descriptor's `[capture]` table."""
    out = CaptureArgs()
    for key in ("qlog", "keylog", "off"):
        table = section.section(key)
        for side in SIDES:
            argv = table.get(side, list, [])
            if not all(isinstance(a, str) for a in argv):
                raise table.error(side, "must be a list of strings")
            if argv:
                getattr(out, key)[side] = argv
        table.done()
    out.files = section.get("files", list, [])
    out.qlog_format = section.get("qlog_format", str, "qlog")
    if out.qlog_format not in QLOG_FORMATS:
        raise section.error("qlog_format", f"must be one of {', '.join(QLOG_FORMATS)}")
    out.qlog_cost = float(section.get("qlog_cost", (int, float), 0.0, min=0.0, max=10.0))
    section.done()
    return out


# --- what a campaign keeps --------------------------------------------------------------------------

class Keeper:
    """Decides, after each run, which of its capture files the campaign keeps, compresses them into
    `<db stem>.artifacts/<run key>/` within the campaign's size bound, and says what it kept. One per
    artifacts folder in a process (the runs of `--jobs N` share it: outliers and the bound are campaign-wide)."""

    _registry: dict[Path, Keeper] = {}
    _registry_lock = threading.Lock()

    def __init__(self, policy: CapturePolicy, root: Path, sampled: set[str]) -> None:
        self.policy, self.root, self.sampled = policy, root, sampled
        self.lock = threading.Lock()
        self.metric: dict[tuple[str, int | None], list[float]] = {}
        self.used = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0

    @classmethod
    def for_campaign(cls, policy: CapturePolicy, root: Path, run_keys: list[str], seed: int) -> Keeper:
        with cls._registry_lock:
            keeper = cls._registry.get(root)
            if keeper is None or keeper.policy != policy:
                n = max(policy.qlog.sample, policy.pcap.sample)
                rng = random.Random(f"fecbench-capture:{seed}")
                sampled = set(rng.sample(sorted(run_keys), min(n, len(run_keys)))) if n else set()
                keeper = cls._registry[root] = cls(policy, root, sampled)
            return keeper

    def wants(self, kind: str, key: str, in_advance_only: bool = False) -> bool:
        """Whether a run should write this kind at all (it may still not be kept); ``in_advance_only`` (a stack
        whose qlog costs more than the budget): only where the run is known before it runs to keep it."""
        rule = self.policy.rule(kind)
        if rule.off:
            return False
        if in_advance_only:
            return "all" in rule.words or (rule.sample > 0 and key in self.sampled)
        return bool(rule.words) or key in self.sampled

    def _outlier(self, label: str, size: int | None, value: float | None) -> bool:
        if value is None:
            return False
        with self.lock:
            seen = self.metric.setdefault((label, size), [])
            outlier = False
            if len(seen) >= OUTLIER_MIN_RUNS:
                q1, _, q3 = quantiles(seen, n=4)
                outlier = value > q3 + 3 * (q3 - q1)
            seen.append(value)
        return outlier

    def keeps(self, kind: str, key: str, status: str, outlier: bool) -> bool:
        rule = self.policy.rule(kind)
        if rule.off:
            return False
        return ("all" in rule.words or key in self.sampled and rule.sample > 0
                or "failed" in rule.words and status != Status.OK or "outliers" in rule.words and outlier)

    def keep(self, key: str, label: str, size: int | None, status: str, metric: float | None,
             files: dict[str, list[Path]]) -> tuple[list[dict[str, Any]], str | None]:
        """Keep the run's capture files (kind -> files) the policy wants; rows for the artifacts table, and
        a note when the size bound stopped some."""
        outlier = self._outlier(label, size, metric)
        kept = {kind: bool(files.get(kind)) and self.keeps(kind, key, status, outlier) for kind in KINDS}
        # The key logs decrypt a kept capture or go with a kept qlog; alone they explain nothing.
        files = {kind: paths for kind, paths in files.items() if kept.get(kind, kept["qlog"] or kept["pcap"])}
        rows: list[dict[str, Any]] = []
        note = None
        folder = self.root / key
        if folder.is_dir():   # an earlier attempt's files (the run is being done again)
            freed = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            shutil.rmtree(folder, ignore_errors=True)
            with self.lock:
                self.used -= freed
        for kind, paths in files.items():
            for path in paths:
                if not path.is_file():
                    continue
                folder.mkdir(parents=True, exist_ok=True)
                # A competing flow's files (run folder's qlog/flow-<id>/…) keep its name in front of theirs.
                flow = next((f"{p.name}-" for p in path.parents if p.name.startswith("flow-")), "")
                name = f"{flow}{path.name}"
                target = folder / (name if path.suffix == ".gz" else f"{name}.gz")
                if path.suffix == ".gz":
                    shutil.copyfile(path, target)
                else:
                    with path.open("rb") as src, gzip.open(target, "wb", compresslevel=6) as dst:
                        shutil.copyfileobj(src, dst)
                size_bytes = target.stat().st_size
                with self.lock:
                    over = self.used + size_bytes > self.policy.max_mb * 1e6
                    if not over:
                        self.used += size_bytes
                if over:
                    target.unlink()
                    note = f"capture: the campaign's artifacts reached max_mb = {self.policy.max_mb:g}; not kept"
                    continue
                rows.append({"kind": kind, "path": str(target.relative_to(self.root)), "bytes": size_bytes,
                             "why": "outlier" if outlier else ("failed" if status != Status.OK else "policy")})
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        return rows, note


def artifacts_root(db_path: Path) -> Path:
    """Where a campaign keeps its runs' artifacts: results/<name>.artifacts/ beside the database."""
    return db_path.resolve().parent / f"{db_path.stem}.artifacts"
