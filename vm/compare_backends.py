"""Same results, both backends: run one small design under netem and under the delay element on this
kernel (as root), then print per design point the median DCT ratio (netem / delayline, over runs
paired by point, label, size and repetition) and the fraction of paired runs whose dropper verdict
logs are identical.

    .venv/bin/python vm/compare_backends.py [DESIGN] [--repetitions N] [--out DIR]

The design is copied with `verdict_log = true` (and the repetitions asked for). Exit status 0 when
both campaigns ran every run ok and every pair's verdicts agree packet for packet; 1 otherwise;
2 on bad input (no netem here, not root). The 5 % DCT goal is reported, not enforced: under QEMU's
TCG the timing of the guest itself is only good to about a millisecond.
"""

from __future__ import annotations

import argparse
import io
import re
import sqlite3
import statistics
import subprocess
import sys
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
    """Runs keyed by (point, label, size, repetition): status, dct_ms, loss seed, verdict logs."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    runs = {}
    for r in conn.execute("SELECT r.key, r.point, r.label, r.size, r.repetition, r.loss_seed, r.status, m.dct_ms "
                          "FROM runs r LEFT JOIN metrics m ON m.run_key = r.key"):
        logs = {(v["link"], v["direction"]): np.load(io.BytesIO(v["data"]), allow_pickle=False)
                for v in conn.execute("SELECT link, direction, data FROM verdict_logs WHERE run_key = ?", (r["key"],))}
        runs[(r["point"], r["label"], r["size"], r["repetition"])] = {**dict(r), "logs": logs}
    conn.close()
    return runs


def verdicts(log: np.ndarray) -> np.ndarray:
    return np.asarray(log["verdict"]).astype(bool)


def compare_logs(a: dict, b: dict) -> tuple[bool, bool]:
    """(identical, agree): identical = same packets and verdicts on every dropper; agree = the verdicts
    are equal at every index both saw (the dropper decides by index, so only the count may differ)."""
    if a.keys() != b.keys() or not a:
        return False, False
    identical = agree = True
    for key in a:
        va, vb = verdicts(a[key]), verdicts(b[key])
        n = min(len(va), len(vb))
        agree = agree and np.array_equal(va[:n], vb[:n])
        identical = identical and len(va) == len(vb) and np.array_equal(va, vb)
    return identical, agree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("design", nargs="?", type=Path, default=REPO / "designs" / "smoke.toml")
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "compare-backends")
    args = parser.parse_args()
    if not args.design.is_file():
        print(f"compare-backends: {args.design}: no such design file", file=sys.stderr)
        return 2
    from fecbench.topologies.backend import netem_probe

    ok, reason = netem_probe()
    if not ok:
        print(f"compare-backends: this kernel has no netem ({reason}): load sch_netem, or run it in the "
              "test-kernels guest (make test-kernels)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    design = args.out / "design.toml"
    design_copy(args.design, design, args.repetitions)
    runs = {}
    for backend in BACKENDS:
        db = args.out / f"{backend}.sqlite"
        db.unlink(missing_ok=True)
        print(f"compare-backends: running {args.design.name} on {backend} -> {db}", flush=True)
        proc = subprocess.run([sys.executable, "-m", "fecbench", "run", str(design), "--db", str(db),
                               "--link-backend", backend], cwd=REPO, check=False)
        if proc.returncode != 0 or not db.exists():
            print(f"compare-backends: the {backend} campaign failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        runs[backend] = load(db)

    a, b = runs["netem"], runs["delayline"]
    keys = sorted(set(a) | set(b), key=lambda k: tuple(str(x) for x in k))
    not_ok = [k for k in keys if a.get(k, {}).get("status") != "ok" or b.get(k, {}).get("status") != "ok"]
    points: dict[int, list] = {}
    for k in keys:
        if k not in not_ok:
            points.setdefault(k[0], []).append(k)
    print(f"\n{'point':>5}  {'pairs':>5}  {'median DCT ratio netem/delayline':>32}  {'verdicts identical':>18}  "
          f"{'verdicts agree':>14}")
    all_ratios, n_identical, n_agree, n_pairs = [], 0, 0, 0
    for point, pair_keys in sorted(points.items()):
        ratios, identical, agree = [], 0, 0
        for k in pair_keys:
            if a[k]["dct_ms"] and b[k]["dct_ms"]:
                ratios.append(a[k]["dct_ms"] / b[k]["dct_ms"])
            same, consistent = compare_logs(a[k]["logs"], b[k]["logs"])
            identical += same
            agree += consistent
        all_ratios += ratios
        n_identical, n_agree, n_pairs = n_identical + identical, n_agree + agree, n_pairs + len(pair_keys)
        median = statistics.median(ratios) if ratios else float("nan")
        print(f"{point:>5}  {len(pair_keys):>5}  {median:>32.3f}  {identical / len(pair_keys):>18.0%}  "
              f"{agree / len(pair_keys):>14.0%}")
    overall = statistics.median(all_ratios) if all_ratios else float("nan")
    within = abs(overall - 1) <= DCT_GOAL
    print(f"\ncompare-backends: {n_pairs} paired runs, {len(not_ok)} not ok on both; median DCT ratio {overall:.3f} "
          f"({'within' if within else 'outside'} the 5 % goal); verdicts identical in "
          f"{n_identical}/{n_pairs}, agreeing by index in {n_agree}/{n_pairs}")
    for k in not_ok:
        print(f"  not ok: point {k[0]} {k[1]} size {k[2]} rep {k[3]}: netem {a.get(k, {}).get('status')}, "
              f"delayline {b.get(k, {}).get('status')}")
    return 0 if not not_ok and n_pairs and n_agree == n_pairs else 1


if __name__ == "__main__":
    sys.exit(main())
