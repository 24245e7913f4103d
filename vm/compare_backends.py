"""Same results, both backends: run one small design under netem and under the delay element on this
kernel (as root), then print per design point the median DCT ratio (netem / delayline, over runs
paired by point, label, size and repetition) and how far the paired runs' dropper verdict logs agree.

    .venv/bin/python vm/compare_backends.py [DESIGN] [--backends A,B] [--repetitions N] [--out DIR]

The design is copied with `verdict_log = true` (and the repetitions asked for). `--backends` takes two
link backends, the same one twice for a control (two campaigns on one backend: how far a run repeats
itself at all). Per pair and per dropper, the logs are compared three ways (vm/README.md, "Same design,
both backends"):

- agree:        the verdicts are equal at every index both runs saw (the dropper decides by index);
- same losses:  every packet dropped in either run lies in the prefix where both runs saw packets of
                the same lengths, so both runs lost the same packets of the same flow;
- identical:    same number of packets, same lengths, same verdicts.

Exit status 0 when both campaigns ran every run ok and every pair agrees by index; 1 otherwise; 2 on
bad input (no such design, unknown backend, no netem here, not root). The 5 % DCT goal is reported,
not enforced: under QEMU's TCG the delay element is late by milliseconds (vm/README.md).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tomllib

REPO = Path(__file__).resolve().parent.parent
BACKENDS = ("netem", "delayline")
DCT_GOAL = 0.05


def design_copy(src: Path, dst: Path, repetitions: int) -> None:
    """The design with verdict logs on, `repetitions`, and its topology as an absolute path."""
    text = src.read_text()
    design = tomllib.loads(text)["design"]
    topology = Path(design["topology"])
    if not topology.is_absolute():
        topology = next((p for p in (src.parent / topology, REPO / topology) if p.exists()), REPO / topology)
    text = re.sub(r'(?m)^topology\s*=.*$', f'topology = "{topology.resolve()}"', text, count=1)
    text = re.sub(r'(?m)^(repetitions|verdict_log)\s*=.*\n', "", text)
    text = re.sub(r'(?m)^\[design\]\s*$', f"[design]\nrepetitions = {repetitions}\nverdict_log = true", text, count=1)
    dst.write_text(text)


def load(db: Path) -> dict[tuple, dict]:
    """Runs keyed by (point, label, size, repetition): status, dct_ms, loss seed, verdict logs and the
    delay element's median lateness over the run's directions (µs; None on netem)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    runs = {}
    for r in conn.execute("SELECT r.key, r.point, r.label, r.size, r.repetition, r.loss_seed, r.status, m.dct_ms "
                          "FROM runs r LEFT JOIN metrics m ON m.run_key = r.key"):
        logs = {(v["link"], v["direction"]): np.load(io.BytesIO(v["data"]), allow_pickle=False)
                for v in conn.execute("SELECT link, direction, data FROM verdict_logs WHERE run_key = ?", (r["key"],))}
        late = []
        for (delay_json,) in conn.execute("SELECT delay_json FROM link_stats WHERE run_key = ?", (r["key"],)):
            lateness = (json.loads(delay_json) or {}).get("lateness") if delay_json else None
            if lateness and lateness.get("p50_us") is not None:
                late.append(lateness["p50_us"])
        runs[(r["point"], r["label"], r["size"], r["repetition"])] = {
            **dict(r), "logs": logs, "lateness_p50_us": statistics.median(late) if late else None}
    conn.close()
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
        raise ValueError(f"--backends: two of {', '.join(BACKENDS)} separated by a comma (got {text!r})")
    return names  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("design", nargs="?", type=Path, default=REPO / "designs" / "smoke.toml")
    parser.add_argument("--backends", default="netem,delayline",
                        help="the two link backends compared (default netem,delayline; the same twice: a control)")
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "compare-backends")
    args = parser.parse_args(argv)
    try:
        names = parse_backends(args.backends)
    except ValueError as exc:
        print(f"compare-backends: {exc}", file=sys.stderr)
        return 2
    if not args.design.is_file():
        print(f"compare-backends: {args.design}: no such design file", file=sys.stderr)
        return 2
    if args.repetitions < 1:
        print(f"compare-backends: --repetitions must be at least 1 (got {args.repetitions})", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("compare-backends: run as root (the campaigns build Mininet networks)", file=sys.stderr)
        return 2
    if "netem" in names:
        from fecbench.topologies.backend import netem_probe

        ok, reason = netem_probe()
        if not ok:
            print(f"compare-backends: this kernel has no netem ({reason}): load sch_netem, run it in the "
                  "test-kernels guest (make test-kernels), or compare --backends delayline,delayline",
                  file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    design = args.out / "design.toml"
    design_copy(args.design, design, args.repetitions)
    runs = []
    for side, backend in zip("ab", names, strict=True):
        db = args.out / f"{side}-{backend}.sqlite"
        db.unlink(missing_ok=True)
        print(f"compare-backends: running {args.design.name} on {backend} -> {db}", flush=True)
        proc = subprocess.run([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db),
                               "--link-backend", backend], cwd=REPO, check=False)
        if proc.returncode != 0 or not db.exists():
            print(f"compare-backends: the {backend} campaign failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        runs.append(load(db))

    lines, data = table(runs[0], runs[1], names)
    print()
    print("\n".join(lines))
    (args.out / "compare.json").write_text(json.dumps(data, indent=1))
    return 0 if not data["not_ok"] and data["pairs"] and data["agree"] == data["pairs"] else 1


if __name__ == "__main__":
    sys.exit(main())
