"""Projection plot of a design (needs matplotlib, from the `analysis` extra): every factor's 1-D projection
(histogram and one tick per point, its largest gap) and every pair's 2-D projection (its smallest distance)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fecbench.inputs.errors import UserError
from fecbench.planner.plan import Plan
from fecbench.planner.projections import continuous
from fecbench.planner.wsp import min_distance


def pair_plot(plan: Plan, path: str | Path) -> Path:
    """Scatter every pair of varying factors (natural units, log axes for log factors), titled with the
    pair's smallest distance (unit coordinates, continuous factors); on the diagonal each factor's
    histogram, a tick per point and its largest gap. Mirrored copies of a multipath design are drawn
    in a lighter colour."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'fecbench[analysis]'") from None
    factors = plan.space.varying
    k = len(factors)
    if k == 0:
        raise UserError("--plot: the design has no varying factor to plot")
    frame = plan.points
    n = len(frame)
    unit = plan.unit if plan.unit is not None and plan.unit.shape == (n, k) else None
    units = plan.manifest.get("units", {})
    columns = {}
    for f in factors:
        if f.kind == "choice":
            index = {level: i for i, level in enumerate(f.levels)}
            columns[f.name] = np.array([index[v] for v in frame[f.name]], dtype=float)
        else:
            columns[f.name] = frame[f.name].to_numpy(dtype=float)
    original = np.ones(len(frame), dtype=bool)
    if plan.space.mirror and "augment" not in str(plan.manifest.get("method")):
        original[1::2] = False
    size = min(2.2 * k, 18)
    fig, axes = plt.subplots(k, k, figsize=(size, size), squeeze=False)
    for row, fy in enumerate(factors):
        for col, fx in enumerate(factors):
            ax = axes[row][col]
            x, y = columns[fx.name], columns[fy.name]
            if row == col:
                bins = min(20, max(5, len(x) // 5))
                if fx.kind == "choice":
                    ax.bar(range(len(fx.levels)), np.bincount(x.astype(int), minlength=len(fx.levels)))
                else:
                    times = plan.manifest.get("converted", {}).get(fx.name, {}).get("multiplier", 1.0)
                    low, high = fx.low * times, fx.high * times    # the range in the unit shown
                    edges = np.geomspace(low, high, bins + 1) if fx.scale == "log" and low > 0 else \
                        np.linspace(low, high, bins + 1)
                    ax.hist(x, bins=edges, color="tab:blue", alpha=0.6)
                    ax.plot(x, np.zeros_like(x), "|", color="black", markersize=8)   # the 1-D projection
                    gap = _gap(unit, col)
                    if gap is not None and continuous(fx, n):
                        ax.set_title(f"largest gap {gap:.1%}", fontsize=7)
            else:
                ax.scatter(x[~original], y[~original], s=6, color="tab:orange", alpha=0.6)
                ax.scatter(x[original], y[original], s=6, color="tab:blue")
                if unit is not None and row > col and continuous(fx, n) and continuous(fy, n):
                    ax.set_title(f"min distance {min_distance(unit[:, [col, row]]):.3f}", fontsize=7)
                if fy.scale == "log" and fy.kind != "choice":
                    ax.set_yscale("log")
            if fx.scale == "log" and fx.kind != "choice":
                ax.set_xscale("log")
            for f, axis in ((fx, ax.xaxis), (fy, ax.yaxis)):
                if f.kind == "choice" and (row != col or axis is ax.xaxis):
                    axis.set_ticks(range(len(f.levels)))
                    axis.set_ticklabels([str(level) for level in f.levels], fontsize=6)
            if row == k - 1:
                ax.set_xlabel(_label(fx.name, units.get(fx.name, fx.unit)), fontsize=8)
            if col == 0:
                ax.set_ylabel(_label(fy.name, units.get(fy.name, fy.unit)), fontsize=8)
            ax.tick_params(labelsize=6)
    metrics = plan.manifest.get("metrics", {})
    projections = metrics.get("projections") or {}
    fig.suptitle(f"{plan.manifest.get('method')} design, {len(frame)} points, seed {plan.manifest.get('seed')}: "
                 f"maximin {metrics.get('maximin')}, CD2 {metrics.get('cd2')}, worst gap "
                 f"{projections.get('worst_gap')}, worst 2-D {projections.get('worst_2d_maximin')}", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _label(name: str, unit: str) -> str:
    return f"{name} [{unit}]" if unit else name


def _gap(unit: np.ndarray | None, column: int) -> float | None:
    """Largest empty stretch of a factor's range (unit coordinates, ends included)."""
    if unit is None:
        return None
    return float(np.diff(np.concatenate([[0.0], np.sort(np.clip(unit[:, column], 0, 1)), [1.0]])).max())
