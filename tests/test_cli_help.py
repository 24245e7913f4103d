"""Every command's --help prints every word its options and arguments document (Rich markup once swallowed
square-bracketed words: "Design file (TOML) with a  table."), and the root's plain help never cuts them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fecbench.cli import app


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):   # a group (Typer's own click)
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) or "fecbench" for p, _ in COMMANDS])
def test_help_prints_every_documented_word(path: tuple[str, ...], command: Any) -> None:
    out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert out.exit_code == 0, out.output
    shown = _squeezed(out.output)
    texts = [getattr(p, "help", None) for p in command.params] + [command.help]
    for text in texts:
        if text:
            first = text.split("\b")[0]
            assert _squeezed(first) in shown, f"{' '.join(path)}: {text!r} not printed whole"
