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
from fecbench.runners.executors.progress import Reporter, RichReporter
from fecbench.verdicts import campaign as cp
from fecbench.verdicts import draws as dr
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts.pack import Claim, Pack, Profile
from fecbench.verdicts.statistics import error_control as ec
from fecbench.verdicts.validation import replay

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
WANDER = 0.99           # ``time_correlation``'s AR(1) coefficient per new unit (a state lasting ~100 units)
TRUTH_DRAWS = 20_000
WORLDS = Path(__file__).with_name("worlds.toml")


@dataclass
class World:
    """A synthetic world (see the module): ``median[size]`` the median ratio fec ÷ quic of a cell of that size
    (``after``: from half the budget on, or ``drift_to``: reached linearly at the budget's end, drift),
    ``fails``: fec's run fails when its value is above this quantile of its cell's (its second run too),
    ``fail_chance``: with it, such a run fails only at this chance, drawn for each attempt, and a second attempt is
    a new draw of the unit's ratio (a real re-run's timing differs),
    ``base_fails``: quic's run fails at random at this rate (its second run too), ``skew``: the ratio's size
    follows the baseline's; ``point_scale`` / ``point_spread``: per design point (in the order of p), a factor on
    the median and the log ratio's sd (default 1 and ``SPREAD``); ``size_correlation``: the correlation of a
    point and repetition's log ratios across sizes (one loss seed for every size: runs of one repetition share a
    loss pattern); ``drift_scale``: ``drift_to`` reached linearly in the median (default) or in its log;
    ``time_correlation``: the share of a log ratio's variance that wanders slowly with the order the units are
    measured in (an AR(1) over new units, ``WANDER``: a machine whose state comes and goes, each unit's
    marginal unchanged, so the truth is too)."""
    name: str
    text: str
    median: dict[int, float]
    claims: list[tuple[Claim, float | None]]        # each claim and its truth (None: from its estimand)
    after: dict[int, float] | None = None
    drift_to: dict[int, float] | None = None
    fails: float | None = None
    fail_chance: float | None = None
    base_fails: float = 0.0
    skew: bool = False
    drift_scale: str = "linear"                     # how ``drift_to`` is reached: linear in the median, or in its log
    point_scale: tuple[float, ...] = ()
    point_spread: tuple[float, ...] = ()
    size_correlation: float = 0.0
    time_correlation: float = 0.0
    wander: float = 0.0                             # the AR(1) state of ``time_correlation``
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    frame: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["key"]))
    answers: int = 10 ** 9                          # the answers a replay's budget buys (its time axis)

    def __post_init__(self) -> None:
        self.frame.attrs.update(factors=["p"], labels=["quic", "fec"], sizes=list(SIZES))
        self.units: dict[tuple[int, int, int], tuple[float, float]] = {}   # (baseline, ratio) per unit
        self.shared: dict[tuple[int, int], tuple[float, float]] = {}        # (point, repetition) -> its sizes' noise

    # What replay.simulate and evaluate ask of a world.
    classes = pd.DataFrame(columns=["run_key"])
    flows = pd.DataFrame(columns=["run_key"])

    def medians_at(self, when: float) -> dict[int, float]:
        """The cells' medians by size at a fraction ``when`` of the budget."""
        if self.drift_to is not None:
            t = min(max(when, 0.0), 1.0)
            if self.drift_scale == "log":
                return {size: m * (self.drift_to[size] / m) ** t for size, m in self.median.items()}
            return {size: m + (self.drift_to[size] - m) * t for size, m in self.median.items()}
        return self.after if self.after is not None and when >= 0.5 else self.median

    def spread(self, point: int) -> float:
        return self.point_spread[point] if point < len(self.point_spread) else SPREAD

    def centre(self, point: int, size: int, medians: dict[int, float]) -> float:
        """The log of a cell's median ratio."""
        return math.log(medians[size] * (self.point_scale[point] if point < len(self.point_scale) else 1.0))

    def pairs(self, point: int, size: int, n: int, rng: np.random.Generator, medians: dict[int, float],
              z: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(baseline DCT, ratio) of ``n`` units of one cell (``z``: their standard normals, shape (n, 2), if given)."""
        z = rng.standard_normal((n, 2)) if z is None else z
        base = 100.0 * (size / 1000) ** 0.5 * (1 + 0.2 * point) * np.exp(BASE_SPREAD * z[:, 0])
        centre = self.centre(point, size, medians)
        if self.skew:   # the ratio follows the baseline: small baselines a little better, large ones much worse
            return base, np.exp(centre + np.where(z[:, 0] > 0.3, 1.5, -0.1) + 0.05 * z[:, 1])
        return base, np.exp(centre + self.spread(point) * z[:, 1])

    def pair(self, point: int, size: int, rng: np.random.Generator, medians: dict[int, float]) -> tuple[float, float]:
        """(baseline DCT, ratio) of one unit."""
        base, ratio = self.pairs(point, size, 1, rng, medians)
        return float(base[0]), float(ratio[0])

    def _unit_pair(self, point: int, repetition: int, size: int, medians: dict[int, float]) -> tuple[float, float]:
        """(baseline DCT, ratio) of a new unit; with ``size_correlation``, its noise partly that of its point and
        repetition's other sizes (each marginal as ``pair``'s)."""
        if not self.size_correlation and not self.time_correlation:
            return self.pair(point, size, self.rng, medians)
        z = self.rng.standard_normal(2)
        if self.size_correlation:
            if (point, repetition) not in self.shared:   # drawn once, when its first size is
                self.shared[(point, repetition)] = tuple(self.rng.standard_normal(2))
            rho = self.size_correlation
            z = math.sqrt(rho) * np.array(self.shared[(point, repetition)]) + math.sqrt(1 - rho) * z
        if self.time_correlation:   # the wander moves once per new unit; its marginal stays N(0, 1)
            self.wander = WANDER * self.wander + math.sqrt(1 - WANDER ** 2) * float(self.rng.standard_normal())
            c = self.time_correlation
            z[1] = math.sqrt(c) * self.wander + math.sqrt(1 - c) * z[1]
        base, ratio = self.pairs(point, size, 1, self.rng, medians, z=z[None, :])
        return float(base[0]), float(ratio[0])

    def answer(self, run: Any, order: int, again: bool = False) -> dict[str, Any]:
        medians = self.medians_at(order / self.answers)
        unit = (run.point, run.repetition, run.size)
        if unit not in self.units:   # both labels of a unit share its draw (common random numbers)
            self.units[unit] = (*self._unit_pair(run.point, run.repetition, run.size, medians),
                                float(self.rng.random()))
        if again and self.fail_chance is not None and run.label == "fec":   # a new attempt, a new draw
            base, _, chance = self.units[unit]
            self.units[unit] = (base, self.pair(run.point, run.size, self.rng, medians)[1], chance)
        base, ratio, chance = self.units[unit]
        value = base if run.label == "quic" else base * ratio
        status = "ok"
        if run.label == "fec" and self.fails is not None \
                and ratio > _quantile_ratio(math.exp(self.centre(run.point, run.size, medians)), self.fails,
                                            self.skew, self.spread(run.point)) \
                and (self.fail_chance is None or self.rng.random() < self.fail_chance):
            status = "failed"
        if run.label == "quic" and chance < self.base_fails:     # at random, and again when run once more
            status = "failed"
        return {"key": run.key, "recorded_key": run.key, "point": run.point, "repetition": run.repetition,
                "size": run.size, "label": run.label, "status": status, "p": run.values.get("p"),
                "dct_ms": value if status == "ok" else None, "timeout_s": 60.0, "duration_s": RUN_S,
                "started_at": f"{order:012d}"}


def _quantile_ratio(median: float, q: float, skew: bool, spread: float = SPREAD) -> float:
    """The ratio above which a fraction 1 − q of a cell's ratios lie."""
    from scipy.stats import norm

    return math.inf if skew else median * math.exp(spread * float(norm.ppf(q)))


def _median_for_share(share: float, threshold: float = 0.99) -> float:
    """The cell median ratio whose share of ratios below ``threshold`` is ``share``."""
    from scipy.stats import norm

    if share <= 0:
        return threshold * math.exp(5 * SPREAD)
    return threshold / math.exp(SPREAD * float(norm.ppf(share)))


def catalogue(path: Path = WORLDS) -> list[World]:
    """The worlds of ``worlds.toml`` with their claims (a SpecError naming the file and key on a mistake)."""
    from fecbench.inputs.specs import Section
    from fecbench.runners.experiment.design import parse_size
    from fecbench.verdicts.pack import DesignRef, claims_of

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
                            drift_to=sizes(w.get("drift_to", dict)) if "drift_to" in w else None,
                            fails=w.get("fails", float, None), fail_chance=w.get("fail_chance", float, None),
                            base_fails=w.get("base_fails", float, 0.0),
                            skew=w.get("skew", bool, False),
                            drift_scale=w.get("drift_scale", str, "linear", choices=["linear", "log"]),
                            point_scale=tuple(float(v) for v in w.get("point_scale", list, [])),
                            point_spread=tuple(float(v) for v in w.get("point_spread", list, [])),
                            size_correlation=w.get("size_correlation", float, 0.0, min=0.0, max=1.0),
                            time_correlation=w.get("time_correlation", float, 0.0, min=0.0, max=1.0)))
        w.done()
    return worlds


def _pack(world: World) -> Pack:
    return Pack(name=f"worlds-{world.name}", title=world.text, dir=Path("."), papers={"worlds": "synthetic"},
                designs={}, profiles={"synthetic": Profile("synthetic", "synthetic", [], {}, [], None)},
                default_profile="synthetic", claims=[c for c, _ in world.claims])


#: Seeds per cell of a census's truth (a cell's own ratio of medians over an unlimited supply of seeds).
TRUTH_SEEDS = 20_000
#: The budget fractions at which a drifting world's truth is computed (a look after every fifteenth).
TIMES = tuple(i / 15 for i in range(16))


def population(claim: Claim, world: World, space: dr.DrawSpace, medians: dict[int, float], rng: np.random.Generator
               ) -> Any:
    """A large sample of the claim's population as its estimand defines it, answered without failures: every cell on
    TRUTH_SEEDS seeds for a census; else TRUTH_DRAWS draws of a uniform cell (a block of ``min_seeds`` seeds each
    over blocks; two cells whose factor differs for a trend), one seed each otherwise. Written here, apart from the
    draws and confidence sequences it checks."""
    stat = claim.stat
    cells = dr.claim_cells(claim, space)
    factor = claim.params.get("factor")

    def rows(draw: int, cell: int, point: int, size: int, n: int) -> dict[str, np.ndarray]:
        base, ratio = world.pairs(point, size, n, rng, medians)
        value = float(space.points[point][factor]) if factor else math.nan
        return {"draw": np.full(n, draw), "cell": np.full(n, cell), "group": np.full(n, f"{point}|{size}"),
                "factor": np.full(n, value), "value": base * ratio, "base": base, "ratio": ratio}

    parts = []
    if stat.census:
        parts = [rows(i, 0, point, size, TRUTH_SEEDS) for i, (point, _, size) in enumerate(cells)]
    elif not stat.needs_points:   # one seed per draw: TRUTH_DRAWS draws of uniform cells
        chosen = rng.integers(len(cells), size=TRUTH_DRAWS)
        for index, (point, _, size) in enumerate(cells):
            parts.append(rows(0, 0, point, size, int((chosen == index).sum())))
    else:                         # a block of min_seeds seeds per cell drawn; a trend's two cells, factors apart
        block = stat.seeds_per_point(claim.params)
        for i in range(TRUTH_DRAWS):
            picks = [cells[int(rng.integers(len(cells)))]]
            if stat.points_per_observation == 2:
                first = float(space.points[picks[0][0]][factor])
                within = claim.params.get("within")
                others = [c for c in cells if float(space.points[c[0]][factor]) != first
                          and c[2] == picks[0][2]   # the same size, as the draws pair them
                          and (not within or space.points[c[0]][within] == space.points[picks[0][0]][within])]
                picks.append(others[int(rng.integers(len(others)))])
            parts += [rows(i, j, point, size, block) for j, (point, _, size) in enumerate(picks)]
    sample = pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
    if not stat.needs_points:
        sample["draw"] = np.arange(len(sample))
    sample.attrs["cells"] = len(cells)
    if stat.reads == "pairs":
        return sample
    from fecbench.verdicts import statistics as st

    return st.Runs(sample["value"].to_numpy(float), sample["base"].to_numpy(float))


def truths(world: World, campaign: cp.Campaign) -> dict[str, list[float]]:
    """Each claim's truth, its statistic's estimand (``ClaimStatistic.estimand``) on a large sample of its population
    (``population``); a drifting world's at each of ``TIMES`` (else one)."""
    times = TIMES if world.drift_to is not None or world.after is not None else (0.0,)
    out: dict[str, list[float]] = {}
    for claim, fixed in world.claims:
        if fixed is not None:
            out[claim.id] = [fixed] * len(times)
            continue
        out[claim.id] = [float(claim.stat.estimand(population(claim, world, campaign.space, world.medians_at(t),
                                                              np.random.default_rng(99)), claim.params))
                         for t in times]
    return out


def truth_at(truth: list[float], when: float) -> float:
    """A claim's truth at a fraction ``when`` of the budget: its value at ``TIMES`` interpolated linearly between them
    (an unchanging world: its one truth). A verdict shown at a look is judged against the truth of that instant alone
    (issue 69 item 6): no window forgives a verdict taken on draws from before a drift crossed its threshold; only
    re-opening it (the audit, the exchangeability test) keeps such a verdict off the page."""
    if len(truth) == 1:
        return truth[0]
    return float(np.interp(min(max(when, 0.0), 1.0), TIMES, truth))


def false_against(verdict: ev.Verdict, truth: float) -> bool:
    """Whether a verdict contradicts the truth: holds on the wrong side (or on the threshold), fails on the right
    side (not on it: "fails" of "< t" says ≥ t), at the threshold outside the band; an ≈ claim holding outside its
    band or failing inside."""
    c, said = verdict.claim, verdict.verdict
    inside = abs(truth - c.threshold) <= c.tolerance + 1e-12
    if c.compare == "approx":
        return (said == "holds" and not inside) or (said == "fails" and inside)
    true_side = truth < c.threshold if c.compare == "<" else truth > c.threshold
    # "fails" of "< t" says the value is at or above t: at a truth exactly on t it is right
    return (said == "holds" and not true_side) or (said == "fails" and true_side) \
        or (said == ev.AT_THRESHOLD and not inside)


@dataclass
class Result:
    world: World
    replays: int
    false: int
    truths: dict[str, list[float]]
    finals: dict[str, dict[str, int]]
    fdp: float = 0.0    # the mean share of false verdicts among the decided ones at the last look (the page's)

    @property
    def rate(self) -> float:
        return self.false / max(1, self.replays)

    @property
    def undecided(self) -> float:
        """The share of final verdicts that decided nothing (inconclusive, not judged): the price in power."""
        counts = [n for final in self.finals.values() for n in final.values()]
        open_ = [n for final in self.finals.values() for k, n in final.items() if k in ("inconclusive", ev.NOT_JUDGED)]
        return sum(open_) / max(1, sum(counts))


def prepared_campaign(folder: Path) -> cp.Campaign:
    from fecbench.runners.experiment.prepare import prepare

    design = folder / "worlds.toml"
    design.write_text(DESIGN)
    return cp.Campaign("synthetic", "worlds", folder / "worlds.sqlite", prepare(design), {})


def run_world(world: World, campaign: cp.Campaign, replays: int, budget_s: float, seed: int = 46,
              rule: str = ec.FAMILY_WISE) -> Result:
    pack = _pack(world)
    truth = truths(world, campaign)
    false, fdp = 0, 0.0
    finals: dict[str, dict[str, int]] = {c.id: {} for c, _ in world.claims}
    for i in range(replays):
        world.rng = np.random.default_rng([seed, i])
        world.units, world.shared = {}, {}      # a replay's own units: nothing carried from the one before
        world.wander = float(world.rng.standard_normal()) if world.time_correlation else 0.0   # stationary start
        world.answers = int(budget_s / RUN_S)
        looks = replay.simulate(pack, "synthetic", {("synthetic", "worlds"): campaign}, {"worlds": world}, budget_s,
                                "new", look_every_s=budget_s / 15, rule=rule)
        # Each look's verdicts against the truth of its instant (a drifting world's changes as the budget goes).
        false += any(false_against(v, truth_at(truth[v.claim.id], look.machine_s / budget_s))
                     for look in looks for v in look.verdicts)
        for v in looks[-1].verdicts:
            finals[v.claim.id][v.verdict] = finals[v.claim.id].get(v.verdict, 0) + 1
        last = looks[-1]
        shown = [v for v in last.verdicts if v.verdict in replay.DECIDED]
        wrong = sum(false_against(v, truth_at(truth[v.claim.id], last.machine_s / budget_s)) for v in shown)
        fdp += wrong / max(1, len(shown))
    return Result(world, replays, false, truth, finals, fdp / max(1, replays))


def _claim_line(cid: str, r: Result) -> str:
    """A claim's truth (its first and last for a drifting world) and its final verdicts over the replays."""
    values = r.truths[cid]
    shown = [values[0], values[-1]] if len(set(values)) > 1 else [values[0]]
    return (f"{cid} {' → '.join(f'{t:.3g}' for t in shown)} → "
            + ", ".join(f"{k} {n}" for k, n in sorted(r.finals[cid].items())))


def bench_worlds(replays: int = 200, budget_s: float = 900.0, only: list[str] | None = None,
                 reporter: Reporter | None = None, rule: str = ec.FAMILY_WISE) -> list[Result]:
    """Every world of the catalogue (or ``only`` those), ``replays`` each: the rows of README's table."""
    from rich.table import Table

    reporter = reporter or RichReporter()
    worlds = [w for w in catalogue() if not only or w.name in only]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        campaign = prepared_campaign(Path(folder))
        for world in worlds:
            results.append(run_world(world, campaign, replays, budget_s, rule=rule))
    table = Table(title=f"false verdicts over {replays} replays, {budget_s / 60:g} min of machine time each "
                        f"(a look after every fifteenth); stated level 0.05 per world ({rule})")
    for col in ("world", "claims: truth → final verdicts", "false", "rate [95 % Wilson]", "mean FDP", "undecided"):
        table.add_column(col, overflow="fold")     # a claim's id whole, however narrow the console (a CI log)
    for r in results:
        low, high = replay.wilson(r.false, r.replays)
        table.add_row(r.world.name, "; ".join(_claim_line(cid, r) for cid in r.finals), f"{r.false}/{r.replays}",
                      f"{r.rate:.3f} [{low:.3f}, {high:.3f}]", f"{r.fdp:.3f}", f"{r.undecided:.2f}")
    reporter.say(table)
    return results
