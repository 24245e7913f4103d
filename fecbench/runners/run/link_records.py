"""What a run's links recorded: each dropper's and delay element's statistics flattened to the link_stats
rows, a link schedule's outage drops added to them, and the droppers' verdict logs; `LossLinks`, the
campaign's lossy links and the dropper stream each direction gets."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fecbench.records import db as dbmod
from fecbench.runners.experiment.runs import Run
from fecbench.runners.run.outcome import Outcome
from fecbench.runners.run.testbed import Testbed

if TYPE_CHECKING:
    from fecbench.dropper import LossModel
    from fecbench.runners.experiment.design import LossSpec

@dataclass(frozen=True)
class LossLinks:
    """The campaign's lossy links (the design's `links`, else the topology's), the 1-based path each is on,
    and its loss section."""
    loss: LossSpec
    links: list[str]
    paths: dict[str, int | None]

    def streams(self) -> list[tuple[str, str, int]]:
        """(link, direction, stream): each direction of each link its own dropper stream, so the patterns of
        links are independent but all fixed by the run's loss seed."""
        return [(link, direction, 2 * i + (0 if direction == "forward" else 1))
                for i, link in enumerate(self.links) for direction in self.loss.directions]

    def model_at(self, values: dict[str, Any], link: str) -> LossModel:
        return self.loss.model_at(values, self.paths[link])


# link_stats column -> the dropper's counter name.
_DROPPER_NAMES = {"ge_good": "good", "ge_bad": "bad", "gso_seen": "gso"}


def link_stats(testbed: Testbed, losses: LossLinks, run: Run) -> list[dict[str, Any]]:
    """The network's per link and direction statistics, flattened to the link_stats columns."""
    rows = []
    streams = {(link, direction): stream for link, direction, stream in losses.streams()}
    for stat in testbed.link_stats():
        key = (stat.get("link"), stat.get("direction"))
        dropper = stat.get("dropper") or {}
        row: dict[str, Any] = {"link": stat.get("link"), "direction": stat.get("direction")}
        for column in dbmod.LINK_STAT_COLUMNS:
            value = dropper.get(_DROPPER_NAMES.get(column, column), dropper.get(column))
            row[column] = int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if key in streams:
            # "path": the 1-based client-server path the link is on (per-path traffic analyses).
            row["model"] = {"model": losses.loss.model,
                            "params": losses.loss.values(run.values, losses.paths[key[0]]),
                            "seed": run.loss_seed, "stream": streams[key], "path": losses.paths[key[0]],
                            "dropper": dropper}
        elif dropper:
            row["model"] = {"model": "none", "dropper": dropper}
        row["delay"] = {k: v for k, v in stat.items() if k not in ("link", "direction", "dropper")}
        rows.append(row)
    return rows


def count_outage_drops(losses: LossLinks, run: Run, outcome: Outcome) -> None:
    """Packets a link schedule's outages dropped, in each dropper's link_stats row as the model's drops
    are (`dropped` both, `outage_dropped` the outages'): from the verdict log when kept (exact), else
    from the outages' index ranges and the seeded model."""
    from fecbench.dropper.live import drops_with_outages
    from fecbench.emulation.schedule_apply import outage_ranges

    matched = {(r["link"], r["direction"]): r["matched"] or 0 for r in outcome.link_stats}
    ranges = outage_ranges(outcome.link_events, matched)
    logged = {(link, d): int(np.load(io.BytesIO(data))["verdict"].sum()) for link, d, data in outcome.verdict_logs}
    streams = {(link, direction): stream for link, direction, stream in losses.streams()}
    for row in outcome.link_stats:
        key = (row["link"], row["direction"])
        if key not in ranges or key not in streams or row.get("dropped") is None:
            continue
        total = logged.get(key)
        if total is None:
            model = losses.model_at(run.values, key[0])
            total = drops_with_outages(model, run.loss_seed, streams[key], matched[key], ranges[key])
        row["outage_dropped"], row["dropped"] = total - row["dropped"], total
        row["model"] = {**(row.get("model") or {}), "outages": ranges[key]}


def verdict_logs(testbed: Testbed, losses: LossLinks) -> list[tuple[str, str, bytes]]:
    """Each dropper's verdict log of this run (index, verdict, state, len), as .npy bytes."""
    import io

    import numpy as np

    logs = []
    for link, direction, _stream in losses.streams():
        log = testbed.verdict_log(link, direction)
        if log is None:
            continue
        buffer = io.BytesIO()
        np.save(buffer, log, allow_pickle=False)
        logs.append((link, direction, buffer.getvalue()))
    return logs
