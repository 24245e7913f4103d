"""`fecbench compare A.sqlite B.sqlite`: two campaigns of one design. What changed between them, said first: each
database's recorded provenance side by side (fecbench version and commit, each implementation's version and build,
kernel, link backend, machine: fecbench.analysis.studies.campaign_provenance). Did they run the same runs on the
same losses? The same keys, the same loss seed per key, and where both kept the droppers' verdict logs, the same
verdicts per key and dropper at every packet both runs saw (a dropper decides packet n by (seed, stream, n): fewer
or more packets, not other verdicts). Statuses and hosts are shown, not judged: a run flagged on one machine may
pass on another. Exit status 0 when the two agree, 1 when they differ.

With `--margin 5%`: did the results move? Per group (label, size, `--by` factors), a metric's change B against A,
paired by run key, with an interval and a verdict against the margin (fecbench.analysis.studies.campaign_change):
in all its pairs (their median), in each loss class of them (a pair's is its A run's: losses declared, losses FEC
rebuilt, no loss) and in its tail (the worst fifth), each class and tail also over a label's groups pooled; every
statistic at one family-wise error level (Bonferroni, said in the output), each metric's direction declared
(a metric without one, e.g. repair_sent, reads larger or smaller, never better). The output names what moved;
exit status 0 equivalent, 1 differs (any statistic worse, better, larger or smaller), 3 undecided (a group's
median not enough data or at the margin). Bad input (not a results database, not the same design, an
unknown metric, factor or label) is one line on stderr and exit status 2, in either mode.

Its uses: a campaign on many hosts against the same design on one (designs/README.md, "Many hosts"), two
link backends, a resumed campaign against a fresh one; a stack's CI against a baseline database, fecbench's own
numbers across versions.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer


@dataclass
class KeyComparison:
    """What two databases say by key."""

    keys: tuple[int, int]
    common: int
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    seeds_differ: list[str] = field(default_factory=list)
    # without a common key: the loss seeds matched by (point, repetition) instead, (the same, of how many)
    seeds_by_point: tuple[int, int] = (0, 0)
    logged: int = 0                                   # common keys whose droppers' verdicts both kept
    verdicts_differ: list[str] = field(default_factory=list)
    droppers_differ: list[str] = field(default_factory=list)   # keys logged by other droppers on each side
    # keys whose drops fell on frames of other lengths in B (another packet at that index): (key, direction,
    # index, length in A, length in B) of the first such drop
    drops_moved: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)
    status_pairs: dict[str, int] = field(default_factory=dict)  # "a → b" for the common keys whose status differs
    hosts: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))

    @property
    def same(self) -> bool:
        return not (self.only_a or self.only_b or self.seeds_differ or self.verdicts_differ or self.droppers_differ)

    def as_json(self) -> dict[str, Any]:
        return {"same": self.same, "keys": list(self.keys), "common": self.common, "only_a": self.only_a,
                "only_b": self.only_b, "seeds_differ": self.seeds_differ, "seeds_by_point": list(self.seeds_by_point),
                "verdicts_compared": self.logged,
                "verdicts_differ": self.verdicts_differ, "droppers_differ": self.droppers_differ,
                "drops_moved": [{"key": k, "direction": d, "index": i, "length_a": la, "length_b": lb}
                                for k, d, i, la, lb in self.drops_moved],
                "statuses": self.statuses, "status_pairs": self.status_pairs,
                "hosts": {"a": self.hosts[0], "b": self.hosts[1]}}


def _load(db: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[tuple[str, str], Any]]]:
    import numpy as np

    from fecbench.analysis import results

    columns = ["key", "loss_seed", "status", "host", "point", "repetition"]
    runs = {row[0]: dict(zip(columns, row, strict=True)) for row in results.rows(db, "runs", columns)}
    logs: dict[str, dict[tuple[str, str], Any]] = {}
    if "verdict_logs" in results.table_names(db):
        for key, link, direction, data in results.rows(db, "verdict_logs", ["run_key", "link", "direction", "data"]):
            logs.setdefault(key, {})[(link, direction)] = np.load(io.BytesIO(data), allow_pickle=False)
    return runs, logs


def _agree(a: Any, b: Any) -> bool:
    """The droppers' verdicts equal at every index both runs saw."""
    import numpy as np

    va, vb = np.asarray(a["verdict"]).astype(bool), np.asarray(b["verdict"]).astype(bool)
    n = min(len(va), len(vb))
    return bool(np.array_equal(va[:n], vb[:n]))


def _moved_drop(a: Any, b: Any) -> tuple[int, int, int] | None:
    """The first index both runs saw where a frame was dropped and the two frames' lengths differ (another
    packet took that index in B: twins that diverged), as (index, length in A, length in B); else None."""
    import numpy as np

    n = min(len(a), len(b))
    hit = np.flatnonzero((np.asarray(a["verdict"][:n]) == 1) & (a["len"][:n] != b["len"][:n]))
    return (int(hit[0]), int(a["len"][hit[0]]), int(b["len"][hit[0]])) if hit.size else None


def compare(a: Path, b: Path) -> KeyComparison:
    runs_a, logs_a = _load(a)
    runs_b, logs_b = _load(b)
    common = sorted(runs_a.keys() & runs_b.keys())
    out = KeyComparison(keys=(len(runs_a), len(runs_b)), common=len(common),
                     only_a=sorted(runs_a.keys() - runs_b.keys()), only_b=sorted(runs_b.keys() - runs_a.keys()))
    if not common:   # no key to pair by (another experiment hash): are the losses the same all the same?
        seeds_a = {(r["point"], r["repetition"]): r["loss_seed"] for r in runs_a.values()}
        seeds_b = {(r["point"], r["repetition"]): r["loss_seed"] for r in runs_b.values()}
        both = seeds_a.keys() & seeds_b.keys()
        out.seeds_by_point = (sum(seeds_a[k] == seeds_b[k] for k in both), len(both))
    pairs: Counter[str] = Counter()
    for key in common:
        ra, rb = runs_a[key], runs_b[key]
        if ra["loss_seed"] != rb["loss_seed"]:
            out.seeds_differ.append(key)
        if ra["status"] != rb["status"]:
            pairs[f"{ra['status']} → {rb['status']}"] += 1
        la, lb = logs_a.get(key), logs_b.get(key)
        if la and lb:
            if la.keys() != lb.keys():
                out.droppers_differ.append(key)
                continue
            out.logged += 1
            if not all(_agree(la[d], lb[d]) for d in la):
                out.verdicts_differ.append(key)
            moved = [(d, m) for d in sorted(la) if (m := _moved_drop(la[d], lb[d]))]
            if moved:
                (_, direction), (index, len_a, len_b) = moved[0]
                out.drops_moved.append((key, direction, index, len_a, len_b))
    out.status_pairs = dict(pairs)
    out.statuses = {"a": dict(Counter(r["status"] for r in runs_a.values())),
                    "b": dict(Counter(r["status"] for r in runs_b.values()))}
    out.hosts = (dict(Counter(r["host"] or "?" for r in runs_a.values())),
                 dict(Counter(r["host"] or "?" for r in runs_b.values())))
    return out


def _few(keys: list[str]) -> str:
    return ", ".join(k[:12] for k in keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def text(c: KeyComparison, a: Path, b: Path) -> list[str]:
    lines = [f"A {a}: {c.keys[0]} run(s) on " + ", ".join(f"{h} ({n})" for h, n in sorted(c.hosts[0].items())),
             f"B {b}: {c.keys[1]} run(s) on " + ", ".join(f"{h} ({n})" for h, n in sorted(c.hosts[1].items())),
             f"keys: {c.common} in both" + (f"; only in A: {len(c.only_a)} ({_few(c.only_a)})" if c.only_a else "")
             + (f"; only in B: {len(c.only_b)} ({_few(c.only_b)})" if c.only_b else ""),
             (f"loss seeds: {c.common - len(c.seeds_differ)} of {c.common} the same"
              + (f"; differ: {_few(c.seeds_differ)}" if c.seeds_differ else "")) if c.common else
             (f"loss seeds: no key in both to pair by; by point and repetition, {c.seeds_by_point[0]} of "
              f"{c.seeds_by_point[1]} the same" if c.seeds_by_point[1] else
              "loss seeds: no key in both, and no point and repetition in both, to compare by")]
    if c.logged or c.droppers_differ:
        lines.append(f"dropper verdicts: {c.logged - len(c.verdicts_differ)} of {c.logged} key(s) logged on both "
                     "sides agree at every packet both runs saw"
                     + (f"; differ: {_few(c.verdicts_differ)}" if c.verdicts_differ else "")
                     + (f"; other droppers logged: {_few(c.droppers_differ)}" if c.droppers_differ else ""))
        if c.logged:
            lines.append(_moved_text(c))
    else:
        lines.append("dropper verdicts: not compared (neither side kept verdict logs of the same runs: design "
                     "`verdict_log = true`)")
    lines.append("statuses: A " + ", ".join(f"{s} {n}" for s, n in sorted(c.statuses["a"].items()))
                 + "; B " + ", ".join(f"{s} {n}" for s, n in sorted(c.statuses["b"].items()))
                 + ("; common keys whose status differs: " + ", ".join(f"{p} ({n})" for p, n in
                                                                      sorted(c.status_pairs.items()))
                    if c.status_pairs else ""))
    lines.append("the same runs on the same losses" if c.same else "they differ")
    return lines


def _moved_text(c: KeyComparison) -> str:
    """Where the same verdicts fell on other packets (a frame of another length at a dropped index)."""
    if not c.drops_moved:
        return f"dropped frames: the same lengths in A and B at every drop of the {c.logged} logged key(s)"
    first = Counter((d, i) for _, d, i, _, _ in c.drops_moved).most_common(1)[0][0]
    short = sum(1 for *_, la, lb in c.drops_moved if min(la, lb) < 200)
    return (f"dropped frames: another packet at a dropped index in {len(c.drops_moved)} of {c.logged} logged key(s) "
            f"(the timing put more or fewer packets before it; most often at index {first[1]} of {first[0]}; a "
            f"frame under 200 bytes on one side in {short}): these runs did not meet the same losses "
            "(designs/README.md, \"Twins\"; `[loss] min_bytes`)")


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
            for row in rows]


def _metric_lines(result: Any) -> list[str]:
    """The metric comparison as two short tables, all runs then classes and tails
    (fecbench.analysis.studies.campaign_change.ChangeComparison), and what it says."""
    from fecbench.analysis import stats
    from fecbench.analysis.studies import campaign_change as cc

    each = f"{result.each_level * 100:.4g} %"
    lines = [f"{result.metric}: {result.statistic}; bootstrap intervals; margin ±{result.margin}; {result.direction}",
             f"error level: {result.error_rule}"]
    rows = [("group", "n", "A median", "B median", "change", f"{each} interval", "verdict (all runs)")]
    for g in result.groups:
        if g.mode in (cc.ONLY_A, cc.ONLY_B):
            rows.append((g.name, "", "–", "–", "–", "–", g.verdict))
            continue
        n = f"{g.n} {'pairs' if g.mode == 'paired' else 'runs/side'}"
        rows.append((g.name, n, stats.describe(g.a_median, 4), stats.describe(g.b_median, 4),
                     stats.describe(g.change, 4), g.median.interval_text(),
                     g.median.outcome + (f": {g.needs}" if g.needs else "")))
    lines += _table(rows)
    parts = [(g.name, s) for g in result.groups for s in g.parts] + [(p.name, s) for p in result.pools
                                                                      for s in p.parts]
    if parts:
        lines.append(f"{result.parts_statistic}:")
        rows = [("group", "pairs", "statistic", "change", f"{each} interval", "verdict")]
        rows += [(where, str(s.n), s.name, stats.describe(s.change, 4), s.interval_text(), s.outcome)
                 for where, s in parts]
        lines += _table(rows)
    for g in result.groups:
        if any(g.left_out.values()):
            lines.append(f"left out of {g.name}: " + "; ".join(
                f"{side.upper()} " + ", ".join(f"{n} {why}" for why, n in counts.items())
                for side, counts in g.left_out.items() if counts))
        if g.exclusions_p is not None:
            lines.append(f"exclusions differ in {g.name}: A and B lost runs at different rates (Fisher's exact test "
                         f"p = {g.exclusions_p:.2g}): what is left is not a sample of the same runs")
    lines.append(f"{_outcome(result)} (exit {result.exit_code})")
    return lines


def _outcome(result: Any) -> str:
    """What the comparison says, naming what moved (which group, class or tail) or what is undecided."""
    from fecbench.analysis.studies import campaign_change as cc

    if result.exit_code == cc.DIFFERS:
        only = [f"{g.name} {g.verdict}" for g in result.groups if g.verdict in (cc.ONLY_A, cc.ONLY_B)]
        return "differs: " + "; ".join(only + [f"{where}, {s.text()}" for where, s in result.moved])
    if result.exit_code == cc.UNDECIDED:
        undecided = [_undecided_text(g, cc) for g in result.groups if g.verdict in cc.UNDECIDED_VERDICTS]
        undecided += [f"{p.name}, {s.text()}" for p in result.pools for s in p.parts if s.verdict == cc.MOVED_UNSIZED]
        return "undecided: " + "; ".join(undecided)
    return (f"equivalent: every group the same within {result.margin}; no class or tail of them moved beyond it "
            f"(each group's verdict is its median's)")


def _undecided_text(group: Any, cc: Any) -> str:
    if group.verdict == cc.MOVED_UNSIZED:
        moved = [s for s in group.parts if s.verdict == cc.MOVED_UNSIZED]
        return (f"{group.name}: " + "; ".join(s.text() for s in moved) + " (it moved; more pairs of its kind would "
                "tell whether beyond the margin)")
    return f"{'at the margin' if group.verdict == cc.AT_MARGIN else 'not enough data'} for {group.name}"


def compare_command(
    a: Path = typer.Argument(..., help="A results database (the reference).", show_default=False,
                             metavar="A.sqlite"),
    b: Path = typer.Argument(..., help="Another results database of the same design.", show_default=False,
                             metavar="B.sqlite"),
    margin: str = typer.Option(None, "--margin", help="Compare the metric too, per group, with this margin: "
                               "e.g. 5% (a ratio within 1 ± 5 %); for a count also a number, e.g. 3.",
                               show_default=False),
    metric: str = typer.Option("dct_ms", "--metric", help="The metric (a typed metric column; an integer one, "
                               "e.g. recovered or repair_sent, is compared by its difference)."),
    by: list[str] = typer.Option([], "--by", help="Also group by this factor of the design (or point); "
                                 "repeatable.", show_default=False),
    label: list[str] = typer.Option([], "--label", help="A_LABEL=B_LABEL: B's label B_LABEL stands for A's "
                                    "A_LABEL (its runs compared unpaired); repeatable.", show_default=False),
    seed: int = typer.Option(0, "--seed", help="The bootstrap's seed."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
    same_machine: bool = typer.Option(False, "--same-machine", help="Refuse (exit 2) two campaigns recorded on "
                                      "different machines (architecture, CPU, CPUs, memory, kernel): a baseline "
                                      "from another machine measures that machine too."),
) -> None:
    """Two campaigns of one design: what changed between them (provenance side by side), the same runs on the
    same losses (keys, loss seeds, dropper verdicts), and with --margin whether a metric moved, per group
    (label, size, --by factors), paired by run key.

    Besides each group's median: its runs by loss class (a pair's is its A run's: losses declared, losses FEC
    rebuilt, no loss) and its tail (the worst fifth of its pairs), each also over a label's groups pooled; all at
    one family-wise error level (Bonferroni). The output names which class or tail moved.

    Exit status: without --margin, 0 when the two ran the same runs on the same losses, 1 when not. With
    --margin: 0 equivalent (every group's median the same within the margin, no class or tail beyond it), 1
    differs (any group, class or tail worse, better, larger or smaller, or a group only in one campaign), 3
    undecided (some group's median without enough data or at the margin, none differs). 2: bad input (not a
    results database, not the same design, an unknown metric, factor or label), one line on stderr.
    """
    from fecbench.analysis.studies import campaign_provenance as cp
    from fecbench.inputs.errors import UserError

    for db in (a, b):
        if not db.is_file():
            raise UserError(f"{db}: no such results database")
    if margin is None and (by or label or metric != "dct_ms"):
        raise UserError("--metric, --by and --label compare a metric: give its --margin too, e.g. --margin 5%")
    mapping = {}
    for item in label:
        left, sep, right = item.partition("=")
        if not sep or not left or not right:
            raise UserError(f"--label {item!r}: A_LABEL=B_LABEL")
        mapping[left] = right
    if same_machine and (differs := cp.other_machine(a, b)):
        raise UserError(f"{a} and {b} were recorded on different machines ({differs} differ): record the baseline "
                        "on this machine (fecbench-ci --record), measure both builds here side by side (fecbench-ci "
                        "ab), or leave out --same-machine")
    result = compare(a, b)
    rows = cp.side_by_side(cp.provenance(a), cp.provenance(b))
    metrics = None
    if margin is not None:
        from fecbench.analysis import results
        from fecbench.analysis.studies import campaign_change as cc
        from fecbench.analysis.studies import change_classes

        metrics = cc.compare(results.load(a), results.load(b), metric=metric, margin=cc.Margin.parse(margin),
                             by=[f for item in by for f in item.split(",") if f], labels=mapping, seed=seed,
                             losses=change_classes.loss_records(a))
    code = metrics.exit_code if metrics is not None else (0 if result.same else 1)
    if json_out:
        out = {"provenance": [row.as_json() for row in rows], "changed": cp.changed(rows), **result.as_json()}
        if metrics is not None:
            out["metric_comparison"] = metrics.as_json()
        out["exit_code"] = code
        print(json.dumps(out, indent=1))
    else:
        lines = cp.text(rows)
        if metrics is None:
            lines += text(result, a, b)
        else:
            lines += ["key check: " + line for line in text(result, a, b)[2:]] + _metric_lines(metrics)
        for line in lines:
            print(line)
    raise typer.Exit(code)
