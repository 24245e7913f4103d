"""The share's confidence sequence since issue 67 (item 3): on each side a portfolio of Waudby-Smith & Ramdas's betting
strategy and Robbins' mixture (`fecbench/verdicts/sequential.py`): anytime coverage for Bernoulli and other [0, 1]
draws, the bound found on nested grids against a brute-force one, and fewer draws than the mixture alone where every
draw agrees. No root, seeded numpy; only counts and tolerances are compared."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fecbench.verdicts import sequential as sq

SEQUENCES, LENGTH, ALPHA = 1000, 200, 0.05
#: The Monte-Carlo allowance over the stated α is three binomial standard deviations of a miss rate α over the
#: sequences: √(0.05 · 0.95 / 1000) = 0.0069, so 0.0207 (0.0292 over 500), and a CS that truly covers fails a
#: check with probability < 0.2 %. (1000 sequences: 2000 took 65 s of make test and said no more.)
MEANS = (0.02, 0.3, 0.5, 0.9)


def _draws(kind: str, mean: float, rng: np.random.Generator) -> np.ndarray:
    """Indicators (1000 sequences), or values spread over [0, 1] with that mean (500: the slower half of the test)."""
    if kind == "bernoulli":
        return (rng.random((SEQUENCES, LENGTH)) < mean).astype(float)
    return rng.beta(4 * mean, 4 * (1 - mean), size=(SEQUENCES // 2, LENGTH))


@pytest.mark.parametrize("kind", ["bernoulli", "beta"])
def test_the_share_covers_its_mean_at_every_look(kind: str) -> None:
    """Seeded sequences of 200 draws at each mean: the share whose running interval ever misses the mean (its
    running intersection after the last draw does, or empties) stays within α plus the allowance, for indicators
    and for values spread over [0, 1]. The same sequences looked at after every draw through a fixed-sample 95 %
    interval (Wald's, the sample variance, from the tenth draw) miss far more often: the check can fail."""
    for mean in MEANS:
        rng = np.random.default_rng([67, MEANS.index(mean), kind == "beta"])
        draws = _draws(kind, mean, rng)
        missed = sum(not (low <= mean <= high) for low, high in (sq.share_interval(x, x, ALPHA) for x in draws))
        allowance = 3 * math.sqrt(ALPHA * (1 - ALPHA) / len(draws))
        assert missed / len(draws) <= ALPHA + allowance, (kind, mean, missed, len(draws))
        n = np.arange(1, LENGTH + 1)
        running_mean = np.cumsum(draws, axis=1) / n
        variance = np.cumsum(draws ** 2, axis=1) / n - running_mean ** 2
        half = 1.96 * np.sqrt(np.maximum(variance, 1e-12) / n)
        peeking = np.any((np.abs(running_mean - mean) > half) & (n >= 10), axis=1).mean()
        assert peeking > ALPHA + allowance, (kind, mean, peeking)


def test_a_censored_share_keeps_its_sides_apart() -> None:
    """Indicators known only between ``lo`` and ``hi`` (a third unknown at random, truth 0.3): the lower bound from the
    lower ones, the upper from the upper ones; 400 sequences stay covered, and an empty intersection says where."""
    rng = np.random.default_rng(67)
    missed = 0
    for _ in range(400):
        hits, unknown = rng.random(LENGTH) < 0.3, rng.random(LENGTH) < 1 / 3
        s = sq.share_censored(np.where(unknown, 0.0, hits), np.where(unknown, 1.0, hits), ALPHA)
        missed += bool(s.empty or not (s.low <= 0.3 <= s.high))
    assert missed / 400 <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 400), missed
    known = sq.share_censored(np.ones(40), np.ones(40), ALPHA)
    unknown = sq.share_censored(np.zeros(40), np.ones(40), ALPHA)
    assert known.low > 0.8 and unknown.low == 0.0 and unknown.high == 1.0


def test_the_nested_grids_find_the_bound_a_fine_grid_finds() -> None:
    """Against every prefix's capital on a grid of 20 001 points: the betting strategy's capital never rises with m,
    and the running maximum of the portfolio's lower bounds lies within a grid step of the nested grids' (never
    above it: the bound given is one the capital excludes)."""
    rng = np.random.default_rng(5)
    level = 0.05 / 42 / 2
    grid = np.linspace(0, 1, 20_001)
    for mean in (0.1, 0.6, 0.97):
        x = (rng.random(300) < mean).astype(float)
        bets, caps = sq.plug_in_bets(x, level), sq.truncations(x)
        assert np.all(np.diff(sq.log_capital(x, grid, bets, caps), axis=1) <= 1e-9)
        running_mean = np.cumsum(x) / np.arange(1, x.size + 1)
        excluded = (sq.side_capital(x, grid, bets, caps) >= math.log(1 / level)) & (grid <= running_mean[:, None])
        first = np.argmin(excluded, axis=1)             # the first m not excluded, per prefix
        fine = float(np.max(np.where(first > 0, grid[np.maximum(first - 1, 0)], 0.0)))
        found = sq.share_lower(x, level)
        assert fine - 1e-12 <= found <= fine + 1 / 20_000, (mean, fine, found)


def _first_holds(share_of, n_most: int = 200) -> int:
    """The fewest unanimous draws (all ones) whose interval puts the share above ½ (``> 0.5``, band ± 0.05)."""
    return next(n for n in range(1, n_most) if sq.decide(*share_of(np.ones(n)), ">", 0.5, 0.05) == "holds")


@pytest.mark.parametrize("claims", [42, 33, 32])
def test_unanimous_draws_decide_sooner_than_with_the_mixture_alone(claims: int) -> None:
    """thesis2018 (42 claims), networking2019 (33), rquic2021 (32): each side at α = 0.05 / claims / 2. With the mixture
    alone (the CS before issue 67) all-agreeing draws held "> 0.5" after 14; with the portfolio after fewer, and
    ``fewest_for_share`` (the allocator's need) says the same number."""
    alpha = sq.ALPHA / claims

    def now(x: np.ndarray) -> tuple[float, float]:
        s = sq.share_censored(x, x, alpha)
        return s.low, s.high

    # the mixture alone: its lower bound passes ½ once M_n(½) reaches 2/α (M falls on [0, k/n])
    before = next(n for n in range(1, 200) if sq.log_mixture(n, n, 0.5) >= math.log(2 / alpha))
    after = _first_holds(now)
    assert after < before, f"at α = 0.05/{claims}/2 a side: mixture alone {before} draws, the portfolio {after}"
    assert sq.fewest_for_share(">", 0.5, 0.05, alpha) == after, (before, after)
