"""Loading and validating TOML specs (topologies, designs, implementation descriptors).

Every component reads its spec through `Section`, which remembers which keys were read so that
`done()` can reject unknown keys by name; all problems raise `SpecError` (exit status 2).
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Ubuntu 22.04's Python 3.10
    import tomli as tomllib

from fecbench.inputs.errors import SpecError, did_you_mean

#: A design's time limit per run when it sets none (the design parser's default, and what readers of
#: campaigns recorded before their settings were assume).
DEFAULT_TIMEOUT_S = 60.0

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|kB|KB|KiB|MB|MiB|GB|GiB)?\s*$")
_UNITS = {None: 1, "B": 1, "kB": 1000, "KB": 1000, "KiB": 1024, "MB": 10**6, "MiB": 2**20, "GB": 10**9,
          "GiB": 2**30}

_REQUIRED = object()
_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
               list: "a list", dict: "a table"}


def load_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; a missing file or a syntax error becomes a SpecError naming the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(path, None, "file not found") from None
    except OSError as exc:
        raise SpecError(path, None, f"cannot read: {exc.strerror}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(path, None, f"invalid TOML: {exc}") from None


def parse_size(value: Any, file: Path, key: str) -> int:
    """'50kB' -> 50000 bytes (decimal units as in the papers; KiB/MiB for binary)."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (m := _SIZE.match(value)):
        size = int(round(float(m.group(1)) * _UNITS[m.group(2)]))
    else:
        raise SpecError(file, key, f"bad size {value!r}", "bytes as an integer, or e.g. '1kB', '1.5MB', '64KiB'")
    if size <= 0:
        raise SpecError(file, key, f"size must be > 0, got {value!r}")
    return size



def spec_hash(text: str) -> str:
    """Content hash used to identify specs in manifests and databases."""
    return hashlib.sha256(text.encode()).hexdigest()


def _type_ok(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False  # TOML true/false is not a number
    if float in kinds and isinstance(value, int):
        return True
    return isinstance(value, kinds)


class Section:
    """A view on one TOML table that knows its file and dotted key path for error messages."""

    def __init__(self, data: dict[str, Any], file: str | Path | None, path: str = "") -> None:
        if not isinstance(data, dict):
            raise SpecError(file, path or None, "must be a table")
        self.data, self.file, self.path = data, file, path
        self._read: set[str] = set()

    @classmethod
    def load(cls, path: str | Path) -> Section:
        return cls(load_toml(path), path)

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str | None, problem: str, allowed: Any = None) -> SpecError:
        return SpecError(self.file, self.key(name) if name else (self.path or None), problem, allowed)

    def __contains__(self, name: str) -> bool:
        return name in self.data

    def get(self, name: str, kind: type | tuple[type, ...] = object, default: Any = _REQUIRED, *,
            choices: Any = None, min: float | None = None, max: float | None = None,
            min_exclusive: bool = False) -> Any:
        """Read one key, checking its type, its allowed values and its range."""
        self._read.add(name)
        if name not in self.data:
            if default is _REQUIRED:
                raise self.error(name, "missing required key", choices)
            return default
        value = self.data[name]
        if kind is not object and not _type_ok(value, kind):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            wanted = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise self.error(name, f"must be {wanted}, got {value!r}")
        if choices is not None and value not in choices:
            raise self.error(name, f"unknown value {value!r}{did_you_mean(value, choices)}", choices)
        if min is not None and (value < min or (min_exclusive and value == min)):
            raise self.error(name, f"must be {'>' if min_exclusive else '≥'} {min}, got {value!r}")
        if max is not None and value > max:
            raise self.error(name, f"must be ≤ {max}, got {value!r}")
        return value

    def section(self, name: str, required: bool = False) -> Section:
        """A sub-table; an absent optional one reads as empty."""
        self._read.add(name)
        if name not in self.data:
            if required:
                raise self.error(name, "missing required table")
            return Section({}, self.file, self.key(name))
        return Section(self.data[name], self.file, self.key(name))

    def sections(self, name: str, required: bool = False) -> list[Section]:
        """An array of tables ([[name]] in TOML)."""
        self._read.add(name)
        items = self.data.get(name)
        if items is None:
            if required:
                raise self.error(name, "missing required array of tables")
            return []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise self.error(name, "must be an array of tables ([[...]])")
        return [Section(item, self.file, f"{self.key(name)}[{i}]") for i, item in enumerate(items)]

    def done(self) -> None:
        """Reject keys nobody read, naming the allowed ones."""
        unknown = sorted(set(self.data) - self._read)
        if unknown:
            known, name = sorted(self._read), unknown[0]
            raise self.error(name, f"unknown key {name!r}: nothing reads it{did_you_mean(name, known)}", known)
