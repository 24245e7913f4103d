"""``fecbench bench verdicts PACK``: the verdict procedure replayed on recorded runs (``replay``).

1. Claims decided against machine time, the old allocator and the new, on the same recorded runs
   (the pack's databases of a profile, or ``--db alias=PATH``); beyond the recordings both draw from
   the same recorded repetitions (one fixed draw per replay, averaged over ``--compare-replays``).
2. ``--aa``: the A/A check. ``--replays`` resampled, label-swapped (so exactly symmetric) worlds run
   through the new allocator to ``--budget``: the family-wise false-verdict rate (a replay with any
   false verdict, ``replay.false_verdicts``) with its 95 % Wilson interval, against the pack's stated
   α (at any look: a look after every ``AA_LOOK_S`` of machine time); per claim, the final verdicts.
3. ``--effect F``: power. The same worlds with the label's metric multiplied by F: how often each claim
   is decided by 30 min, 1 h and 2 h of machine time (``--duration-s`` sets every run's duration, e.g.
   a pack's typical run, instead of the recorded one).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from fecbench.cli.options import error_rule
from fecbench.inputs.errors import UserError
from fecbench.runners.executors.progress import RichReporter

console = Console()
POWER_TIMES_S = (1800.0, 3600.0, 7200.0)
#: The A/A replays look after every batch of this much machine time (many looks: optional stopping's worst case).
AA_LOOK_S = 30.0


def bench_verdicts(
    pack: str = typer.Argument(..., help="The pack (a folder of reproduce/)."),
    db: list[str] = typer.Option(None, "--db", help="alias=PATH: the recorded runs of a design of the pack "
                                 "(default: the pack's databases under --results)."),
    profile: str = typer.Option(None, "--profile", help="The profile (default: the pack's default)."),
    results: Path = typer.Option(None, "--results", help="Where the pack's databases are (default results/reproduce)."),
    budget: str = typer.Option("2h", "--budget", help="Machine time replayed, e.g. 30m, 2h."),
    aa: bool = typer.Option(False, "--aa", help="A/A check: swap the two labels' recordings at random."),
    replays: int = typer.Option(200, "--replays", help="Replays of the A/A check (and of --effect)."),
    compare_replays: int = typer.Option(5, "--compare-replays", help="Replays averaged for old vs new."),
    effect: float = typer.Option(None, "--effect", help="Power: multiply the label's metric by this."),
    duration_s: float = typer.Option(None, "--duration-s", help="Every run takes this long (default: recorded)."),
    seed: int = typer.Option(35, "--seed", help="Seed of the replays' draws."),
    error: str = typer.Option(None, "--error", help="How the page's verdicts share α, in every replay: fwer or "
                              "fdr (as `fecbench reproduce --error`; default: the pack's rule)."),
) -> None:
    """Claims decided against machine time (old vs new allocator), A/A false verdicts, power."""
    from fecbench.verdicts import budgeting, profiles, session
    from fecbench.verdicts import campaign as cp
    from fecbench.verdicts import pack as pack_mod

    error_rule(error)
    loaded = pack_mod.load_pack(pack)
    error = loaded.error_rule(error)[0]
    name = profile or loaded.default_profile
    loaded.profile(name)
    seconds = budgeting.parse_budget(budget)
    root = results or profiles.DEFAULT_ROOT
    targets, campaigns = session.prepare_campaigns(loaded, [name], root, checks=False)
    dbs = {alias: Path(path) for alias, path in (_alias(text) for text in db or [])}
    for (_, alias), target in targets.items():
        dbs.setdefault(alias, target.db)
    missing = [f"{alias}: {path}" for alias, path in dbs.items() if not path.is_file()]
    if missing:
        raise UserError(f"no recorded runs for {', '.join(missing)}: run `fecbench reproduce {pack}` first, or give "
                        "--db alias=PATH")
    for key, campaign in campaigns.items():
        cp.measured_durations(campaign, [dbs[key[1]]])
        if duration_s is not None:
            _every_run_takes(campaign, duration_s)
    cp.share_factors(list(campaigns.values()))
    labels = _two_labels(loaded) if aa or effect is not None else None
    level = (f"per-claim level {1 - _alpha(loaded):.4f} (family-wise)" if error == "fwer" else
             "a false-discovery level over the page (Benjamini–Yekutieli)")
    console.print(f"[bold]{loaded.name}[/] ({name}), {len(loaded.claims)} claims, {level}, budget {seconds / 60:g} "
                  "min of machine time; recorded: " + ", ".join(f"{a} = {p}" for a, p in dbs.items()))
    _compare(loaded, name, campaigns, dbs, seconds, compare_replays, seed, duration_s, error)
    if aa:
        _aa(loaded, name, campaigns, dbs, seconds, replays, seed, labels, duration_s, error)
    if effect is not None:
        _power(loaded, name, campaigns, dbs, max(seconds, POWER_TIMES_S[-1]), replays, seed, labels, effect,
               duration_s, error)


def _every_run_takes(campaign, seconds: float) -> None:
    """The allocators' duration model says what the replay charges: every run ``seconds`` long."""
    by: dict[tuple, list[float]] = {}
    for run in campaign.prepared.runs:
        by.setdefault((run.label, run.size), []).append(campaign.prepared.estimate(run))
    campaign.factors = {key: seconds / max(1e-9, float(np.mean(v))) for key, v in by.items()}
    campaign.factor = float(np.median(list(campaign.factors.values())))
    campaign.measured = len(campaign.prepared.runs)


def _alias(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise UserError(f"--db {text!r}: expected alias=PATH (an alias of the pack's [designs])")
    alias, path = text.split("=", 1)
    return alias, path


def _alpha(pack) -> float:
    from fecbench.verdicts.evaluate import page_alpha

    return page_alpha(pack, [pack.default_profile])


def _two_labels(pack) -> tuple[str, str]:
    pairs = {(c.label, c.baseline) for c in pack.claims if not c.needs}
    if len(pairs) != 1:
        raise UserError(f"--aa/--effect: pack {pack.name}'s claims compare {len(pairs)} pairs of labels; an A/A "
                        "pack compares one label with one baseline")
    return next(iter(pairs))


def _worlds(dbs: dict[str, Path], rng: np.random.Generator, duration_s: float | None, **kw):
    from fecbench.verdicts.validation import replay

    worlds = {alias: replay.load_world(path, rng, **kw) for alias, path in dbs.items()}
    if duration_s is not None:
        for world in worlds.values():
            world.frame["duration_s"] = duration_s
    return worlds


def _compare(pack, profile, campaigns, dbs, seconds, n, seed, duration_s, rule) -> None:
    from fecbench.verdicts.validation import replay

    times = [seconds * f for f in (0.05, 0.1, 0.25, 0.5, 0.75, 1.0)]
    curves: dict[str, list[list[int]]] = {"old": [], "new": []}
    stood_in: dict[str, list[int]] = {"old": [], "new": []}
    finals: dict[str, list[str]] = {}   # the new allocator's decided claims at the budget, one entry per replay
    for i in range(n):
        for allocator in ("old", "new"):
            worlds = _worlds(dbs, np.random.default_rng([seed, i]), duration_s)
            looks = replay.simulate(pack, profile, campaigns, worlds, seconds, allocator,
                                    look_every_s=seconds / 40, rule=rule)
            curves[allocator].append(replay.decided_at(looks, times))
            stood_in[allocator].append(sum(len(w.stand_ins) for w in worlds.values()))
            if allocator == "new":
                for v in looks[-1].verdicts if looks else []:
                    if v.verdict in replay.DECIDED:
                        finals.setdefault(v.claim.id, []).append(v.verdict)
    table = Table(title=f"claims decided (holds, fails, at the threshold) against machine time, mean of {n} "
                        "replay(s) on the same recorded runs")
    table.add_column("allocator")
    for t in times:
        table.add_column(f"{t / 60:.0f} min" if t >= 60 else f"{t:.0f} s", justify="right")
    for allocator, rows in curves.items():
        table.add_row(allocator, *[f"{v:.1f}" for v in np.mean(rows, axis=0)])
    console.print(table)
    console.print("design points with no recording, answered by the nearest recorded point (mean per replay): "
                  + ", ".join(f"{a} {np.mean(v):.0f}" for a, v in stood_in.items()))
    console.print(f"decided at {seconds / 60:g} min by the new allocator (claim: verdicts in {n} replay(s)): "
                  + ("; ".join(f"{claim}: {', '.join(v)}" for claim, v in sorted(finals.items())) or "none"))


def _aa(pack, profile, campaigns, dbs, seconds, replays, seed, labels, duration_s, rule) -> None:
    from fecbench.verdicts.sequential import ALPHA
    from fecbench.verdicts.validation import replay

    wrong_runs = 0
    per_claim: dict[str, dict[str, int]] = {c.id: {} for c in pack.claims}
    for i in range(replays):
        worlds = _worlds(dbs, np.random.default_rng([seed, 1, i]), duration_s, resample=True, swap=labels)
        looks = replay.simulate(pack, profile, campaigns, worlds, seconds, "new", look_every_s=AA_LOOK_S, rule=rule)
        wrong_runs += any(replay.false_verdicts(look.verdicts) for look in looks)   # at any look
        final = looks[-1].verdicts
        for v in final:
            per_claim[v.claim.id][v.verdict] = per_claim[v.claim.id].get(v.verdict, 0) + 1
    low, high = replay.wilson(wrong_runs, replays)
    console.print(f"A/A: {replays} replays to {seconds / 60:g} min of machine time each, a look every {AA_LOOK_S:g} s: "
                  f"a false verdict at some look in "
                  f"{wrong_runs} ({wrong_runs / replays:.3f}, 95 % Wilson [{low:.3f}, {high:.3f}]); stated level "
                  f"{ALPHA:g} ({rule}: under the A/A null every verdict is false, so the two rules' levels coincide)")
    table = Table(title="A/A verdicts per claim over the replays")
    table.add_column("claim")
    table.add_column("expected")
    names = ["holds", "fails", "at the threshold", "inconclusive"]
    for col in names:
        table.add_column(col, justify="right")
    for claim in pack.claims:
        from fecbench.verdicts.evaluate import expectation

        table.add_row(claim.id, expectation(claim), *[str(per_claim[claim.id].get(k, 0)) for k in names])
    console.print(table)


def _power(pack, profile, campaigns, dbs, seconds, replays, seed, labels, effect, duration_s, rule) -> None:
    from fecbench.verdicts.validation import replay

    decided: dict[str, list[list[bool]]] = {c.id: [] for c in pack.claims}
    for i in range(replays):
        worlds = _worlds(dbs, np.random.default_rng([seed, 2, i]), duration_s, resample=True, swap=labels,
                         effect={labels[0]: effect})
        looks = replay.simulate(pack, profile, campaigns, worlds, seconds, "new", rule=rule)
        for claim in pack.claims:
            row = []
            for t in POWER_TIMES_S:
                seen = [look for look in looks if look.machine_s <= t]
                v = next((v for v in seen[-1].verdicts if v.claim.id == claim.id), None) if seen else None
                row.append(v is not None and v.verdict in replay.DECIDED)
            decided[claim.id].append(row)
    table = Table(title=f"power: label × {effect:g}, share of {replays} replays decided by machine time"
                  + (f" (every run {duration_s:g} s)" if duration_s else " (recorded durations)"))
    table.add_column("claim")
    for t in POWER_TIMES_S:
        table.add_column(f"{t / 60:.0f} min", justify="right")
    for claim in pack.claims:
        shares = np.mean(decided[claim.id], axis=0) if decided[claim.id] else [0.0] * len(POWER_TIMES_S)
        table.add_row(claim.id, *[f"{s:.2f}" for s in shares])
    console.print(table)


def bench_worlds(
    replays: int = typer.Option(200, "--replays", help="Replays per world."),
    budget: str = typer.Option("15m", "--budget", help="Machine time replayed per replay (every run 1 s)."),
    world: list[str] = typer.Option(None, "--world", help="Only these worlds (default: every one)."),
    error: str = typer.Option("fwer", "--error", help="How a world's verdicts share α: fwer or fdr (as `fecbench "
                              "reproduce --error`); fdr counts the replays whose share of false verdicts is > 0 "
                              "and their mean share."),
) -> None:
    """False verdicts on synthetic worlds whose truth is known (reproduce/README.md, "Validation")."""
    from fecbench.verdicts import budgeting
    from fecbench.verdicts.validation import worlds

    error_rule(error)
    known = [w.name for w in worlds.catalogue()]
    if unknown := [w for w in world or [] if w not in known]:
        raise UserError(f"--world {unknown[0]!r}: no such world (worlds: {', '.join(known)})")
    if replays < 1:
        raise UserError("--replays: at least 1")
    worlds.bench_worlds(replays, budgeting.parse_budget(budget), list(world) if world else None,
                        RichReporter(console), error)
