"""Pair plot of a design (needs matplotlib, from the `analysis` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fecbench.errors import UserError
from fecbench.planner.plan import Plan


def pair_plot(plan: Plan, path: str | Path) -> Path:
    """Scatter every pair of varying factors (natural units, log axes for log factors); histograms
    on the diagonal. Mirrored copies of a multipath design are drawn in a lighter colour."""
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
                elif fx.scale == "log":
                    ax.hist(x, bins=np.geomspace(fx.low, fx.high, bins + 1), color="tab:blue")
                else:
                    ax.hist(x, bins=np.linspace(fx.low, fx.high, bins + 1), color="tab:blue")
            else:
                ax.scatter(x[~original], y[~original], s=6, color="tab:orange", alpha=0.6)
                ax.scatter(x[original], y[original], s=6, color="tab:blue")
                if fy.scale == "log" and fy.kind != "choice":
                    ax.set_yscale("log")
            if fx.scale == "log" and fx.kind != "choice":
                ax.set_xscale("log")
            for f, axis in ((fx, ax.xaxis), (fy, ax.yaxis)):
                if f.kind == "choice" and (row != col or axis is ax.xaxis):
                    axis.set_ticks(range(len(f.levels)))
                    axis.set_ticklabels([str(level) for level in f.levels], fontsize=6)
            if row == k - 1:
                ax.set_xlabel(f"{fx.name} [{fx.unit}]" if fx.unit else fx.name, fontsize=8)
            if col == 0:
                ax.set_ylabel(f"{fy.name} [{fy.unit}]" if fy.unit else fy.name, fontsize=8)
            ax.tick_params(labelsize=6)
    metrics = plan.manifest.get("metrics", {})
    fig.suptitle(f"{plan.manifest.get('method')} design, {len(frame)} points, seed {plan.manifest.get('seed')}, "
                 f"maximin {metrics.get('maximin')}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
