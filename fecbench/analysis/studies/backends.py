"""Same results, both backends: a small design run under netem and under the delay element on one kernel
(`fecbench bench backends`), compared per design point: the median DCT ratio (over runs paired by point,
label, size and repetition) and how far the paired runs' dropper verdict logs agree. Per pair and per
dropper, the logs are compared three ways (vm/README.md, "Same design, both backends"):

- agree:        the verdicts are equal at every index both runs saw (the dropper decides by index);
- same losses:  every packet dropped in either run lies in the prefix where both runs saw packets of
                the same lengths, so both runs lost the same packets of the same flow;
- identical:    same number of packets, same lengths, same verdicts.

The 5 % DCT goal is reported, not enforced: under QEMU's TCG the delay element is late by milliseconds.
"""

from __future__ import annotations

import io
import json
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tomllib

from fecbench.analysis import results
from fecbench.host.paths import REPO_ROOT
from fecbench.inputs.errors import UserError

BACKENDS = ("netem", "delayline")
DCT_GOAL = 0.05


def design_copy(src: Path, dst: Path, repetitions: int) -> None:
    """The design with verdict logs on, `repetitions`, and its topology as an absolute path."""
    text = src.read_text()
    design = tomllib.loads(text)["design"]
    topology = Path(design["topology"])
    if not topology.is_absolute():
        topology = next((p for p in (src.parent / topology, REPO_ROOT / topology) if p.exists()),
                        REPO_ROOT / topology)
    text = re.sub(r'(?m)^topology\s*=.*$', f'topology = "{topology.resolve()}"', text, count=1)
    text = re.sub(r'(?m)^(repetitions|verdict_log)\s*=.*\n', "", text)
    text = re.sub(r'(?m)^\[design\]\s*$', f"[design]\nrepetitions = {repetitions}\nverdict_log = true", text, count=1)
    dst.write_text(text)


def load(db: Path) -> dict[tuple, dict]:
    """Runs keyed by (point, label, size, repetition): status, dct_ms, loss seed, verdict logs and the
    delay element's median lateness over the run's directions (µs; None on netem)."""
    dct = dict(results.rows(db, "metrics", ["run_key", "dct_ms"]))
    logs: dict[str, dict] = {}
    for key, link, direction, data in results.rows(db, "verdict_logs", ["run_key", "link", "direction", "data"]):
        logs.setdefault(key, {})[(link, direction)] = np.load(io.BytesIO(data), allow_pickle=False)
    late: dict[str, list[float]] = {}
    for key, delay_json in results.rows(db, "link_stats", ["run_key", "delay_json"]):
        lateness = (json.loads(delay_json) or {}).get("lateness") if delay_json else None
        if lateness and lateness.get("p50_us") is not None:
            late.setdefault(key, []).append(lateness["p50_us"])
    columns = ["key", "point", "label", "size", "repetition", "loss_seed", "status"]
    runs = {}
    for row in results.rows(db, "runs", columns):
        run = dict(zip(columns, row, strict=True))
        key = run["key"]
        runs[(run["point"], run["label"], run["size"], run["repetition"])] = {
            **run, "dct_ms": dct.get(key), "logs": logs.get(key, {}),
            "lateness_p50_us": statistics.median(late[key]) if key in late else None}
    return runs


@dataclass(frozen=True)
class StreamComparison:
    """One dropper's verdict logs (one link direction) in the two runs of a pair."""

    packets: tuple[int, int]   # packets the dropper saw in run a, run b
    drops: tuple[int, int]     # of which it dropped
    common: int                # length of the prefix where both saw packets of the same lengths
    agree: bool                # verdicts equal at every index both saw
    same_losses: bool          # every drop of either run lies in the common prefix
    identical: bool            # same packets (lengths), same verdicts, same count


def compare_stream(a: np.ndarray, b: np.ndarray) -> StreamComparison:
    va, vb = np.asarray(a["verdict"]).astype(bool), np.asarray(b["verdict"]).astype(bool)
    la, lb = np.asarray(a["len"]), np.asarray(b["len"])
    n = min(len(va), len(vb))
    differ = np.flatnonzero(la[:n] != lb[:n])
    common = int(differ[0]) if differ.size else n
    agree = bool(np.array_equal(va[:n], vb[:n]))
    same_losses = agree and not va[common:].any() and not vb[common:].any()
    identical = agree and len(va) == len(vb) == common
    return StreamComparison((len(va), len(vb)), (int(va.sum()), int(vb.sum())), common, agree, same_losses,
                            identical)


def compare_logs(a: dict, b: dict) -> dict[tuple[str, str], StreamComparison] | None:
    """Per dropper (link, direction); None when the two runs did not log the same droppers."""
    if a.keys() != b.keys() or not a:
        return None
    return {key: compare_stream(a[key], b[key]) for key in sorted(a)}


@dataclass
class PairStats:
    """Counts over a set of pairs (one design point, or all)."""

    pairs: int = 0
    ratios: list[float] | None = None
    identical: int = 0
    same_losses: int = 0
    agree: int = 0
    packet_gaps: list[int] | None = None   # |packets a - packets b| per pair and dropper

    def add(self, ra: dict, rb: dict) -> None:
        self.ratios = self.ratios if self.ratios is not None else []
        self.packet_gaps = self.packet_gaps if self.packet_gaps is not None else []
        self.pairs += 1
        if ra["dct_ms"] and rb["dct_ms"]:
            self.ratios.append(ra["dct_ms"] / rb["dct_ms"])
        streams = compare_logs(ra["logs"], rb["logs"])
        if streams is None:
            return
        self.identical += all(s.identical for s in streams.values())
        self.same_losses += all(s.same_losses for s in streams.values())
        self.agree += all(s.agree for s in streams.values())
        self.packet_gaps += [abs(s.packets[0] - s.packets[1]) for s in streams.values()]

    def median_ratio(self) -> float:
        return statistics.median(self.ratios) if self.ratios else float("nan")


def table(a: dict, b: dict, names: tuple[str, str]) -> tuple[list[str], dict]:
    """The printed report and the same figures as data (compare.json)."""
    keys = sorted(set(a) | set(b), key=lambda k: tuple(str(x) for x in k))
    not_ok = [k for k in keys if a.get(k, {}).get("status") != "ok" or b.get(k, {}).get("status") != "ok"]
    per_point: dict[int, PairStats] = {}
    overall = PairStats()
    for k in keys:
        if k in not_ok:
            continue
        per_point.setdefault(k[0], PairStats()).add(a[k], b[k])
        overall.add(a[k], b[k])
    ratio_name = f"median DCT ratio {names[0]}/{names[1]}"
    lines = [f"{'point':>5}  {'pairs':>5}  {ratio_name:>32}  {'identical':>9}  {'same losses':>11}  {'agree':>6}"]
    rows = []
    for point, st in sorted(per_point.items()):
        lines.append(f"{point:>5}  {st.pairs:>5}  {st.median_ratio():>32.3f}  {st.identical / st.pairs:>9.0%}  "
                     f"{st.same_losses / st.pairs:>11.0%}  {st.agree / st.pairs:>6.0%}")
        rows.append({"point": point, "pairs": st.pairs, "median_dct_ratio": st.median_ratio(),
                     "identical": st.identical, "same_losses": st.same_losses, "agree": st.agree})
    median = overall.median_ratio()
    within = abs(median - 1) <= DCT_GOAL
    sides = names if names[0] != names[1] else (f"{names[0]} (a)", f"{names[1]} (b)")
    late = {side: [r["lateness_p50_us"] for r in runs.values() if r["lateness_p50_us"] is not None]
            for side, runs in zip(sides, (a, b), strict=True)}
    gaps = overall.packet_gaps or [0]
    lines.append("")
    lines.append(f"compare-backends: {names[0]} vs {names[1]}: {overall.pairs} paired runs, {len(not_ok)} not ok on "
                 f"both; median DCT ratio {median:.3f} ({'within' if within else 'outside'} the 5 % goal); "
                 f"verdicts identical in {overall.identical}/{overall.pairs}, same losses in "
                 f"{overall.same_losses}/{overall.pairs}, agreeing by index in {overall.agree}/{overall.pairs}")
    lines.append(f"compare-backends: packets per dropper differ by {statistics.median(gaps):g} (median), "
                 f"{max(gaps)} (max) between the two runs of a pair")
    for name, values in late.items():
        if values:
            lines.append(f"compare-backends: {name}: the delay element's median lateness per run (p50 over its "
                         f"directions): median {statistics.median(values) / 1000:.2f} ms, max "
                         f"{max(values) / 1000:.2f} ms per traversal")
    for k in not_ok:
        lines.append(f"  not ok: point {k[0]} {k[1]} size {k[2]} rep {k[3]}: {names[0]} {a.get(k, {}).get('status')}, "
                     f"{names[1]} {b.get(k, {}).get('status')}")
    data = {"backends": list(names), "points": rows, "pairs": overall.pairs, "not_ok": len(not_ok),
            "median_dct_ratio": median, "within_goal": within, "identical": overall.identical,
            "same_losses": overall.same_losses, "agree": overall.agree,
            "packet_gap_median": statistics.median(gaps), "packet_gap_max": max(gaps),
            "lateness_p50_ms": {name: statistics.median(v) / 1000 for name, v in late.items() if v}}
    return lines, data


def parse_backends(text: str) -> tuple[str, str]:
    names = tuple(part.strip() for part in text.split(","))
    if len(names) != 2 or any(n not in BACKENDS for n in names):
        raise UserError(f"--backends: two of {', '.join(BACKENDS)} separated by a comma (got {text!r})")
    return names  # type: ignore[return-value]


def run_backends_bench(design: Path, names: tuple[str, str], repetitions: int, out: Path) -> int:
    """Both campaigns, then the comparison printed (lines prefixed `compare-backends:`) and saved. Exit status:
    0 when every run was ok on both and every pair agrees by index, else 1."""
    out.mkdir(parents=True, exist_ok=True)
    copy = out / "design.toml"
    design_copy(design, copy, repetitions)
    runs = []
    for side, backend in zip("ab", names, strict=True):
        db = out / f"{side}-{backend}.sqlite"
        db.unlink(missing_ok=True)
        print(f"compare-backends: running {design.name} on {backend} -> {db}", flush=True)
        proc = subprocess.run([sys.executable, "-m", "fecbench", "run", str(copy), "--db", str(db),
                               "--link-backend", backend], cwd=REPO_ROOT, check=False)
        if proc.returncode != 0 or not db.exists():
            print(f"compare-backends: the {backend} campaign failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        runs.append(load(db))
    lines, data = table(runs[0], runs[1], names)
    print()
    print("\n".join(lines))
    (out / "compare.json").write_text(json.dumps(data, indent=1))
    return 0 if not data["not_ok"] and data["pairs"] and data["agree"] == data["pairs"] else 1
