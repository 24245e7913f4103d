"""Argv templates of implementation descriptors: the placeholders a template may use, their check, their filling.

Each element of an argv is formatted on its own (never a shell string); "{server_args}" and "{client_args}"
stand alone and expand to the arguments' fragments. Formatting is Python's str.format: a literal brace is written
doubled, "{{" for "{" and "}}" for "}" (quic-impls/README.md, "Literal braces"); a lone brace or an unknown name
between single braces is refused when the descriptor is loaded, the message saying how to escape it.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from fecbench.inputs.errors import SpecError

# Placeholders an argv template may use; "{server_args}"/"{client_args}" must be whole elements.
PLACEHOLDERS = frozenset({
    "binary", "client_binary", "dir", "server_address", "server_addresses", "client_address",
    "client_addresses", "port",
    "workload", "size", "rate", "packets", "duration", "buffer", "exchanges", "request", "response", "page_file",
    "metrics_path", "download_path",
    "run_dir", "www_dir", "seed", "timeout_s",
})
ARG_LISTS = ("server_args", "client_args")
# Placeholders listing every path (one address per path, comma-separated): a fragment using one is
# multipath and needs a topology with more than one path.
PATH_LISTS = frozenset({"client_addresses", "server_addresses"})


ESCAPE = "a literal brace is written doubled: {{ for {, }} for }"


def fields(template: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"bad template {template!r}: {exc} ({ESCAPE})") from None


def check_template(argv: list[Any], file: Path, key: str, allowed: frozenset[str]) -> list[str]:
    """Validate an argv template: a list of strings, known placeholders only."""
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise SpecError(file, key, "must be a non-empty list of strings (an argv, never a shell string)")
    for element in argv:
        if element in {f"{{{n}}}" for n in ARG_LISTS}:
            continue
        try:
            names = fields(element)
        except ValueError as exc:
            raise SpecError(file, key, str(exc)) from None
        for name in names:
            if name not in allowed:
                raise SpecError(file, key, f"unknown placeholder {{{name}}} in {element!r} (if it is meant "
                                f"literally, double its braces: '{{{{{name}}}}}' passes '{{{name}}}')",
                                sorted(allowed | set(ARG_LISTS)))
    return argv


def render(argv: list[str], values: dict[str, Any], arg_lists: dict[str, list[str]]) -> list[str]:
    """Fill an argv template: each element formatted on its own; {server_args}/{client_args} expand."""
    out: list[str] = []
    for element in argv:
        name = element[1:-1] if element.startswith("{") and element.endswith("}") else None
        if name in arg_lists:
            out.extend(arg_lists[name])
        else:
            out.append(element.format_map(values))
    return out
