"""Claims about the same cells share their draws (issue 67 item 2): one stream of cells per design, each claim keeping
its own (``fecbench.verdicts.draws``), so claims on one population draw the same runs, a claim on a subset reads
its draws out of the other's, and each claim's draws stay uniform over its own cells."""

from __future__ import annotations

from collections import Counter

import numpy as np
from scipy.stats import chisquare

from fecbench.verdicts import draws as dr
from fecbench.verdicts.pack import Claim, Source


def _space() -> dr.DrawSpace:
    # 12 points (p = 1 % … 4 %, three bandwidths), three sizes: 36 cells
    points = {i: {"p": 0.01 * (1 + i % 4), "bw": float(1 + i // 4)} for i in range(12)}
    return dr.DrawSpace(points=points, sizes=(1000, 10_000, 50_000), seed=67, repetitions=10)


def _claim(cid: str, statistic: str = "share_pairs_below", **where) -> Claim:
    params = {"min_seeds": 3, "loss_direction": "any"}
    if statistic == "trend":
        params["factor"] = "p"
    return Claim(id=cid, text="t", design="d", statistic=statistic, label="fec", baseline="quic", metric="dct_ms",
                 where=where, compare="<", threshold=0.5, tolerance=0.0, source=Source("x", "s", "", "q"),
                 params=params)


def _units(draws: list[dr.Draw]) -> list[tuple]:
    return [(u.mine, u.base) for d in draws for u in d.units]


def test_claims_on_the_same_cells_draw_the_same_runs() -> None:
    space = _space()
    below = dr.draws(_claim("wifi-5pct-below-50pct", size=[50_000], p=[0.02]), space)
    below40 = dr.draws(_claim("wifi-5pct-below-40pct", size=[50_000], p=[0.02]), space)
    median = dr.draws(_claim("wifi-5pct-median", "median_pair_ratio", size=[50_000], p=[0.02]), space)
    assert len(below) > 30 and _units(below) == _units(below40) == _units(median)


def test_a_claim_on_a_subset_of_cells_reads_its_draws_out_of_the_larger_claims() -> None:
    space = _space()
    wide = dr.draws(_claim("all-1kB", size=[1000]), space)
    narrow = dr.draws(_claim("lossy-1kB", size=[1000], p=[0.03, 0.04]), space)
    cells = {(3 + 4 * k) for k in range(3)} | {(2 + 4 * k) for k in range(3)}
    assert {d.units[0].mine[0] for d in narrow} == cells
    # The narrow claim's draws are the wide claim's draws of its cells, in the wide claim's order, seed for seed:
    # every run the wide claim's first n draws buy serves the narrow claim's draws among them.
    inside = [d for d in wide if d.units[0].mine[0] in cells]
    assert _units(narrow[:200]) == _units(inside[:200])
    # A block statistic on the same cells draws the same cells in the same order (3 seeds a draw, not 1).
    blocks = dr.draws(_claim("lossy-1kB-blocks", "median_block_ratio", size=[1000], p=[0.03, 0.04]), space)
    assert [d.units[0].mine[0] for d in blocks[:50]] == [d.units[0].mine[0] for d in narrow[:50]]


def test_each_claims_draws_are_uniform_over_its_own_cells() -> None:
    """Rejection from the design's stream keeps the draws uniform over the claim's cells: a chi-square test of the
    first draws' cells (well inside any level; a claim that took the design's cells in proportion to another
    claim's would fail it)."""
    space = _space()
    for where in ({"size": [1000]}, {"size": [1000], "p": [0.03, 0.04]}, {"size": [10_000, 50_000], "p": [0.01]}):
        claim_draws = dr.draws(_claim("c", **where), space)[:600]
        counts = Counter((d.units[0].mine[0], d.units[0].mine[2]) for d in claim_draws)
        cells = dr.claim_cells(_claim("c", **where), space)
        assert len(counts) == len(cells)
        assert chisquare([counts[(a, s)] for a, _, s in cells]).pvalue > 0.001, (where, counts)
        seeds = Counter(d.units[0].mine for d in claim_draws)
        assert max(seeds.values()) == 1     # each draw a cell's next seed: fresh seeds


def test_a_trends_pairs_and_a_census_order_come_from_the_same_stream() -> None:
    space = _space()
    trend = dr.draws(_claim("trend-p", "trend", size=[1000]), space)
    factor = {p: v["p"] for p, v in space.points.items()}
    for draw in trend:   # two cells of one size whose factor differs, a block of seeds each
        first, second = ([u.mine for u in draw.units if u.cell == c] for c in (0, 1))
        assert len({m[0] for m in first}) == len({m[0] for m in second}) == 1 and first[0][2] == second[0][2]
        assert factor[first[0][0]] != factor[second[0][0]]
    firsts = Counter(d.units[0].mine[0] for d in trend[:600])
    assert chisquare([firsts[p] for p in range(12)]).pvalue > 0.001
    one = dr.draws(_claim("median-a", "median_point_ratio", size=[1000]), space)
    two = dr.draws(_claim("median-b", "median_point_ratio", size=[1000]), space)
    sub = dr.draws(_claim("median-c", "median_point_ratio", size=[1000], p=[0.01]), space)
    order = [d.group for d in one[:12]]
    assert order == [d.group for d in two[:12]] and sorted(order) == sorted({d.group for d in one})
    assert [d.group for d in sub[:3]] == [g for g in order if g in {d.group for d in sub}]
    assert np.all(np.diff([d.units[0].mine[1] for d in one[:24]][::12]) == 3)   # the next round's block of seeds


def test_a_claim_over_several_sizes_never_reads_one_repetition_at_two_sizes() -> None:
    """Runs of one point and repetition meet the same losses whatever their size (the loss seed is the point's and
    the repetition's): a claim pooling sizes takes each size's seeds from its own lane, so its draws are independent
    (issue 69, item 6); a claim of one size takes the repetitions in order, as before."""
    space = _space()
    pooled = dr.draws(_claim("every-size"), space)
    seen: dict[tuple[int, int], set] = {}
    for draw in pooled:
        for unit in draw.units:
            point, rep, size, _ = unit.mine
            seen.setdefault((point, rep), set()).add(size)
    assert len(pooled) > 100 and all(len(sizes) == 1 for sizes in seen.values())
    assert {rep % 3 for (_, rep), sizes in seen.items() if sizes == {10_000}} == {1}
    census = dr.draws(_claim("every-point", "median_point_ratio"), space)
    assert all(unit.mine[1] % 3 == space.sizes.index(unit.mine[2]) for d in census for unit in d.units)
    one = dr.draws(_claim("one-size", size=[10_000]), space)
    by_cell: dict[int, list[int]] = {}
    for draw in one:
        by_cell.setdefault(draw.units[0].mine[0], []).append(draw.units[0].mine[1])
    assert all(reps == list(range(len(reps))) for reps in by_cell.values())
