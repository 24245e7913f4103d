"""A claim's own draws: the cells it is about and the seeded order in which its verdict reads them.

A claim covers *cells*: the design points its ``where`` keeps, crossed with its sizes, each with the same
weight. Its observations are draws from its cells: draw t picks a cell uniformly at random and takes that cell's
next seeds, one for a statistic over pairs or runs, ``min_seeds`` for one over blocks (the block's ratio of
medians), and a trend's draw picks two cells of one size whose factor differs (the second uniformly among those;
with ``within``, among those that share that factor's value: a trend within each technology). A claim over
several sizes takes each size's seeds from a lane of its own (``_lanes``): runs of one point and repetition meet
the same losses whatever their size, so two sizes must never share a repetition within one claim.

**One stream of cells per design, shared by its claims.** The cells come from one sequence of cells of the whole
design (every point × size, each uniformly at random, independently; numpy PCG64 seeded by the design's seed),
the same for every claim: a claim reads it in order and keeps the cells that are its own (a trend: a first cell of
its own, then the next cell of the stream that is a partner of that one). Keeping, from a sequence of independent
uniform draws over all cells, those in a set gives independent uniform draws over that set (rejection sampling),
so a claim's observations are independent draws from its population, "a uniformly random cell of the claim, on
fresh seeds", whatever other claims ask for: every confidence sequence of ``sequential`` applies to them as it
stands. And the cells of two claims' draws coincide wherever their populations meet, in the same order: claims
about the same cells (rquic2021's three Wi-Fi 5 % 20 MiB claims) draw the same cells with the same seeds, so the
runs one claim's draws buy are the next draws of the others, and a claim about a subset of another's cells reads
its draws out of the other's. Runs are shared where two claims' draws name the same (point, seed, size), which the
design makes one run (common random numbers); what a claim reads is a prefix of its own fixed sequence, never runs
in proportions that another claim's data chose (``fecbench bench worlds``' overlap worlds).

Each unit of a draw compares two runs at one seed: the claim's label and its baseline at the cell's point (or, with
``baseline_at``, at the point that differs from it in those factors: one label across two points); for a
competing-flows claim (``FLOWS``) the design's foreground label at the point whose background flow
is the claim's label and at the one whose background is its baseline (the design's selection factor; its cells
are pairs of points, drawn from a stream of the claim's own).

A claim's sample is the *prefix* of its draws whose runs are all done (``samples``): a later draw waits
for an earlier one, so the observations always come in their drawn order, and the allocator runs a
claim's draws in that order. Draws stop where a cell would need more seeds than ``seeds_per_cell``.

A statistic over every cell's own value (a *census*: ``statistics.points``) draws no cells at random: every
cell is judged, so its draws are rounds over all cells in one seeded order (the design's one order of its cells,
kept to the claim's: censuses about the same cells visit them alike), each draw a cell's next block of
``min_seeds`` seeds; a cell's seeds are read in order (``samples``) and a cell already decided by its own
interval takes no more (``allocate``).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fecbench.verdicts.pack import Claim
from fecbench.verdicts.statistics import FLOWS

if TYPE_CHECKING:
    from fecbench.runners.experiment.prepare import Prepared

UnitKey = tuple[int, int, "int | None"]          # point, repetition, size
RunRef = tuple[int, int, "int | None", str]      # point, repetition, size, label
#: A cell: the points of its two sides (the same point but for a flows claim) and its size.
Cell = tuple[int, int, "int | None"]

#: Draws made per claim at most (a claim is decided, or its budget spent, long before).
MAX_DRAWS = 4096


def extra_repetitions(repetitions: int) -> int:
    """Extra seeds a design's claims may draw beyond its repetitions (``seeds``)."""
    return max(8 * repetitions, 128)


@dataclass(frozen=True)
class DrawSpace:
    """What a claim's draws depend on in its design: the points (their factor values), sizes, seed and
    repetitions, the competing flows' selection factor and the foreground label."""
    points: dict[int, dict[str, Any]]
    sizes: tuple[int | None, ...]
    seed: int
    repetitions: int
    select: str | None = None
    foreground: str = ""

    @property
    def seeds_per_cell(self) -> int:
        """The repetitions a cell of a claim may take: the design's and the extra seeds."""
        return self.repetitions + extra_repetitions(self.repetitions)


def space_from_runs(frame: Any, seed: int = 0) -> DrawSpace:
    """The space a results frame (``analysis.results.load``) ran: its points and their factor values, its sizes
    and repetitions (for claims judged on a database without its design file)."""
    factors = list(frame.attrs.get("factors", []))
    points = {int(p): {f: g[f].iloc[0] for f in factors} for p, g in frame.groupby("point")}
    sizes = tuple(sorted({int(s) for s in frame["size"].dropna()})) or (None,)
    return DrawSpace(points=points, sizes=sizes, seed=seed, repetitions=int(frame["repetition"].max()) + 1)


def space_of(prepared: Prepared) -> DrawSpace:
    design = prepared.design
    return DrawSpace(points=prepared.points, sizes=tuple(design.workload.sizes) or (None,), seed=design.seed,
                 repetitions=design.repetitions, select=design.flows.select if design.flows else None,
                 foreground=design.impls[0].label if design.impls else "")


@dataclass(frozen=True)
class Unit:
    """One comparison of a draw: the claim's label's run and its baseline's, and which of the draw's cells."""
    mine: RunRef
    base: RunRef
    cell: int = 0


@dataclass(frozen=True)
class Draw:
    units: tuple[Unit, ...]

    @property
    def group(self) -> str:
        """The cell of its first unit as a sample names it (``point|size``): a census draw's one cell."""
        point, _, size, _ = self.units[0].mine
        return f"{point}|{'' if size is None else size}"

    def runs(self) -> list[RunRef]:
        return [ref for unit in self.units for ref in (unit.mine, unit.base)]


def matches(value: float, wanted: object) -> bool:
    if isinstance(wanted, dict):
        return wanted["min"] - 1e-12 <= value <= wanted["max"] + 1e-12
    return any(math.isclose(value, w, rel_tol=1e-9, abs_tol=1e-12) for w in wanted)  # type: ignore[union-attr]


def claim_points(claim: Claim, space: DrawSpace) -> list[int]:
    """The design points a claim's filters keep."""
    factors = {k: v for k, v in claim.where.items() if k not in ("size", "loss_class", "baseline_class")}
    return [p for p, values in sorted(space.points.items())
            if all(k in values and matches(float(values[k]), v) for k, v in factors.items())]


def claim_cells(claim: Claim, space: DrawSpace) -> list[Cell]:
    """The claim's cells: its points × its sizes (the design's when it names none), equal weights; for a flows
    claim, each point with the claim's background paired with the point that differs only in it."""
    sizes = claim.sizes() or list(space.sizes) or [None]
    points = claim_points(claim, space)
    if claim.baseline_at:
        return [(point, base, size) for point, base in _baseline_points(claim, space, points) for size in sizes]
    if claim.stat.reads != FLOWS:
        return [(point, point, size) for point in points for size in sizes]
    select = space.select
    if select is None:
        return []
    values = space.points

    def rest(point: int) -> dict:
        return {k: v for k, v in values[point].items() if k != select}

    pairs = [(a, b) for a in points if values[a].get(select) == claim.label
             for b in points if values[b].get(select) == claim.baseline and rest(a) == rest(b)]
    return [(a, b, size) for a, b in pairs for size in sizes]


def _baseline_points(claim: Claim, space: DrawSpace, points: list[int]) -> list[tuple[int, int]]:
    """Each claim point with the point its baseline runs at (``baseline_at``: the same factor values but those it
    sets); a point the design has no such partner for is no cell of the claim (the fidelity record counts them)."""
    def key(values: dict[str, Any]) -> tuple:
        return tuple(sorted((k, round(float(v), 12) if isinstance(v, (int, float)) else v) for k, v in values.items()))

    where = {key(values): p for p, values in space.points.items()}
    found = ((p, where.get(key({**space.points[p], **claim.baseline_at}))) for p in points)
    return [(p, base) for p, base in found if base is not None]


def draws(claim: Claim, space: DrawSpace) -> list[Draw]:
    """The claim's draws in order (see the module)."""
    stat = claim.stat
    block = stat.seeds_per_point(claim.params)
    cells = tuple(claim_cells(claim, space))
    factor = claim.params.get("factor") if stat.points_per_observation == 2 else None
    factor_values = None if factor is None else tuple(float(space.points[a][factor]) for a, _, _ in cells)
    within = claim.params.get("within") if factor is not None else None
    # a trend's two cells share their size (a bandwidth trend never sets a 10 kB cell against a 50 kB one) and
    # the value of `within`, where set
    groups = tuple(f"{size}|{space.points[a][within] if within else ''}" for a, _, size in cells) \
        if factor is not None else None
    labels = (space.foreground,) * 2 if stat.reads == FLOWS else (claim.label, claim.baseline)
    design_cells = _design_cells(space) if stat.reads != FLOWS else cells
    stream = (space.seed, "design" if stat.reads != FLOWS else claim.id, design_cells)
    lanes = _lanes(cells, space)
    if stat.census:
        return list(_census(stream, cells, block, space.seeds_per_cell, labels, lanes))
    return list(_draws(stream, cells, block, factor_values, space.seeds_per_cell, labels, groups, lanes))


#: How a cell's k-th seed maps to a repetition: k × stride + the cell's offset (``_lanes``).
Lanes = tuple[int, tuple[int, ...]]


def _lanes(cells: tuple[Cell, ...], space: DrawSpace) -> Lanes:
    """Seeds independent across sizes. A run's loss seed is its (point, repetition)'s, whatever its size (common
    random numbers), so a claim that pools sizes and took repetition r at two sizes of one point would read two pairs
    that met the same losses: dependent draws, which its confidence sequence does not allow (issue 69: 16 of 200 false
    at correlation 0.9, 3 of 200 at 0). Such a claim gives each of the design's sizes its own lane of repetitions:
    size i of S takes repetitions i, i + S, i + 2S, …; a claim of one size takes them all in order."""
    if len({size for _, _, size in cells}) <= 1:
        return 1, (0,) * len(cells)
    order = {size: i for i, size in enumerate(space.sizes)}
    return len(space.sizes), tuple(order.get(size, 0) for _, _, size in cells)


#: Which cells a stream draws from: (design seed, whose stream: "design" or a flows claim's id, its cells).
Stream = tuple[int, str, tuple]
#: Cells of a stream drawn at a time.
_CHUNK = 4096


def _design_cells(space: DrawSpace) -> tuple[tuple[int, int | None], ...]:
    """Every cell of the design (point, size), in one fixed order: what its shared stream draws from."""
    return tuple((point, size) for point in sorted(space.points) for size in space.sizes)


def _rng(stream: Stream) -> np.random.Generator:
    seed, whose, _ = stream
    text = f"fecbench-draws-v2:{seed}:{whose}"
    return np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


def _positions(stream: Stream, cells: tuple[Cell, ...]) -> np.ndarray:
    """The stream's place of each of the claim's cells (a flows claim's stream is over its own cells)."""
    _, _, drawn = stream
    if drawn is cells or drawn == cells:
        return np.arange(len(cells))
    where = {cell: i for i, cell in enumerate(drawn)}
    return np.array([where[(a, size)] for a, _, size in cells])


def _claim_stream(stream: Stream, cells: tuple[Cell, ...]) -> Iterator[int]:
    """The claim's cells (indices into ``cells``) as the stream draws them, its other cells left out: independent
    and uniform over the claim's cells (see the module). Endless: the caller stops."""
    rng = _rng(stream)
    mine = np.full(len(stream[2]), -1)
    mine[_positions(stream, cells)] = np.arange(len(cells))
    while True:
        chunk = mine[rng.integers(len(mine), size=_CHUNK)]
        yield from (int(i) for i in chunk[chunk >= 0])


@functools.lru_cache(maxsize=256)
def _census(stream: Stream, cells: tuple[Cell, ...], block: int, seeds_per_cell: int,
            labels: tuple[str, str], lanes: Lanes) -> tuple[Draw, ...]:
    """A census's draws (a statistic over every cell's own value, ``statistics.points``): rounds over every cell in
    one seeded order (the stream's permutation of its cells, kept to the claim's), each draw the cell's next block of
    seeds; the allocator skips the cells already decided."""
    if not cells:
        return ()
    rank = np.argsort(_rng(stream).permutation(len(stream[2])))    # each stream cell's place in the order
    order = [int(i) for i in np.argsort(rank[_positions(stream, cells)], kind="stable")]
    stride, offsets = lanes
    out: list[Draw] = []
    for start in range(0, seeds_per_cell // stride - block + 1, block):
        for index in order:
            mine_point, base_point, size = cells[index]
            reps = (k * stride + offsets[index] for k in range(start, start + block))
            out.append(Draw(tuple(Unit((mine_point, rep, size, labels[0]), (base_point, rep, size, labels[1]))
                                  for rep in reps)))
        if len(out) >= MAX_DRAWS:
            break
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _draws(stream: Stream, cells: tuple[Cell, ...], block: int, factor_values: tuple[float, ...] | None,
           seeds_per_cell: int, labels: tuple[str, str], groups: tuple[str, ...] | None,
           lanes: Lanes) -> tuple[Draw, ...]:
    if not cells:
        return ()
    taken = [0] * len(cells)
    stride, offsets = lanes

    def fits(index: int) -> bool:
        return (taken[index] + block) * stride <= seeds_per_cell

    def take(index: int, within: int) -> tuple[Unit, ...]:
        mine_point, base_point, size = cells[index]
        reps = (k * stride + offsets[index] for k in range(taken[index], taken[index] + block))
        units = tuple(Unit((mine_point, rep, size, labels[0]), (base_point, rep, size, labels[1]), within)
                      for rep in reps)
        taken[index] += block
        return units

    partners = None if factor_values is None else _partners(factor_values, groups)
    if partners is not None and not any(partners):
        return ()             # no two cells to compare at all
    drawn = _claim_stream(stream, cells)
    out: list[Draw] = []
    while len(out) < MAX_DRAWS:
        first = next(drawn)
        if partners is None:
            if not fits(first):
                break
            out.append(Draw(take(first, 0)))
            continue
        if not partners[first]:
            continue          # this cell has no partner within its group: drawn again
        second = next(i for i in drawn if i in partners[first])    # the next partner the stream draws
        if not (fits(first) and fits(second)):
            break
        out.append(Draw(take(first, 0) + take(second, 1)))
    return tuple(out)


def _partners(factor_values: tuple[float, ...], groups: tuple[str, ...] | None) -> list[frozenset[int]]:
    """A trend's partners of each cell: the cells of its group whose factor differs."""
    return [frozenset(i for i in range(len(factor_values)) if factor_values[i] != factor_values[first]
                      and (groups is None or groups[i] == groups[first])) for first in range(len(factor_values))]


def runs_in_order(claim_draws: list[Draw]) -> list[RunRef]:
    """Every run of the draws, in draw order, each once."""
    return list(dict.fromkeys(ref for draw in claim_draws for ref in draw.runs()))
