"""The report's sections on what ran and why packets went missing: the settings every run got as
recorded with it (``fecbench.analysis.applied``) and losses by cause per label (``analysis.losses``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fecbench.analysis import applied, losses


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
               "outage_reverse", "declared_lost", "spurious", "recovered", "unexplained"]
    summary = joined.groupby(["label", "size"], dropna=False)[columns].median(numeric_only=True).reset_index()
    tables["losses by cause (medians)"] = summary
    notes["losses by cause (medians)"] = (
        "Per run (ok runs; medians per label and size): packets the loss model dropped, a schedule's outages, "
        "the bottleneck's queue (forward: client → server), the data sender's declared and spurious losses, "
        "FEC's recoveries, and what no drop explains (declared − drops in the data's direction − spurious: "
        "below 0, drops never declared). fecbench explain DB RUN shows one run's losses on its timeline.")
