"""designs/README.md opens on the design format, and its table of parameters names every key the design's
parsers read (an AST scan of the `Section.get` calls), so the docs cannot fall behind the code."""

from __future__ import annotations

import ast
from pathlib import Path

from fecbench.host.paths import REPO_ROOT
from fecbench.planner.space import FACTOR_KEYS

PARSERS = ["fecbench/runners/experiment/design.py", "fecbench/runners/experiment/flows.py", "fecbench/planner/space.py",
           "fecbench/runners/experiment/capture.py"]
README = REPO_ROOT / "designs" / "README.md"
# a descriptor's [capture] keys; the [design] table itself
NOT_DESIGN_KEYS = {"files", "qlog_format", "qlog_cost", "design"}


def _keys(path: Path) -> set[str]:
    keys = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and len(node.args) >= 2):   # Section.get(name, kind, ...): a dict's .get has no kind
            keys.add(node.args[0].value)
    return keys


def test_the_table_names_every_key_the_parsers_read() -> None:
    text = README.read_text()
    table = text[text.index("### Every parameter"):text.index("### The file")]
    keys = set().union(*(_keys(REPO_ROOT / p) for p in PARSERS)) | set(FACTOR_KEYS)
    missing = sorted(k for k in keys - NOT_DESIGN_KEYS if f"`{k}`" not in table)
    assert not missing, f"designs/README.md's table of parameters lacks {missing}"
    assert len(keys) > 40


def test_the_format_comes_before_timing_accuracy() -> None:
    text = README.read_text()
    assert text.index("## The design format") < text.index("How accurate each run was")
    assert text.index("### Every parameter, its dimension and default unit") < text.index("How long a campaign")
