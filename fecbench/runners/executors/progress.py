"""The campaign's progress display: a rich progress bar with the runs' status counts, elapsed time and ETA."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def progress_bar(console: Console) -> Progress:
    """The campaign's rich progress bar: description, bar, done/total, status counts, elapsed, ETA."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console, transient=False)


def counts_text(counts: Counter) -> str:
    colours = {"ok": "green", "failed": "red", "timeout": "yellow", "unsupported": "blue",
               "fidelity": "magenta", "interrupted": "red"}
    return " ".join(f"[{colours.get(k, 'white')}]{k} {v}[/]" for k, v in sorted(counts.items()) if v)
