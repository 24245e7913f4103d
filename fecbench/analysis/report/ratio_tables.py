"""The ratio and median tables as the report's page shows them: bounds as text (``≥ 2.1``, ``0.8–0.95``),
shares as percentages, sizes formatted."""

from __future__ import annotations

import math

import pandas as pd

from fecbench.analysis import stats


def share_text(low: float, high: float) -> str:
    """A share's bounds as a percentage (``83.3 %``, ``8.33–50 %``)."""
    text = stats.describe((100 * low, 100 * high), 3)
    return text if text == "–" else f"{text} %"


def headline_table(summary: pd.DataFrame) -> pd.DataFrame:
    """``ratios.summary`` as the report shows it: bounds as text (``≥ 2.1``, ``0.8–0.95``)."""
    from fecbench.analysis.figures import format_size

    rows = []
    for row in summary.itertuples(index=False):
        seeds = f"{row.seeds_min}" if row.seeds_min == row.seeds_max else f"{row.seeds_min}–{row.seeds_max}"
        rows.append({
            "label": row.label, "size": format_size(row.size),
            "points": f"{row.points}" + (f" (+{row.points_without_seeds} without a usable pair)"
                                         if row.points_without_seeds else ""),
            "seeds per point": seeds,
            "median ratio over points": stats.describe((row.median_ratio_low, row.median_ratio_high)),
            "points with ratio < 1": share_text(row.below_1_low, row.below_1_high),
            "points exact": row.exact, "label median timed out (≥)": row.at_least,
            "baseline median timed out (≤)": row.at_most, "both (undefined)": row.undefined,
            "pairs with a timeout": row.timed_out_pairs, "pairs excluded": row.excluded_pairs})
    return pd.DataFrame(rows)


def point_table(points: pd.DataFrame) -> pd.DataFrame:
    """``ratios.point_ratios`` as the report shows it, one row per point, size and label."""
    from fecbench.analysis.figures import format_size

    level = points.attrs.get("level", 0.95)
    return pd.DataFrame({
        "label": points["label"], "point": points["point"], "size": points["size"].map(format_size),
        "seeds": points["seeds"],
        "ratio of medians": [stats.describe((lo, hi)) for lo, hi in zip(points["ratio_low"], points["ratio_high"],
                                                                      strict=True)],
        f"{level:.0%} interval over its seeds": [
            f"none: too few seeds (an interval needs {points.attrs.get('min_seeds', '?')})"
            if math.isnan(lo) or math.isnan(hi) else f"[{lo:.3g}, {hi:.3g}]"
            for lo, hi in zip(points["ci_low"], points["ci_high"], strict=True)],
        "median per-run ratio": [stats.describe((lo, hi)) for lo, hi in zip(points["run_ratio_low"],
                                                                          points["run_ratio_high"], strict=True)],
        "finished": points["finished"], "timed out (label/baseline/both)": [
            f"{a}/{b}/{c}" for a, b, c in zip(points["label_timeouts"], points["baseline_timeouts"],
                                              points["both_timeouts"], strict=True)],
        "excluded": [f"{n} ({why})" if n else "0" for n, why in zip(points["excluded"], points["excluded_why"],
                                                                      strict=True)]})


def pivot_medians(table: pd.DataFrame) -> pd.DataFrame:
    from fecbench.analysis.figures import format_size

    table = table.assign(text=[stats.describe(b, 4) for b in zip(table["median_low"], table["median_high"],
                                                                   strict=True)])
    pivot = table.pivot(index="label", columns="size", values="text")
    pivot.columns = [format_size(c) for c in pivot.columns]
    return pivot
