"""The WSP space-filling algorithm (Santiago, Claeys-Bruno, Sergent 2012), with exact point counts.

One pass with a distance d_min: start from the candidate nearest the centre; repeatedly remove every
candidate closer than d_min to the current point and move to the nearest survivor. The kept points
are pairwise at least d_min apart. The count is a noisy, non-monotone step function of d_min: a few
passes bracket and interpolate where its trend crosses the requested n, a scan around that crossing
looks for the largest d_min that still keeps n points (or a few more), and a design with points to
spare is trimmed by dropping one point of the closest pair until exactly n remain; the scanned
design with the largest minimum distance wins.

Each pass computes one distance vector per kept point over the live candidates: the same vector
gives both the points to remove and the nearest survivor. Memory is linear in the number of
candidates (no N x N matrix); removed candidates are compacted away once they are half the array.
Distances are accumulated column by column with plain numpy arithmetic (no BLAS). Candidates lie on
the planner's lattice, so every squared distance is exact (fecbench.planner.portable) also where
scipy's KD-tree sums them, and the d_min search uses fecbench's own log and exp: the same candidates
give the same design on every CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from fecbench.planner import portable

# Interpolation passes that locate the crossing, then the scan around it (relative d_min offsets).
INTERPOLATIONS = 4
SCAN_BELOW, SCAN_ABOVE, SCAN_STEPS = -0.01, 0.025, 14
# A pass that keeps more than n + slack points is stopped early: too many to trim cheaply.
TRIM_SLACK = 0.08
# Where removed candidates are moved (the unit cube and the embedded space are within [0, 1]).
FAR = 1e6
FAR_SQ = FAR * FAR / 4


@dataclass
class WspResult:
    indices: np.ndarray      # rows of the candidate array kept, in selection order
    d_min: float             # the distance used by the pass the design comes from
    passes: int              # WSP passes run by the search
    trimmed: int             # points dropped to reach exactly n


def wsp_pass(cols: np.ndarray, start: int, d_min: float, limit: int,
             mirror: np.ndarray | None = None, excluded: np.ndarray | None = None) -> list[int]:
    """One WSP pass over candidates given column-wise (shape (D, N)); returns kept indices.

    Stops after `limit` points. With `mirror` (a column permutation), keeping a point also keeps its
    mirrored copy: candidates near either are removed, and each kept point counts twice.
    `excluded` marks candidates that may not be chosen (e.g. too close to their own mirror).
    A removed candidate is moved far away (coordinates = FAR), so that no later distance test or
    nearest-survivor search can pick it, without a mask pass over all candidates at every step.
    """
    live = cols.copy()
    n_all = live.shape[1]
    index = np.arange(n_all)
    n_dead = 0
    if excluded is not None:
        live[:, excluded] = FAR
        n_dead = int(excluded.sum())
    dist, tmp = np.empty(n_all), np.empty(n_all)
    other = np.empty(n_all) if mirror is not None else None
    limit_sq = d_min * d_min
    kept: list[int] = []
    cur = start
    while True:
        kept.append(int(index[cur]))
        if len(kept) * (2 if mirror is not None else 1) >= limit:
            break
        m = live.shape[1]
        d, t = dist[:m], tmp[:m]
        centre = live[:, cur].copy()
        _squared_distances(live, centre, d, t)
        near = d <= limit_sq  # "<=": with d_min = 0 this still removes the current point
        if other is not None:
            _squared_distances(live, centre[mirror], other[:m], t)
            near |= other[:m] <= limit_sq
        removed = np.flatnonzero(near)
        live[:, removed] = FAR
        d[removed] = FAR_SQ
        n_dead += len(removed)
        cur = int(np.argmin(d))
        if d[cur] >= FAR_SQ:
            break  # no survivor left
        if n_dead * 2 > m:  # compact: drop removed candidates from the arrays
            alive = live[0] < FAR / 2
            cur = int(np.count_nonzero(alive[:cur]))
            live, index = live[:, alive], index[alive]
            n_dead = 0
    return kept


def _squared_distances(cols: np.ndarray, centre: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> None:
    np.subtract(cols[0], centre[0], out=out)
    np.multiply(out, out, out=out)
    for j in range(1, cols.shape[0]):
        np.subtract(cols[j], centre[j], out=tmp)
        np.multiply(tmp, tmp, out=tmp)
        np.add(out, tmp, out=out)


def with_mirrors(points: np.ndarray, mirror: np.ndarray | None) -> np.ndarray:
    """Points followed by their mirrored copies (point i's copy is row i + len(points))."""
    return points if mirror is None else np.vstack([points, points[:, mirror]])


def min_distance(points: np.ndarray) -> float:
    """Smallest pairwise Euclidean distance (KD-tree, linear memory); inf for fewer than 2 points."""
    if len(points) < 2:
        return float("inf")
    distances, _ = cKDTree(points).query(points, k=2)
    return float(distances[:, 1].min())


def trim(points: np.ndarray, n: int, mirror: np.ndarray | None = None) -> np.ndarray:
    """Positions of the rows kept after dropping, one at a time, a point of the closest pair.

    Of the two, the one whose next-nearest neighbour is closer goes (ties: the later one), so the
    minimum distance never decreases. With a mirror, a point and its copy go together.
    """
    keep = np.arange(len(points))
    per_point = 2 if mirror is not None else 1
    while len(keep) * per_point > n:
        full = with_mirrors(points[keep], mirror)
        distances, neighbours = cKDTree(full).query(full, k=min(3, len(full)))
        i = int(np.argmin(distances[:, 1]))
        j = int(neighbours[i, 1])
        second_i = distances[i, 2] if distances.shape[1] > 2 else 0.0
        second_j = distances[j, 2] if distances.shape[1] > 2 else 0.0
        drop = i if (second_i, i) < (second_j, j) else j
        keep = np.delete(keep, drop % len(keep))
    return keep


class _Search:
    """The WSP passes of one d_min search over the candidates, and how many points each keeps (a point
    with its mirrored copy counts twice)."""

    def __init__(self, embedded: np.ndarray, n: int, start_order: np.ndarray, perm: np.ndarray | None) -> None:
        self.cols = np.ascontiguousarray(embedded.T)
        self.self_gap = np.sqrt(np.square(embedded - embedded[:, perm]).sum(axis=1)) if perm is not None else None
        self.per_point = 2 if perm is not None else 1
        self.slack = max(2, int(np.ceil(n * TRIM_SLACK)))
        self.n, self.start_order, self.perm = n, start_order, perm
        self.passes = 0

    def run(self, d: float) -> list[int]:
        self.passes += 1
        excluded, start = None, int(self.start_order[0])
        if self.self_gap is not None:
            excluded = self.self_gap < d
            allowed = self.start_order[~excluded[self.start_order]]
            if len(allowed) == 0:
                return []
            start = int(allowed[0])
        return wsp_pass(self.cols, start, d, self.n + self.slack + self.per_point, self.perm, excluded)

    def count(self, kept: list[int]) -> int:
        return len(kept) * self.per_point


def wsp_design(embedded: np.ndarray, n: int, start_order: np.ndarray,
               mirror: list[int] | None = None) -> WspResult:
    """Select exactly n points (counting mirrored copies) from the candidates by WSP + d_min search.

    `start_order` lists candidates by distance to the centre: a pass starts from the first one
    allowed (with a mirror, a candidate closer than d_min to its own copy is not allowed).
    """
    perm = np.asarray(mirror) if mirror is not None else None
    search = _Search(embedded, n, start_order, perm)
    lo, hi = _bracket(search)
    options, lo, hi = _interpolate(search, lo, hi)
    # 3. The count is a noisy function of d_min: scan around the crossing for larger d_min values
    #    that still keep n points (or a few more, trimmed below).
    centre = lo[0] if search.count(lo[1]) == n or lo[0] <= 0 else float(np.sqrt(lo[0] * hi[0]))
    for step in np.linspace(SCAN_BELOW, SCAN_ABOVE, SCAN_STEPS):
        d = centre * (1.0 + step)
        if d > lo[0]:
            options.append((d, search.run(d)))
    _, d_min, rows, trimmed = _best(search, embedded, options)
    return WspResult(indices=rows, d_min=d_min, passes=search.passes, trimmed=trimmed)


def _bracket(search: _Search) -> tuple[tuple[float, list[int]], tuple[float, list[int]]]:
    """1. Bracket the crossing with geometric steps: lo keeps ≥ n points, hi keeps < n."""
    n, cols = search.n, search.cols
    diameter = float(np.sqrt(cols.shape[0]))
    d = diameter * 0.9 * portable.exp(portable.log(n) * (-1.0 / max(cols.shape[0], 1)))
    lo: tuple[float, list[int]] | None = None
    hi: tuple[float, list[int]] | None = None
    while lo is None or hi is None:
        kept = search.run(d)
        if search.count(kept) >= n:
            lo = (d, kept)
            d *= 1.25
        else:
            hi = (d, kept)
            d *= 0.8
        if d > 2 * diameter:
            hi = (d, [])
        elif d < 1e-9 and lo is None:
            kept = search.run(0.0)
            if search.count(kept) < n:
                raise ValueError(f"only {search.count(kept)} distinct candidate points: cannot place {n}")
            lo = (0.0, kept)
    return lo, hi


def _interpolate(search: _Search, lo: tuple[float, list[int]], hi: tuple[float, list[int]]) \
        -> tuple[list[tuple[float, list[int]]], tuple[float, list[int]], tuple[float, list[int]]]:
    """2. Locate the crossing of the count's trend (count ~ d^-D) by interpolation in log-log space; the
    passes that kept n points or more, and the bracket narrowed."""
    n, count = search.n, search.count
    options = [lo]
    for _ in range(INTERPOLATIONS):
        (d_lo, k_lo), (d_hi, k_hi) = lo, hi
        if d_lo <= 0 or not k_hi or count(k_lo) == n:
            break
        t = portable.log(count(k_lo) / n) / portable.log(count(k_lo) / count(k_hi))
        d = portable.exp(portable.log(d_lo) + min(max(t, 0.1), 0.9) * portable.log(d_hi / d_lo))
        kept = search.run(d)
        if count(kept) >= n:
            lo = (d, kept)
            options.append(lo)
        else:
            hi = (d, kept)
    return options, lo, hi


def _best(search: _Search, embedded: np.ndarray, options: list[tuple[float, list[int]]]) \
        -> tuple[float, float, np.ndarray, int]:
    """The design with the largest minimum distance among the passes keeping n to n + slack points, each
    trimmed to n: (its minimum distance, its pass's d_min, its rows, the points trimmed)."""
    n, perm, count = search.n, search.perm, search.count
    best: tuple[float, float, np.ndarray, int] | None = None
    for d, kept in options:
        if not n <= count(kept) <= n + search.slack:
            continue
        rows = np.asarray(kept)
        keep = trim(embedded[rows], n, perm)
        score = min_distance(with_mirrors(embedded[rows[keep]], perm))
        if best is None or score > best[0]:
            best = (score, d, rows[keep], len(rows) - len(keep))
    if best is None:  # every pass overshot the slack: trim the largest-d design that has enough points
        d, kept = max((o for o in options if count(o[1]) >= n), key=lambda o: o[0])
        rows = np.asarray(kept)
        keep = trim(embedded[rows], n, perm)
        best = (0.0, d, rows[keep], len(rows) - len(keep))
    return best
