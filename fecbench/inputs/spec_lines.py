"""Where a key is written in a TOML file, for messages that name file:line.

tomllib gives values, not positions, so the text is scanned: table headers (`[a.b]`, `[[a]]`, counted
per array), `key = value` lines (dotted keys too) and the keys of one-line inline tables. A key is
found at its own line, else at the line of its nearest written ancestor (a table header or the line
holding its inline table); None when not even its first part is written (e.g. a default).
"""

from __future__ import annotations

import re
from pathlib import Path

_ARRAY = re.compile(r"^\s*\[\[\s*([^\[\]]+?)\s*\]\]")
_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")
_INDEX = re.compile(r"^(.*)\[(\d+)\]$")


def _parts(dotted: str) -> list[str]:
    """'impl[1].args.fec' -> ['impl', '#1', 'args', 'fec'] (an array index as its own part)."""
    out: list[str] = []
    for part in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', dotted):
        part = part.strip().strip("\"'")
        match = _INDEX.match(part)
        if match:
            out += [match.group(1), f"#{match.group(2)}"]
        else:
            out.append(part)
    return out


def locate_text(text: str, dotted: str) -> int | None:
    """The 1-based line where `dotted` (or its nearest written ancestor) is, in a TOML text."""
    target = _parts(dotted)
    if not target:
        return None
    best: tuple[int, int] | None = None            # (matched parts, line)
    table: list[str] = []
    counts: dict[str, int] = {}

    def consider(path: list[str], line: int, rest_text: str = "") -> tuple[int, int] | None:
        n = 0
        while n < min(len(path), len(target)) and path[n] == target[n]:
            n += 1
        if n < len(path):
            return None                              # a sibling, not an ancestor
        # An inline table on this line may hold the next parts: `args = { fec = "x" }`.
        for part in target[n:]:
            if re.search(rf'(?<![\w-])"?{re.escape(part)}"?\s*=', rest_text):
                n += 1
            else:
                break
        return (n, line) if n else None

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0] if '"' not in raw and "'" not in raw else raw
        if (match := _ARRAY.match(line)) is not None:
            name = ".".join(_parts(match.group(1)))
            index = counts.get(name, 0)
            counts[name] = index + 1
            table = _parts(match.group(1)) + [f"#{index}"]
            found = consider(table, number)
        elif (match := _TABLE.match(line)) is not None:
            table = _parts(match.group(1))
            found = consider(table, number)
        elif (match := _KEY.match(line)) is not None:
            path = table + _parts(match.group(1))
            found = consider(path, number, line[match.end():])
        else:
            continue
        if found and (best is None or found[0] > best[0]):
            best = found
            if found[0] == len(target):
                break
    return best[1] if best else None


def locate(file: str | Path | None, dotted: str | None) -> int | None:
    """`locate_text` on a file; None when it cannot be read or the key is not written there."""
    if file is None or not dotted:
        return None
    try:
        text = Path(file).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return locate_text(text, dotted)
