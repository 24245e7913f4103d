"""Figures of what ran and whether the emulation matched the design: runs per status, measured
against configured RTT and rate, loss rate counted by the dropper against the loss model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from fecbench.analysis.figures.style import (
    STATUS_COLORS,
    empty,
    grid,
    styled,
)


@styled
def status_bars(frame: pd.DataFrame) -> Figure:
    """Runs per label, stacked by status (what ran, what failed)."""
    fig = Figure(figsize=(6.4, 0.5 + 0.45 * max(frame["label"].nunique(), 2)), layout="constrained")
    ax = fig.subplots()
    if frame.empty:
        return empty(fig, ax, "no runs in this database")
    table = pd.crosstab(frame["label"], frame["status"])
    statuses = [s for s in STATUS_COLORS if s in table.columns] + \
               [s for s in table.columns if s not in STATUS_COLORS]
    left = np.zeros(len(table))
    for status in statuses:
        values = table[status].to_numpy()
        ax.barh(table.index, values, left=left, color=STATUS_COLORS.get(status, "0.5"), label=status)
        left += values
    ax.invert_yaxis()
    ax.set_xlabel("runs")
    ax.legend(ncols=min(len(statuses), 4), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.grid(axis="y", visible=False)
    return fig


@styled
def exclusion_bars(lost: pd.DataFrame) -> Figure:
    """Per compared label (``report.evidence.exclusions``): the share of its pairs each side lost, side by side,
    with the number lost over the pairs on each bar; ★ where the shares differ (Fisher's exact test)."""
    fig = Figure(figsize=(6.4, 0.8 + 0.6 * max(len(lost), 2)), layout="constrained")
    ax = fig.subplots()
    if lost.empty:
        return empty(fig, ax, "no pairs")
    y = np.arange(len(lost))
    for offset, side, color in ((-0.2, "label", STATUS_COLORS.get("fidelity", "0.3")), (0.2, "baseline", "0.55")):
        shares = lost[f"{side} share"].to_numpy(float)
        ax.barh(y + offset, shares, height=0.38, color=color, label=f"{side} side")
        for yy, share, n, total in zip(y + offset, shares, lost[f"{side} excluded"], lost["pairs"], strict=True):
            ax.text(share, yy, f" {n} of {total}", va="center", fontsize=8)
    ax.set_yticks(y, [f"{'★ ' if differ else ''}{label} / {base}" for label, base, differ in
                      zip(lost["label"], lost["baseline"], lost["differ"], strict=True)])
    ax.invert_yaxis()
    ax.set_xlim(0, min(1.0, max(0.1, float(np.nanmax(lost[["label share", "baseline share"]].to_numpy())) * 1.35)))
    ax.set_xlabel("share of the pairs lost (run failed, flagged, unsupported, missing)")
    ax.legend(loc="lower right", frameon=False)
    return fig


def _identity_scatter(ax, configured: pd.Series, measured: pd.Series, ok: pd.Series | None,
                      xlabel: str, ylabel: str) -> None:
    values = pd.DataFrame({"configured": configured, "measured": measured,
                           "check": "no verdict" if ok is None else ok.map(
                               {True: "ok", False: "out of tolerance"}).fillna("no verdict")}).dropna(
        subset=["configured", "measured"])
    if values.empty:
        ax.text(0.5, 0.5, "no measurements", ha="center", va="center", transform=ax.transAxes)
        return
    sns.scatterplot(data=values, x="configured", y="measured", hue="check", ax=ax, s=22,
                    palette={"ok": "#4c9a2a", "out of tolerance": "#c0392b", "no verdict": "0.5"},
                    edgecolor="none", alpha=0.8)
    low = min(values["configured"].min(), values["measured"].min())
    high = max(values["configured"].max(), values["measured"].max())
    ax.plot([low, high], [low, high], color="0.2", linestyle="--", linewidth=1, label="measured = configured")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False)


@styled
def fidelity_scatter(fid: pd.DataFrame) -> Figure:
    """Measured against configured RTT and rate (a ``results.fidelity`` frame), identity line.

    One panel per quantity that has measurements (the rate is not measured on every backend).
    """
    panels = [(title, fid[f"{col}_configured_{unit}"], fid[f"{col}_measured_{unit}"], label)
              for title, col, unit, label in (("round-trip time", "rtt", "ms", "RTT (ms)"),
                                              ("bottleneck rate", "rate", "mbit", "rate (Mbit/s)"))
              if not fid.empty and (fid[f"{col}_configured_{unit}"].notna()
                                    & fid[f"{col}_measured_{unit}"].notna()).any()]
    fig, axes = grid(len(panels), 2, width=4.6, height=3.8)
    if not panels:
        return empty(fig, axes[0], "no fidelity measurements in this database")
    ok = fid["ok"].astype("object").where(fid["ok"].notna(), None) if "ok" in fid else None
    for ax, (title, configured, measured, label) in zip(axes, panels, strict=True):
        _identity_scatter(ax, configured, measured, ok, f"configured {label}", f"measured {label}")
        ax.set_title(title)
    return fig


@styled
def loss_fidelity(stats: pd.DataFrame) -> Figure:
    """Loss rate counted by the dropper against the model's long-run rate, per link direction: the model's own
    drops over the packets it judged (``tables.link_stats``: a link schedule's outage drops are their own cause,
    said in the title, never counted as the model's).

    Runs with the same model (same design point) are pooled, since one short run sees few packets;
    the grey bars show the model's ±2σ for the number of packets counted.
    """
    usable = stats[stats["loss_rate"].notna() & stats["expected_loss"].notna()]
    fig = Figure(figsize=(5.4, 4.2), layout="constrained")
    ax = fig.subplots()
    if usable.empty:
        return empty(fig, ax, "no dropper counters with a known loss model")
    pooled = (usable.assign(where=usable["link"] + " " + usable["direction"])
              .groupby(["where", "expected_loss"], as_index=False)[["model_dropped", "model_counted"]].sum()
              .rename(columns={"model_counted": "counted"}))
    pooled["observed"] = pooled["model_dropped"] / pooled["counted"]
    outages = int(usable["outage_dropped"].sum())
    sigma = np.sqrt(pooled["expected_loss"] * (1 - pooled["expected_loss"]) / pooled["counted"])
    ax.vlines(pooled["expected_loss"], (pooled["expected_loss"] - 2 * sigma).clip(lower=0),
              pooled["expected_loss"] + 2 * sigma, color="0.75", linewidth=3, zorder=1)
    sns.scatterplot(data=pooled, x="expected_loss", y="observed", hue="where", ax=ax, s=28, alpha=0.85,
                    edgecolor="none", zorder=2)
    high = max(pooled["expected_loss"].max(), pooled["observed"].max(), 0.01) * 1.08
    ax.plot([0, high], [0, high], color="0.2", linestyle="--", linewidth=1, zorder=0)
    ax.set_xlim(-0.02 * high, high)
    ax.set_ylim(-0.02 * high, high)
    ax.set_xlabel("loss rate of the model")
    ax.set_ylabel("loss rate counted by the dropper")
    ax.set_title("the model's drops / packets it judged, pooled per model"
                 + (f"\n({outages} outage drops of a link schedule left out: their own cause)" if outages else ""))
    ax.legend(frameon=False, fontsize=8)
    return fig




@styled
def run_accuracy(frame: pd.DataFrame, endpoint_bound_ms: float | None, lateness_bound_ms: float | None) -> Figure:
    """Per run: the endpoints' p99 wake-up latency against the delay elements' worst p99 lateness (the
    columns `results.load` adds), log axes, each bound a line: runs beyond a line were flagged."""
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    values = frame[["label", "endpoint_wakeup_p99_ms", "lateness_p99_ms"]].dropna(subset=["endpoint_wakeup_p99_ms"])
    if values.empty:
        return empty(fig, ax, "no endpoint timing recorded")
    floor = 1e-3  # a run without delay elements (netem) sits on the floor of the lateness axis
    values = values.assign(lateness_p99_ms=values["lateness_p99_ms"].fillna(floor).clip(lower=floor),
                           endpoint_wakeup_p99_ms=values["endpoint_wakeup_p99_ms"].clip(lower=floor))
    sns.scatterplot(data=values, x="endpoint_wakeup_p99_ms", y="lateness_p99_ms", hue="label", ax=ax, s=18,
                    edgecolor="none", alpha=0.75)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    if endpoint_bound_ms:
        ax.axvline(endpoint_bound_ms, color="#c0392b", linestyle="--", linewidth=1,
                   label=f"endpoint bound {endpoint_bound_ms:g} ms")
    if lateness_bound_ms:
        ax.axhline(lateness_bound_ms, color="#8e44ad", linestyle=":", linewidth=1,
                   label=f"lateness bound {lateness_bound_ms:g} ms")
    ax.set_xlabel("endpoints: p99 wake-up latency of the run (ms)")
    ax.set_ylabel("delay elements: worst p99 lateness of the run (ms)")
    ax.legend(frameon=False, fontsize="small")
    return fig
