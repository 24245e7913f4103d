"""``fecbench bench worlds``: the verdict procedure on synthetic worlds whose truth is known, so that a false
verdict can be counted (issue 46).

A world is a download design (4 loss rates × 1, 10, 50 kB, labels ``quic`` and ``fec``) whose runs are
answered from distributions, not networks (the worlds and their claims are data: ``worlds.toml``, the claims
written as a pack's claims.toml writes them): a pair's baseline DCT is log-normal per cell, its ratio
``fec ÷ quic`` log-normal with a median set per cell (the common random numbers: both labels of a unit share
the baseline draw), optionally with ``fec`` runs that fail according to their value (and fail again when run
once more), or an effect that changes half-way through the replay (drift). Each world carries claims on it
(``Claim`` objects, as a pack's) and each claim's truth: the statistic as named over the claim's
population, computed from 20 000 draws of it (or set exactly where the world puts it on a threshold).
``replay.simulate`` runs the new allocator and the verdicts on it, looking after every batch; a replay has a
false verdict when some look of some claim holds or fails against its truth (``at the threshold`` outside
the band, ``fails`` of a true ≈ claim); ``not judged`` and ``inconclusive`` are never false. The rate over
the replays, with its Wilson interval, is set against the stated level (α = 0.05 family-wise per world).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fecbench.host.paths import REPO_ROOT
from fecbench.reproduce import campaign as cp
from fecbench.reproduce import draws as dr
from fecbench.reproduce import evaluate as ev
from fecbench.reproduce.pack import Claim, Pack, Profile
from fecbench.reproduce.validation import replay

DESIGN = f"""[design]
name = "worlds"
topology = "{REPO_ROOT / 'topologies' / 'single.toml'}"
repetitions = 8
seed = 46
timeout_s = 60

[space]
method = "factorial"
[space.factors]
p = {{ levels = [0.01, 0.02, 0.03, 0.04] }}

[loss]
model = "uniform"
p = "p"

[workload]
kind = "download"
sizes = ["1kB", "10kB", "50kB"]

[[impl]]
name = "fecq"
label = "quic"
args = {{ fec = "none" }}

[[impl]]
name = "fecq"
label = "fec"
args = {{ fec = "rs:30,20" }}
"""
SIZES = (1000, 10000, 50000)
SPREAD = 0.2            # sd of the log ratio in a cell
BASE_SPREAD = 0.3       # sd of the baseline's log DCT in a cell
RUN_S = 1.0             # machine time of every run
TRUTH_DRAWS = 20_000
WORLDS = Path(__file__).with_name("worlds.toml")


@dataclass
class World:
    """A synthetic world (see the module): ``median[size]`` the median ratio fec ÷ quic of a cell of that size
    (``after``: from half the budget on, drift), ``fails``: fec's run fails when its value is above this
    quantile of its cell's (its second run too), ``skew``: the ratio's size follows the baseline's."""
    name: str
    text: str
    median: dict[int, float]
    claims: list[tuple[Claim, float | None]]        # each claim and its truth (None: from the draws)
    after: dict[int, float] | None = None
    fails: float | None = None
    skew: bool = False
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    frame: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["key"]))
    switch_at: int = 10 ** 9                        # the answer at which ``after`` takes over

    def __post_init__(self) -> None:
        self.frame.attrs.update(factors=["p"], labels=["quic", "fec"], sizes=list(SIZES))
        self.units: dict[tuple[int, int, int], tuple[float, float]] = {}   # (baseline, ratio) per unit

    # What replay.simulate and evaluate ask of a world.
    classes = pd.DataFrame(columns=["run_key"])
    flows = pd.DataFrame(columns=["run_key"])

    def pair(self, point: int, size: int, rng: np.random.Generator, medians: dict[int, float]) -> tuple[float, float]:
        """(baseline DCT, ratio) of one unit."""
        z = rng.standard_normal(2)
        base = 100.0 * (size / 1000) ** 0.5 * (1 + 0.2 * point) * math.exp(BASE_SPREAD * z[0])
        centre = math.log(medians[size])
        if self.skew:   # the ratio follows the baseline: small baselines a little better, large ones much worse
            return base, math.exp(centre + (1.5 if z[0] > 0.3 else -0.1) + 0.05 * z[1])
        return base, math.exp(centre + SPREAD * z[1])

    def answer(self, run: Any, order: int, again: bool = False) -> dict[str, Any]:
        medians = self.after if self.after is not None and order >= self.switch_at else self.median
        unit = (run.point, run.repetition, run.size)
        if unit not in self.units:   # both labels of a unit share its draw (common random numbers)
            self.units[unit] = self.pair(run.point, run.size, self.rng, medians)
        base, ratio = self.units[unit]
        value = base if run.label == "quic" else base * ratio
        status = "ok"
        if run.label == "fec" and self.fails is not None and ratio > _quantile_ratio(medians[run.size], self.fails,
                                                                                   self.skew):
            status = "failed"
        return {"key": run.key, "recorded_key": run.key, "point": run.point, "repetition": run.repetition,
                "size": run.size, "label": run.label, "status": status, "p": run.values.get("p"),
                "dct_ms": value if status == "ok" else None, "timeout_s": 60.0, "duration_s": RUN_S,
                "started_at": f"{order:012d}"}


def _quantile_ratio(median: float, q: float, skew: bool) -> float:
    """The ratio above which a fraction 1 − q of a cell's ratios lie."""
    from scipy.stats import norm

    return math.inf if skew else median * math.exp(SPREAD * float(norm.ppf(q)))


def _median_for_share(share: float, threshold: float = 0.99) -> float:
    """The cell median ratio whose share of ratios below ``threshold`` is ``share``."""
    from scipy.stats import norm

    if share <= 0:
        return threshold * math.exp(5 * SPREAD)
    return threshold / math.exp(SPREAD * float(norm.ppf(share)))


def catalogue(path: Path = WORLDS) -> list[World]:
    """The worlds of ``worlds.toml`` with their claims (a SpecError naming the file and key on a mistake)."""
    from fecbench.inputs.specs import Section
    from fecbench.reproduce.pack import DesignRef, claims_of
    from fecbench.runners.experiment.design import parse_size

    top = Section.load(path)
    entries = top.get("claim", list)
    for entry in entries:   # every claim of a world compares fec with quic on the synthetic design
        for key, value in (("design", "worlds"), ("label", "fec"), ("baseline", "quic"),
                           ("source", {"paper": "worlds", "section": "-", "quote": "synthetic: truth known"})):
            entry.setdefault(key, value)
        if entry.get("tolerance"):
            entry.setdefault("tolerance_source", "a check of the procedure: the band the world's truth is judged by")
    truth = {str(e["id"]): e.pop("truth", None) for e in entries}
    ref = DesignRef("worlds", path, None, labels=["quic", "fec"], sizes=list(SIZES), factors=["p"],
                    workload="download")
    claims = {c.id: c for c in claims_of(Section({"claim": entries}, path), {"worlds": "synthetic"}, {"worlds": ref})}
    worlds = []
    for w in top.sections("world", required=True):
        def sizes(table: dict, where: str = w.path) -> dict[int, float]:
            return {parse_size(k, path, where): float(v) for k, v in table.items()}

        if "share" in w:
            median = {size: _median_for_share(v) for size, v in sizes(w.get("share", dict)).items()}
        else:
            median = sizes(w.get("median", dict))
        names = w.get("claims", list)
        if unknown := [n for n in names if n not in claims]:
            raise w.error("claims", f"no claim {unknown[0]!r}", sorted(claims))
        worlds.append(World(w.get("name", str), w.get("text", str), median,
                            [(claims[n], truth[n]) for n in names],
                            after=sizes(w.get("after", dict)) if "after" in w else None,
                            fails=w.get("fails", float, None), skew=w.get("skew", bool, False)))
        w.done()
    return worlds


def _pack(world: World) -> Pack:
    return Pack(name=f"worlds-{world.name}", title=world.text, dir=Path("."), papers={"worlds": "synthetic"},
                designs={}, profiles={"synthetic": Profile("synthetic", "synthetic", [], {}, [], None)},
                default_profile="synthetic", claims=[c for c, _ in world.claims])


def truths(world: World, campaign: cp.Campaign) -> dict[str, list[float]]:
    """Each claim's truth (two for a drifting world: before and after), the statistic as named over its
    population: TRUTH_DRAWS of its draws answered without failures."""
    out: dict[str, list[float]] = {}
    for claim, fixed in world.claims:
        if fixed is not None:
            out[claim.id] = [fixed]
            continue
        values = []
        for medians in [world.median] + ([world.after] if world.after else []):
            rng = np.random.default_rng(99)
            space = campaign.space
            cells = dr.claim_cells(claim, space)
            rows = []
            for i in range(TRUTH_DRAWS):
                point, _, size = cells[int(rng.integers(len(cells)))]
                base, ratio = world.pair(point, size, rng, medians)
                rows.append({"draw": i, "cell": 0, "group": f"{point}|{size}", "factor": math.nan,
                             "value": base * ratio, "base": base, "ratio": ratio})
            sample = pd.DataFrame(rows)
            read = sample if claim.stat.reads == "pairs" else _runs(sample)
            values.append(float(claim.stat.estimate(read, claim.params, n_boot=1).value))
        out[claim.id] = values
    return out


def _runs(sample: pd.DataFrame) -> Any:
    from fecbench.reproduce import statistics as st

    return st.Runs(sample["value"].to_numpy(float), sample["base"].to_numpy(float))


def false_against(verdict: ev.Verdict, truth: float) -> bool:
    """Whether a verdict contradicts the truth: holds on the wrong side (or on the threshold), fails on the right
    side (or on it), at the threshold outside the band; an ≈ claim holding outside its band or failing inside."""
    c, said = verdict.claim, verdict.verdict
    inside = abs(truth - c.threshold) <= c.tolerance + 1e-12
    if c.compare == "approx":
        return (said == "holds" and not inside) or (said == "fails" and inside)
    true_side = truth < c.threshold if c.compare == "<" else truth > c.threshold
    on = truth == c.threshold
    return ((said == "holds" and (not true_side or on)) or (said == "fails" and (true_side or on))
            or (said == ev.AT_THRESHOLD and not inside))


@dataclass
class Result:
    world: World
    replays: int
    false: int
    truths: dict[str, list[float]]
    finals: dict[str, dict[str, int]]

    @property
    def rate(self) -> float:
        return self.false / max(1, self.replays)


def prepared_campaign(folder: Path) -> cp.Campaign:
    from fecbench.runners.experiment.prepare import prepare

    design = folder / "worlds.toml"
    design.write_text(DESIGN)
    return cp.Campaign("synthetic", "worlds", folder / "worlds.sqlite", prepare(design), {})


def run_world(world: World, campaign: cp.Campaign, replays: int, budget_s: float, seed: int = 46) -> Result:
    pack = _pack(world)
    truth = truths(world, campaign)
    false = 0
    finals: dict[str, dict[str, int]] = {c.id: {} for c, _ in world.claims}
    for i in range(replays):
        world.rng = np.random.default_rng([seed, i])
        world.units = {}
        world.switch_at = int(budget_s / RUN_S / 2) if world.after else 10 ** 9
        looks = replay.simulate(pack, "synthetic", {("synthetic", "worlds"): campaign}, {"worlds": world}, budget_s,
                                "new", look_every_s=budget_s / 15)
        # Each look's verdicts against the truth of their time (a drifting world's changes half-way).
        false += any(false_against(v, truth[v.claim.id][-1 if look.machine_s >= budget_s / 2 else 0])
                     for look in looks for v in look.verdicts)
        for v in looks[-1].verdicts:
            finals[v.claim.id][v.verdict] = finals[v.claim.id].get(v.verdict, 0) + 1
    return Result(world, replays, false, truth, finals)


def bench_worlds(replays: int = 200, budget_s: float = 900.0, only: list[str] | None = None,
                 console: Any = None) -> list[Result]:
    """Every world of the catalogue (or ``only`` those), ``replays`` each: the rows of README's table."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    worlds = [w for w in catalogue() if not only or w.name in only]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        campaign = prepared_campaign(Path(folder))
        for world in worlds:
            results.append(run_world(world, campaign, replays, budget_s))
    table = Table(title=f"false verdicts over {replays} replays, {budget_s / 60:g} min of machine time each "
                        "(a look after every fifteenth); stated level 0.05 family-wise per world")
    for col in ("world", "claims: truth → final verdicts", "false", "rate [95 % Wilson]"):
        table.add_column(col)
    for r in results:
        low, high = replay.wilson(r.false, r.replays)
        claims = "; ".join(f"{cid} {'/'.join(f'{t:.3g}' for t in r.truths[cid])} → "
                           + ", ".join(f"{k} {n}" for k, n in sorted(r.finals[cid].items())) for cid in r.finals)
        table.add_row(r.world.name, claims, f"{r.false}/{r.replays}", f"{r.rate:.3f} [{low:.3f}, {high:.3f}]")
    console.print(table)
    return results
