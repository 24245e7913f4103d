"""The signs a newcomer reads first are true and short (issue 61 item 5): ARCHITECTURE.md's size, its table cells
and its data-flow diagram; the README's tour of the package; the way from the README's first screen to "Where to
add". tests/test_architecture.py checks ARCHITECTURE.md's tables against the code."""

from __future__ import annotations

import ast
import re

from fecbench.host.paths import REPO_ROOT

ARCHITECTURE = REPO_ROOT / "ARCHITECTURE.md"
README = REPO_ROOT / "README.md"
PACKAGE = REPO_ROOT / "fecbench"
MAX_BYTES = 20_000
MAX_CELL = 300
FIRST_SCREEN = 40   # lines


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def _module_exists(dotted: str) -> bool:
    path = PACKAGE.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(dotted: str) -> set[str]:
    """The fecbench modules (and names from them, as `module.name`) a module imports, anywhere in it."""
    path = PACKAGE.joinpath(*dotted.split("."))
    path = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fecbench"):
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("fecbench")}
    return {name.removeprefix("fecbench.") for name in found}


# --- ARCHITECTURE.md ----------------------------------------------------------------------------------------

def _long_cells(text: str) -> list[str]:
    return [f"line {n}: {len(cell.strip())} characters: {cell.strip()[:60]}…"
            for n, line in enumerate(text.splitlines(), 1) if line.startswith("|")
            for cell in line.strip().strip("|").split("|") if len(cell.strip()) > MAX_CELL]


def test_architecture_is_short() -> None:
    size = len(ARCHITECTURE.read_bytes())
    assert size <= MAX_BYTES, f"ARCHITECTURE.md is {size} bytes (at most {MAX_BYTES}): a module's details belong " \
                              "in its docstring, its row says its job in one line"
    long = _long_cells(ARCHITECTURE.read_text())
    assert not long, f"table cells over {MAX_CELL} characters:\n" + "\n".join(long)


def test_the_cell_check_finds_a_long_cell() -> None:
    assert _long_cells("| a | " + "x" * 301 + " |\n| b | c |\n") and not _long_cells("| a | " + "x" * 300 + " |\n")


def test_the_data_flow_names_modules_that_exist() -> None:
    diagram = _section(ARCHITECTURE.read_text(), "## Data flow")
    roots = "|".join(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    named = set(re.findall(rf"\b(?:{roots})(?:\.\w+)*\b", diagram))
    assert {"runners.commands.pipeline", "runners.experiment.prepare", "runners.executors.calibrate"} <= named
    missing = sorted(n for n in named if not _module_exists(n))
    assert not missing, f"ARCHITECTURE.md's data flow names modules the code lacks: {missing}"


def test_the_data_flow_says_who_does_what() -> None:
    """The diagram's claims, against the imports: the pipeline chooses the runs (executors.selection), the
    planner is called from `prepare` (not `design`), and the database has the two writers the rules name."""
    assert "runners.executors.selection" in _imports("runners.commands.pipeline")
    assert "planner" in _imports("runners.experiment.prepare")
    assert not any(n.startswith("planner") for n in _imports("runners.experiment.design"))
    modules = [".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py")]
    writers = sorted(m for m in modules if m != "runners.run.recorder"
                     and "runners.run.recorder.Recorder" in _imports(m))
    assert writers == ["runners.executors.calibrate", "runners.executors.engine"], writers
    text = ARCHITECTURE.read_text()
    rules = text[text.index("\nRules:"):text.index("\n\n", text.index("\nRules:"))]
    assert all(f"`{w.removeprefix('runners.')}`" in rules for w in writers), "the rules name each writer"


# --- README --------------------------------------------------------------------------------------------------

def _tour() -> str:
    return _section(README.read_text(), "## A short tour")


def test_the_tour_names_what_exists() -> None:
    """Every path the README's tour names exists, and it names every folder of fecbench/ and quic-impls/."""
    tokens = re.findall(r"`([^`\s]+)`", _tour())
    paths = [t for t in tokens if "/" in t and not t.startswith("make")]
    dotted = [t for t in tokens if t.startswith("fecbench.")]
    missing = [t for t in paths if not list(REPO_ROOT.glob(t.rstrip("/")))]   # `*` in a name: any match
    missing += [t for t in dotted if not _module_exists(t.removeprefix("fecbench."))]
    assert not missing, f"README's tour names what does not exist: {missing}"
    folders = [f"{root}/{p.name}/" for root in ("fecbench", "quic-impls") for p in sorted((REPO_ROOT / root).iterdir())
               if p.is_dir() and p.name != "__pycache__"]
    left_out = [f for f in folders if f"`{f}`" not in _tour()]
    assert not left_out, f"README's tour leaves out: {left_out}"
    assert len(paths) > 20


def test_where_to_add_is_linked_from_the_first_screen() -> None:
    first = "\n".join(README.read_text().splitlines()[:FIRST_SCREEN])
    assert "(ARCHITECTURE.md#where-to-add)" in first, "link ARCHITECTURE.md's 'Where to add' near the README's top"
    slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
             for h in re.findall(r"^## (.+)$", ARCHITECTURE.read_text(), flags=re.M)}
    assert "where-to-add" in slugs, "the anchor #where-to-add names a heading of ARCHITECTURE.md"
