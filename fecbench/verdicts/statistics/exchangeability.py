"""Whether a claim's draws stayed alike over time: an anytime test of exchangeability (``martingale``), which the
verdicts' audit runs on every claim judged on random draws (``evaluate.exchangeable``)."""

from __future__ import annotations

import numpy as np

#: The bets of the exchangeability martingale, both ways (new draws smaller or larger than the earlier ones).
EXCHANGE_BETS = (-0.6, -0.3, -0.15, 0.15, 0.3, 0.6)
#: Its bets that a draw ranks as the draws just before it did (a state of the machine that comes and goes): the
#: number of earlier draws each looks back at, and the stakes.
PERSIST_WINDOWS, PERSIST_BETS = (1, 10), (0.3, 0.6)


def martingale(values: np.ndarray, seed: int, groups: np.ndarray | None = None) -> tuple[float, int]:
    """An anytime test that draws in order are exchangeable (alike over time): a conformal test martingale (Vovk,
    Nouretdinov & Gammerman, ICML 2003). Each draw's conformal p-value, the share of the earlier draws *of its own
    group* (its cell) at or above it, itself included (ties broken at random, seeded), is uniform and independent of
    the earlier ones when each cell's draws are exchangeable, whatever order the cells were drawn in (a run of one
    cell's draws by chance is no change); a mixture of bets ``1 + λ (2p − 1)`` on them, over λ both ways, is then a
    nonnegative martingale of mean 1, so by Ville's inequality it ever reaches 1/α with probability ≤ α. A drift
    makes new draws rank low (or high) among their cell's earlier ones and the bets win. Half the capital bets instead
    that a draw ranks as the last w draws did, ``1 + λ (2p − 1) m``, m the mean of their 2p − 1 (known before the
    draw, |m| ≤ 1): a fair bet on independent uniform p-values too, won when draws close in time are alike (a machine
    whose state comes and goes), which the drift bets, each of one sign, miss. The martingale's largest value and the
    draw (1-based) where it was."""
    values = np.nan_to_num(np.asarray(values, float), nan=np.inf)
    if values.size == 0:
        return 1.0, 0
    groups = np.zeros(values.size, dtype=int) if groups is None else np.asarray(groups)
    rng = np.random.default_rng(seed)
    ties = rng.random(values.size)
    p = np.empty(values.size)
    seen: dict[object, list[float]] = {}
    for i, (value, group) in enumerate(zip(values.tolist(), groups.tolist(), strict=True)):
        past = seen.setdefault(group, [])
        past.append(value)
        mine = np.asarray(past)
        p[i] = (np.count_nonzero(mine > value) + ties[i] * np.count_nonzero(mine == value)) / len(mine)
    bets = np.asarray(EXCHANGE_BETS)[:, None]
    drift = np.cumprod(1 + bets * (2 * p[None, :] - 1), axis=1).mean(axis=0)
    centred = np.r_[0.0, 2 * p - 1]
    total = np.cumsum(centred)
    t = np.arange(values.size)
    persist = np.mean([np.cumprod(1 + stake * (2 * p - 1) * (total[t] - total[np.maximum(t - window, 0)])
                                  / np.maximum(np.minimum(t, window), 1))
                       for window in PERSIST_WINDOWS for stake in PERSIST_BETS], axis=0)
    wealth = (drift + persist) / 2
    at = int(np.argmax(wealth))
    return float(wealth[at]), at + 1
