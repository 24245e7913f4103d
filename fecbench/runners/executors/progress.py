"""How a campaign reports to whoever watches it: a ``Reporter`` (lines, and progress bars with the runs' status
counts, elapsed time and ETA). Domain code (runners/, verdicts/) speaks to this protocol only; the command line gives
it ``RichReporter`` (rich's console, whose markup such as ``[yellow]…[/]`` the lines may carry), tests and library
callers ``SilentReporter``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID


class Bar(Protocol):
    """One progress bar: ``update(description=…, completed=…, total=…, counts=…)``, any of them."""

    def update(self, **fields: object) -> None: ...


class Reporter(Protocol):
    """What a campaign says while it runs: ``say`` a line (or a table), ``bar`` a progress bar for ``total`` runs."""

    def say(self, message: object) -> None: ...

    def bar(self, description: str, total: int) -> AbstractContextManager[Bar]: ...


class RichReporter:
    """The command line's reporter: lines and bars on rich's console (a fresh one when none is given)."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console

        self.console = console or Console()

    def say(self, message: object) -> None:
        self.console.print(message)

    @contextmanager
    def bar(self, description: str, total: int) -> Iterator[Bar]:
        progress = progress_bar(self.console)
        with progress:
            task = progress.add_task(description, total=total, counts="")
            yield _RichBar(progress, task)


class _RichBar:
    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress, self.task = progress, task

    def update(self, **fields: object) -> None:
        self.progress.update(self.task, **fields)


class SilentReporter:
    """A reporter that says nothing (tests, library use)."""

    def say(self, message: object) -> None:
        pass

    @contextmanager
    def bar(self, description: str, total: int) -> Iterator[Bar]:
        yield self

    def update(self, **fields: object) -> None:
        pass


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
