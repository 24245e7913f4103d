"""The report's sections on what ran and why packets went missing: the settings every run got as
recorded with it (``fecbench.analysis.applied``) and losses by cause per label (``analysis.traces.losses``)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd

from fecbench.analysis import applied
from fecbench.analysis.traces import losses


def settings_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path) -> None:
    """What the network and the endpoints applied (per point and per label), as recorded with each run."""
    link_table, loss_table, impl_table = applied.links(db), applied.losses(db), applied.implementations(db)
    if not link_table.empty:
        tables["applied: links"] = link_table
        notes["applied: links"] = ("What each point's runs got from the network, in the units it applies (a "
                                   "factor written in another unit was converted): rate (empty: unlimited), one-way "
                                   "delay and queue per link and direction; recorded with every run.")
    if not loss_table.empty:
        tables["applied: losses"] = loss_table
        notes["applied: losses"] = "Each point's loss model per lossy link, with its long-run loss and mean burst."
    if not impl_table.empty:
        tables["applied: implementations"] = impl_table
        notes["applied: implementations"] = "Each label's implementation, arguments and argv (its first run's)."


def losses_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path, frame: pd.DataFrame) -> None:
    """Per label and size, the medians of each run's drops by cause and the sender's declared losses."""
    table = losses.run_losses(db)
    if table.empty or table["declared_lost"].isna().all():
        return
    joined = table.merge(frame[["key", "label", "size", "status"]], left_on="run_key", right_on="key")
    joined = joined[joined["status"] == "ok"]
    if joined.empty:
        return
    columns = ["dropper_forward", "dropper_reverse", "queue_forward", "queue_reverse", "outage_forward",
               "outage_reverse", "declared_lost", "spurious", "recovered", "data_drops", "rebuilt", "undeclared",
               "unexplained"]
    summary = joined.groupby(["label", "size"], dropna=False)[columns].median(numeric_only=True).reset_index()
    tables["losses by cause (medians)"] = summary
    from fecbench.analysis.baselines import recorded_impls

    missing = {label: impl["unavailable"] for label, impl in recorded_impls(db).items() if impl.get("unavailable")
               and label in set(summary["label"])}
    notes["losses by cause (medians)"] = (
        "Per run (ok runs; medians per label and size): packets the loss model dropped, a schedule's outages, "
        "the bottleneck's queue (forward: client → server), the data sender's declared and spurious losses, "
        "FEC's recoveries, and the drops in the data's direction reconciled with what the sender declared: "
        "data_drops = (declared − spurious) + rebuilt (drops FEC rebuilt before they were declared) + undeclared "
        "(other drops never declared: lost repairs, ACK-only packets) − unexplained (declared losses no drop "
        "explains, ≥ 0). fecbench explain DB RUN shows one run's losses on its timeline."
        + "".join(f" {label}: its implementation reports no {', '.join(names)} (its descriptor's [metrics] "
                  "unavailable): those cells are empty, not zero." for label, names in sorted(missing.items())))


#: Timelines the report draws at most (each takes a few seconds).
TIMELINES = 8
#: Tables whose cells hold links (written here, escaped where they hold text from elsewhere).
LINK_TABLES = ("timelines of representative runs",)


def timelines_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path, outdir: Path,
                      step: Any = None) -> None:
    """Each label's median and worst run that kept its qlog (``explain.representatives``): their timelines
    (``fecbench explain``) beside the report, listed with links."""
    from fecbench.analysis.traces import explain
    from fecbench.inputs.errors import UserError

    rows = []
    for rep in explain.representatives(db)[:TIMELINES]:
        if step is not None:
            step(f"timeline {rep['label']} {rep['which']}")
        try:
            written = explain.explain(db, rep["key"], outdir / "timelines")
        except UserError as exc:   # a run whose qlog cannot be drawn: said in the table, not fatal
            rows.append({**rep, "timeline": html.escape(f"not drawn: {exc}")})
            continue
        link = html.escape(str(written.figure.relative_to(outdir)))
        rows.append({**rep, "timeline": f'<a href="{link}">{html.escape(written.figure.name)}</a>'})
    if rows:
        name = "timelines of representative runs"
        tables[name] = pd.DataFrame(rows)[["label", "which", "status", "dct_ms", "key", "timeline"]]
        notes[name] = ("Each label's median run (by DCT) and its worst (a run not ok first, else the slowest) among "
                       "those that kept their qlog: window, bytes in flight, RTT, sending rate, drops, losses, repairs "
                       "and recoveries over time (fecbench explain DB KEY --pair draws one beside its twin).")
