"""One builder for the design files tests write: `design_text` gives a design's TOML from the few fields
tests vary, in the order and layout of designs/*.toml ([design], [space] and [space.factors], [loss],
[workload], then each [[impl]]); `design_file` writes it. Values are Python values (a str is a TOML string, a
Path too, a tuple (low, high) a factor's range, a dict an inline table); a section given as a str is TOML
lines written as they are (a test that edits the text, or writes what the builder does not)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from fecbench.host.paths import REPO_ROOT

SINGLE = REPO_ROOT / "topologies" / "single.toml"
MULTIPATH = REPO_ROOT / "topologies" / "multipath.toml"
FAKE_DIR = REPO_ROOT / "tests" / "fake_impl"

#: A [workload] of one 1 kB download: what most campaign tests run.
DOWNLOAD_1KB = {"kind": "download", "sizes": ["1kB"]}
#: bw, owd and p over small ranges: the factors of the fake implementation's designs.
BW_OWD_P = {"bw": (5, 20), "owd": (2, 5), "p": (0.01, 0.05)}
UNIFORM_P = {"model": "uniform", "p": "p"}
NO_LOSS = {"model": "none"}
#: fecq without FEC and with Reed-Solomon (30, 20): the pair the campaign tests compare.
QUIC_AND_RS = [("fecq", "quic", {"fec": "none"}), ("fecq", "quic-fec-rs", {"fec": "rs:30,20"})]

Impl = str | tuple[str, str] | tuple[str, str | None, dict[str, Any] | str | None]


def toml_value(value: Any) -> str:
    """A Python value as a TOML value: strings (and paths) quoted, booleans lowercase, a tuple (low, high)
    as the inline table `{ low = …, high = … }`, a dict as an inline table, a list as an array."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, tuple):
        low, high = value
        return toml_value({"low": low, "high": high})
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value)


def per_path(low: float, high: float, **more: Any) -> dict[str, Any]:
    """A factor's range, one factor per path (`{ low = …, high = …, per_path = true }`)."""
    return {"low": low, "high": high, **more, "per_path": True}


def _lines(body: dict[str, Any] | str) -> list[str]:
    """A section's lines: `key = value` for each item of a dict, or TOML text as written."""
    if isinstance(body, str):
        text = textwrap.dedent(body).strip("\n")
        return text.splitlines() if text else []
    return [f"{key} = {toml_value(value)}" for key, value in body.items()]


def _impl(entry: Impl) -> list[str]:
    """An [[impl]] table: a name, or (name, label), or (name, label or None, args: a dict or the inside of
    an inline table)."""
    name, label, args = (entry, None, None) if isinstance(entry, str) else (*entry, None)[:3]
    lines = ["[[impl]]", f"name = {toml_value(name)}"] + ([f"label = {toml_value(label)}"] if label else [])
    if isinstance(args, str):
        lines.append(f"args = {{ {args} }}")
    elif args is not None:
        lines.append(f"args = {toml_value(args)}")
    return lines


def _given(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def design_text(name: str, *, seed: int, topology: Path | str = SINGLE, repetitions: int | None = 1,
                timeout_s: float | None = None, settings: dict[str, Any] | str = "", method: str | None = "wsp",
                points: int | None = None, file: str | None = None, factors: dict[str, Any] | str = "",
                loss: dict[str, Any] | str = NO_LOSS, workload: dict[str, Any] | str = DOWNLOAD_1KB,
                impls: list[Impl] | str = (), tail: str = "") -> str:
    """A design's TOML. [design]: name, topology, repetitions, seed, timeout_s (None: not written), then
    `settings` (fidelity, verdict_log, impl_dirs, …); [space]: `method` (None: not written), `points`, `file`;
    `factors`, `loss`, `workload`: their sections; `impls`: an [[impl]] each (or their TOML); `tail`: more
    TOML after them ([flows], [[flow]], [capture])."""
    design = _given(name=name, topology=topology, repetitions=repetitions, seed=seed, timeout_s=timeout_s)
    sections = [
        ["[design]", *_lines(design), *_lines(settings)],
        ["[space]", *_lines(_given(method=method, points=points, file=file)), "[space.factors]", *_lines(factors)],
        ["[loss]", *_lines(loss)],
        ["[workload]", *_lines(workload)],
        *([_lines(impls)] if isinstance(impls, str) else [_impl(entry) for entry in impls]),
    ]
    text = "\n\n".join("\n".join(lines) for lines in sections if lines) + "\n"
    return text + textwrap.dedent(tail) if tail else text


def design_file(path: Path, name: str | None = None, **fields: Any) -> Path:
    """Write `design_text(name, **fields)` to `path` (the design's name: the file's stem unless given)."""
    path.write_text(design_text(name or path.stem, **fields))
    return path
