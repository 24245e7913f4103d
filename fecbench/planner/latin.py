"""The `wsp-lhs` method: a WSP design made a Latin hypercube, then optimised for its minimum distance.

WSP spreads points as far apart as it can, but along one factor they bunch (gaps of 4–6 % of a range at
130 points) and its centred discrepancy is 30× a Latin hypercube's. A Latin hypercube cuts every factor's
range into N equal strata and puts one point in each, so no factor has a gap wider than two strata; a
random one has a poor minimum distance. This method keeps both:

1. start: the WSP design of the same size (the same candidates, constraints and mirror as `wsp`);
2. Latin: along each factor, the i-th smallest coordinate moves to the centre of stratum i (the least
   movement that makes the design a Latin hypercube: the WSP structure survives, ~70 % of its distance);
3. exchanges (Morris & Mitchell 1995's move, our own search): swap one factor's values between a point
   of the closest pair and another point (a stratum neighbour or any point), kept when the design's
   sorted nearest-neighbour distances improve lexicographically (the smallest first: maximin, then how
   many points share it, …); a few independent runs from the same start, the best kept;
4. moves within strata: a point of the closest pair moves away from its neighbour, along each continuous
   factor, inside its own stratum (the design stays a Latin hypercube), kept on the same criterion.

Choice, int and explicit-level factors take the strata's values as WSP's candidates do (balanced level
counts); they are exchanged but not moved. With `mirror`, a factor swapped with another path's by the
mirror shares 2N strata with it (each gets every other one), so the whole design, copies included, is
Latin in every factor. With constraints, an exchange may not make a feasible point infeasible; a point
still infeasible at the end is replaced by the feasible candidate farthest from the design (`relaxed`
points, no longer in their strata).

Portable: coordinates are integers (lattice units of 2^-20), distances exact int64 sums, the random
choices numpy's PCG64 integers from the design seed: the same design on every CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from fecbench.planner import portable
from fecbench.planner.space import Space

SCALE = 1 << portable.LATTICE_BITS     # unit coordinate 1.0 in lattice units
EXCHANGES = 12_000                     # proposals per run at most (fewer for small designs)
MOVES = 6_000                          # proposals of moves within strata at most
CYCLES = 3                             # exchanges then moves, repeated
KICK_BUDGET = 5                        # iterated local search: proposals in all, in exchange budgets
KICK_PATIENCE = 300                    # a search after a kick stops sooner
PATIENCE = 2_500                       # a search stops after this many proposals without improvement
LOCAL = 10                             # a stratum neighbour is at most this many strata away


@dataclass
class LatinResult:
    unit: np.ndarray    # (n, dimension) unit coordinates on the lattice, mirrored copies included
    exchanges: int      # accepted exchanges (best run)
    moves: int          # accepted moves within strata
    proposals: int      # proposals evaluated in all
    relaxed: int        # points replaced to satisfy the constraints (outside the Latin structure)


class _Design:
    """The state a search changes: base points (strata and unit coordinates per factor), their embedded
    integer coordinates, the full design (copies included) and every point's nearest neighbour."""

    def __init__(self, space: Space, strata: np.ndarray, layout: _Strata, unit: np.ndarray):
        self.space = space
        self.strata = strata                  # (m, dim) stratum index of each base point per factor
        self.layout = layout
        self.unit = unit                      # (m, dim) int64 lattice coordinates
        self.blocks = space.embed_blocks()
        self.mirror = np.asarray(space.embed_mirror_permutation()) if space.mirror else None
        self.m = len(unit)
        self.embedded = self.embed(unit)      # (m, W) int64: the base points in the metric space
        self.points = self.full(self.embedded)
        self.nn, self.nn_at = _nearest(self.points)
        self.feasible, self.values = None, None
        if space.constraints:   # natural values kept per factor: a proposal maps only what it changes
            natural = space.natural(unit * portable.LATTICE_STEP)
            self.values = [np.asarray(natural[f.name]) for f in space.varying]
            self.feasible = self._feasible(self.values)

    def copy(self) -> _Design:
        other = object.__new__(_Design)
        other.__dict__.update(self.__dict__)
        for key in ("strata", "unit", "embedded", "points", "nn", "nn_at"):
            setattr(other, key, getattr(self, key).copy())
        if self.feasible is not None:
            other.feasible = self.feasible.copy()
            other.values = [v.copy() for v in self.values]
        return other

    def _feasible(self, columns: list[np.ndarray]) -> np.ndarray:
        """Feasibility of points given their natural values per varying factor (and of their copies)."""
        space = self.space
        fixed = {f.name: f.value for f in space.fixed}
        n = len(columns[0])
        mask = space.feasible({**fixed, **{f.name: c for f, c in zip(space.varying, columns, strict=True)}}, n)
        if space.mirror:   # a copy takes the other path's value through the same mapping (same bounds)
            perm = space.mirror_permutation()
            mask &= space.feasible({**fixed, **{f.name: columns[perm[j]] for j, f in enumerate(space.varying)}}, n)
        return mask

    def _values_of(self, rows: list[int], unit_rows: np.ndarray) -> list[np.ndarray]:
        """Natural values of base points `rows` moved to `unit_rows`: only changed coordinates mapped."""
        columns = []
        for j, f in enumerate(self.space.varying):
            column = self.values[j][rows].copy()
            changed = unit_rows[:, j] != self.unit[rows, j]
            if changed.any():
                column[changed] = f.natural(unit_rows[changed, j] * portable.LATTICE_STEP)
            columns.append(column)
        return columns

    def embed(self, unit: np.ndarray) -> np.ndarray:
        return np.rint(self.space.embed(unit * portable.LATTICE_STEP) * SCALE).astype(np.int64)

    def full(self, embedded: np.ndarray) -> np.ndarray:
        return embedded if self.mirror is None else np.vstack([embedded, embedded[:, self.mirror]])

    def key(self) -> tuple[int, np.ndarray]:
        """What the searches compare: infeasible points (fewer first), then sorted nearest distances."""
        return _key(self.feasible, self.nn)

    def propose(self, rows: list[int], unit_rows: np.ndarray, embedded_rows: np.ndarray,
                force: bool = False) -> _Proposal | None:
        """The design with base points `rows` at `unit_rows` (lattice units; `embedded_rows` in the metric
        space), or None when it is sure to be worse (unless `force`): a point made infeasible, or, the
        constraints being met, a new distance below the smallest one."""
        changed = np.asarray(rows)
        moved = embedded_rows
        if self.mirror is not None:
            changed = np.concatenate([changed, changed + self.m])
            moved = np.vstack([embedded_rows, embedded_rows[:, self.mirror]])
        points = self.points.copy()
        points[changed] = moved
        to_changed = np.square(points[:, None, :] - moved[None, :, :]).sum(axis=2)     # (M, changed)
        to_changed[changed, np.arange(len(changed))] = BIG
        all_feasible = self.feasible is None or bool(self.feasible.all())
        if all_feasible and to_changed.min() < self.nn.min() and not force:
            return None   # checked before the constraints: most proposals end here, cheaply
        feasible, values = None, None
        if self.feasible is not None:
            values = self._values_of(rows, unit_rows)
            feasible = self.feasible.copy()
            feasible[rows] = self._feasible(values)
            if (~feasible).sum() > (~self.feasible).sum() and not force:
                return None
            if (~feasible).sum() == (~self.feasible).sum() and to_changed.min() < self.nn.min() and not force:
                return None
        nn, nn_at = self.nn.copy(), self.nn_at.copy()
        nearest = np.argmin(to_changed, axis=1)
        closer = to_changed[np.arange(len(points)), nearest] < nn
        nn[closer], nn_at[closer] = to_changed[closer, nearest[closer]], changed[nearest[closer]]
        stale = (nn_at[:, None] == changed[None, :]).any(axis=1) & ~closer   # their neighbour moved away
        stale[changed] = True
        if stale.any():
            rows_at = np.flatnonzero(stale)
            block = np.square(points[rows_at][:, None, :] - points[None, :, :]).sum(axis=2)
            block[np.arange(len(rows_at)), rows_at] = BIG
            nn_at[rows_at] = np.argmin(block, axis=1)
            nn[rows_at] = block[np.arange(len(rows_at)), nn_at[rows_at]]
        return _Proposal(list(rows), unit_rows, embedded_rows, points, nn, nn_at, feasible, values)

    def accept(self, p: _Proposal) -> None:
        self.unit[p.rows] = p.unit_rows
        self.embedded[p.rows] = p.embedded_rows
        self.points, self.nn, self.nn_at, self.feasible = p.points, p.nn, p.nn_at, p.feasible
        if p.values is not None:
            for column, new in zip(self.values, p.values, strict=True):
                column[p.rows] = new


@dataclass
class _Proposal:
    rows: list[int]
    unit_rows: np.ndarray
    embedded_rows: np.ndarray
    points: np.ndarray
    nn: np.ndarray
    nn_at: np.ndarray
    feasible: np.ndarray | None
    values: list[np.ndarray] | None

    def key(self) -> tuple[int, np.ndarray]:
        return _key(self.feasible, self.nn)


BIG = np.iinfo(np.int64).max


def _key(feasible: np.ndarray | None, nn: np.ndarray) -> tuple[int, np.ndarray]:
    return (int((~feasible).sum()) if feasible is not None else 0), np.sort(nn)


def _nearest(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every point's nearest other point and the exact squared distance to it (int64), by blocks of rows."""
    nn = np.empty(len(points), dtype=np.int64)
    at = np.empty(len(points), dtype=np.int64)
    for start in range(0, len(points), 256):
        rows = np.arange(start, min(start + 256, len(points)))
        block = np.square(points[rows][:, None, :] - points[None, :, :]).sum(axis=2)
        block[np.arange(len(rows)), rows] = BIG
        at[rows] = np.argmin(block, axis=1)
        nn[rows] = block[np.arange(len(rows)), at[rows]]
    return nn, at


def _better(a: tuple[int, np.ndarray], b: tuple[int, np.ndarray]) -> bool:
    """a before b: fewer infeasible points, else the first differing sorted nearest distance larger."""
    if a[0] != b[0]:
        return a[0] < b[0]
    differ = np.flatnonzero(a[1] != b[1])
    return bool(len(differ)) and bool(a[1][differ[0]] > b[1][differ[0]])


# --- the strata -------------------------------------------------------------------------------------

@dataclass
class _Strata:
    """Per factor: the number of strata, the strata its base points take, and each stratum's centre and
    first and last lattice coordinate (int64; a moved point stays inside its own)."""
    counts: list[int]
    taken: list[np.ndarray]
    centre: list[np.ndarray]
    low: list[np.ndarray]
    high: list[np.ndarray]


def _layout(space: Space, m: int, candidates: np.ndarray) -> _Strata:
    """Strata of each factor: N = m equal ones, or, for a factor the mirror swaps with another, 2m of which
    it takes every other one (its copies fill the rest). With constraints, strata of equal share of the
    feasible candidates (the feasible region's own marginal), so that a Latin design can be feasible."""
    perm = space.mirror_permutation() if space.mirror else list(range(space.dimension))
    layout = _Strata([], [], [], [], [])
    for j, partner in enumerate(perm):
        count = m if partner == j else 2 * m
        first = 0 if partner == j or j < partner else 1
        layout.counts.append(count)
        layout.taken.append(np.arange(first, count, 1 if partner == j else 2))
        i = np.arange(count, dtype=np.int64)
        if space.constraints:
            sorted_values = np.sort(np.rint(candidates[:, j] * SCALE).astype(np.int64))
            k = len(sorted_values)
            centre = sorted_values[((2 * i + 1) * k) // (2 * count)]
            low = sorted_values[(i * k) // count]
            high = np.maximum(sorted_values[np.maximum((i + 1) * k // count - 1, 0)], low)
        else:
            centre = ((2 * i + 1) * SCALE + count) // (2 * count)      # round((i + 0.5) / N), exactly
            low, high = (i * SCALE + count) // count, ((i + 1) * SCALE - 1) // count
            f = space.varying[j]
            if f.kind in ("int", "choice"):   # the values it can take (balanced level counts)
                u = f.lattice_unit_of(f.natural(centre * portable.LATTICE_STEP))
                centre = np.rint(u * SCALE).astype(np.int64)
        layout.centre.append(centre)
        layout.low.append(low)
        layout.high.append(high)
    return layout


def latinise(space: Space, base: np.ndarray, candidates: np.ndarray) -> _Design:
    """The WSP base points moved to strata centres, factor by factor, in the order of their coordinates."""
    m = len(base)
    layout = _layout(space, m, candidates)
    strata = np.empty((m, space.dimension), dtype=np.int64)
    unit = np.empty((m, space.dimension), dtype=np.int64)
    for j in range(space.dimension):
        order = np.lexsort((np.arange(m), base[:, j]))        # stable: ties by row
        strata[order, j] = layout.taken[j]
        unit[:, j] = layout.centre[j][strata[:, j]]
    return _Design(space, strata, layout, unit)


# --- the searches -----------------------------------------------------------------------------------

def _critical(design: _Design, rng: np.random.Generator) -> tuple[int, int]:
    """A point of the closest pair (full index) and its base row."""
    closest = np.flatnonzero(design.nn == design.nn.min())
    c = int(closest[rng.integers(len(closest))])
    return c, c % design.m


def _exchanges(design: _Design, rng: np.random.Generator, budget: int,
               patience: int = PATIENCE) -> tuple[_Design, int, int]:
    """Swaps of one factor's strata between a point of the closest pair and a stratum neighbour (half the
    time) or any point; kept when the design improves. Returns the design, swaps kept, proposals."""
    m, dims = design.m, design.space.dimension
    holder = [dict(zip(design.strata[:, j].tolist(), range(m), strict=True)) for j in range(dims)]
    best, kept, idle, proposals = design.key(), 0, 0, 0
    while proposals < budget and idle < patience and m > 1:
        proposals += 1
        idle += 1
        _, a = _critical(design, rng)
        j = int(rng.integers(dims))
        step = 1 if design.layout.counts[j] == m else 2
        if rng.integers(2):
            offset = int(rng.integers(1, LOCAL + 1)) * (1 if rng.integers(2) else -1)
            b = holder[j].get(int(design.strata[a, j]) + offset * step)
            if b is None:
                continue
        else:
            b = int(rng.integers(m - 1))
            b += b >= a
        if design.unit[a, j] == design.unit[b, j]:
            continue   # the same value (a level of a discrete factor): nothing changes
        rows = design.unit[[a, b]].copy()
        rows[0, j], rows[1, j] = rows[1, j], rows[0, j]
        embedded = design.embedded[[a, b]].copy()
        block = design.blocks[j]
        embedded[0, block], embedded[1, block] = design.embedded[b, block], design.embedded[a, block]
        proposal = design.propose([a, b], rows, embedded)
        if proposal is None or not _better(proposal.key(), best):
            continue
        design.accept(proposal)
        sa, sb = int(design.strata[a, j]), int(design.strata[b, j])
        design.strata[a, j], design.strata[b, j] = sb, sa
        holder[j][sa], holder[j][sb] = b, a
        best, kept, idle = proposal.key(), kept + 1, 0
    return design, kept, proposals


def _kick(design: _Design, rng: np.random.Generator) -> _Design:
    """A copy of the design with one factor's values rotated among a point of the closest pair and two
    others (Grosso, Jamali & Locatelli 2009's perturbation): out of a local optimum, still Latin."""
    _, a = _critical(design, rng)
    others = rng.choice(np.delete(np.arange(design.m), a), size=2, replace=False)
    rows = [a, int(others[0]), int(others[1])]
    j = int(rng.integers(design.space.dimension))
    kicked = design.copy()
    unit, embedded = design.unit[rows].copy(), design.embedded[rows].copy()
    block = design.blocks[j]
    unit[:, j] = design.unit[np.roll(rows, 1), j]
    embedded[:, block] = design.embedded[np.roll(rows, 1)][:, block]
    proposal = kicked.propose(rows, unit, embedded, force=True)
    assert proposal is not None
    kicked.accept(proposal)
    kicked.strata[rows, j] = design.strata[np.roll(rows, 1), j]
    return kicked


def _moves(design: _Design, rng: np.random.Generator, budget: int) -> tuple[int, int]:
    """Moves of a point of the closest pair away from its neighbour, inside its strata, along each
    continuous factor (a random share of the room left in that direction). Returns moves kept, proposals."""
    space = design.space
    movable = [j for j, f in enumerate(space.varying) if f.kind == "float" and f.levels is None]
    if not movable or design.m < 2:
        return 0, 0
    columns = np.array([design.blocks[j][0] for j in movable])
    best, kept, idle, proposals = design.key(), 0, 0, 0
    while proposals < budget and idle < PATIENCE:
        proposals += 1
        idle += 1
        c, a = _critical(design, rng)
        away = design.points[c] - design.points[int(design.nn_at[c])]
        if c >= design.m:     # a mirrored copy: its column e is the base point's column mirror[e]
            base_away = np.empty_like(away)
            base_away[design.mirror] = away
            away = base_away
        row = design.unit[a].copy()
        for j, column in zip(movable, columns, strict=True):
            stratum = design.strata[a, j]
            low, high = design.layout.low[j][stratum], design.layout.high[j][stratum]
            room = (high - row[j]) if away[column] > 0 else (low - row[j]) if away[column] < 0 else 0
            if room:
                row[j] += room * int(rng.integers(1, 9)) // 8
        if (row == design.unit[a]).all():
            continue
        embedded = design.embedded[a].copy()
        embedded[columns] = row[movable]
        proposal = design.propose([a], row[None, :], embedded[None, :])
        if proposal is None or not _better(proposal.key(), best):
            continue
        design.accept(proposal)
        best, kept, idle = proposal.key(), kept + 1, 0
    return kept, proposals


def _relax(design: _Design, candidates: np.ndarray) -> int:
    """Replace each point still infeasible by the feasible candidate farthest from the design (with its
    copy: the nearer of the two counts). Lattice distances are exact in the KD-tree too."""
    if design.feasible is None or design.feasible.all():
        return 0
    space = design.space
    bad = np.flatnonzero(~design.feasible)
    cand_unit = np.rint(candidates * SCALE).astype(np.int64)
    embedded = space.embed(candidates)
    copies = embedded[:, design.mirror] if design.mirror is not None else None
    for a in bad.tolist():
        keep = np.ones(len(design.points), dtype=bool)
        keep[a] = False
        if design.mirror is not None:
            keep[a + design.m] = False
        tree = cKDTree(design.points[keep] * portable.LATTICE_STEP)
        nearest, _ = tree.query(embedded, k=1)
        if copies is not None:
            nearest = np.minimum(nearest, tree.query(copies, k=1)[0])
        choice = int(np.argmax(nearest))
        proposal = design.propose([a], cand_unit[choice][None, :], design.embed(cand_unit[choice][None, :]))
        if proposal is not None:
            design.accept(proposal)
    return len(bad)


def latin_design(space: Space, base: np.ndarray, candidates: np.ndarray, seed: int) -> LatinResult:
    """The wsp-lhs design from WSP's base points (unit, without mirrored copies) and its feasible candidates."""
    start = latinise(space, base, candidates)
    m = len(base)
    budget = min(EXCHANGES, 40 * m * max(space.dimension, 1))
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 50])))
    design, kept, proposals = _exchanges(start, rng, budget)
    best = (design.key(), design, kept)
    kicks = 0
    while proposals < KICK_BUDGET * budget and m > 3:   # iterated local search: kick the best, search again
        kicks += 1
        trial, more, used = _exchanges(_kick(best[1], rng), rng, budget, KICK_PATIENCE)
        proposals += used
        if _better(trial.key(), best[0]):
            best = (trial.key(), trial, best[2] + more)
    _, design, kept = best
    moved = 0
    for cycle in range(CYCLES):   # moves open room for more exchanges, and the other way round
        more, used = _moves(design, rng, min(MOVES, 20 * m * max(space.dimension, 1)))
        moved, proposals = moved + more, proposals + used
        if cycle + 1 < CYCLES:
            design, more, used = _exchanges(design, rng, budget)
            kept, proposals = kept + more, proposals + used
    relaxed = _relax(design, candidates)
    unit = design.unit * portable.LATTICE_STEP
    if space.mirror:
        pairs = np.empty((2 * m, unit.shape[1]))
        pairs[0::2], pairs[1::2] = unit, space.mirrored(unit)
        unit = pairs
    return LatinResult(unit=unit, exchanges=kept, moves=moved, proposals=proposals, relaxed=relaxed)
