"""The package's structure holds what ARCHITECTURE.md says: no import circle (module-level or inside
functions), no private name imported across modules, no module over the size limit."""

from __future__ import annotations

import ast
from pathlib import Path

from fecbench.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "fecbench"
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """(imported fecbench module, names taken from it, line) for every import in the file."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("fecbench")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if not base.startswith("fecbench"):
                continue
            for alias in node.names:  # `from fecbench.x import y` may import the module fecbench.x.y
                sub = f"{base}.{alias.name}"
                found.append((sub, [], node.lineno) if sub in modules else (base, [alias.name], node.lineno))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {target for target, _, _ in _imports(name, path, modules) if target in modules and target != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            # A package's __init__ re-exporting its own submodules is not a circle through the package.
            if nxt.startswith(node + ".") and REPO_ROOT.joinpath(*node.split("."), "__init__.py").exists():
                continue
            if node.startswith(nxt + ".") and REPO_ROOT.joinpath(*nxt.split("."), "__init__.py").exists():
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circle() -> None:
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_the_check_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_private_name_crosses_a_module_boundary() -> None:
    modules = _modules()
    bad = [f"{path.relative_to(REPO_ROOT)}:{line} imports {n} from {target}"
           for name, path in modules.items() for target, names, line in _imports(name, path, modules)
           for n in names if n.startswith("_") and not n.endswith("__") and target != name]
    assert not bad, "\n".join(bad)


def test_modules_stay_small() -> None:
    big = {str(p.relative_to(REPO_ROOT)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by concept): {big}"
