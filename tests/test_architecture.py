"""The package's structure holds what ARCHITECTURE.md says: no import circle (module-level or inside
functions), no private name imported across modules, no module over the size limit."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from fecbench.host.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "fecbench"
MAX_LINES = 450
MAX_ROOM = 15     # modules in one folder (its __init__ counted), the top level included
MAX_FUNCTION_LINES = 80   # a function (nested ones too), its decorators left out: split longer ones into steps


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


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function or method longer than `limit` lines, nested ones included."""
    return [(node.name, node.lineno, n) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and (n := node.end_lineno - node.lineno + 1) > limit]


def test_no_function_is_longer_than_80_lines() -> None:
    """No exceptions: a long function is split into named helpers that read as its steps (issue 61)."""
    long = [f"{p.relative_to(REPO_ROOT)}:{line} {name} ({n} lines)" for p in sorted(PACKAGE.rglob("*.py"))
            for name, line, n in long_functions(p.read_text())]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them into steps):\n" + "\n".join(long)
    nested = "def outer():\n    def inner():\n" + "        x = 1\n" * 3 + "    return inner\n"
    assert long_functions(nested, 3) == [("outer", 1, 6), ("inner", 2, 4)]


def test_no_room_holds_more_than_fifteen_modules() -> None:
    rooms: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        room = str(path.parent.relative_to(REPO_ROOT))
        rooms[room] = rooms.get(room, 0) + 1
    crowded = {room: n for room, n in rooms.items() if n > MAX_ROOM}
    assert not crowded, f"folders over {MAX_ROOM} modules (give them rooms by concept): {crowded}"
    assert rooms["fecbench"] <= 5, "the top level keeps the entry (cli/, __main__) and the version"


# --- the layering and module tables of ARCHITECTURE.md -----------------------------------------------------

ARCHITECTURE = REPO_ROOT / "ARCHITECTURE.md"
DETAILED = ("runners", "analysis", "verdicts")    # packages with a table of their own (module | job | imports within)


def _section(heading: str) -> str:
    text = ARCHITECTURE.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def _rows(text: str) -> list[list[str]]:
    """The cells of every table row in `text` (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _ticked(cell: str) -> list[str]:
    """The backticked names of a cell, `a.{b,c}` standing for `a.b`, `a.c`."""
    names = []
    for token in re.findall(r"`([^`]+)`", cell):
        group = re.fullmatch(r"(.+)\.\{([^}]+)\}", token)
        names += [f"{group[1]}.{n.strip()}" for n in group[2].split(",")] if group else [token]
    return names


def _layers() -> list[tuple[str, list[str]]]:
    """(layer, its module or package tokens) in the order of the layer table, lowest first."""
    section = _section("## Packages and what they may import")
    table = section[section.index("| layer |"):section.index("\n\n", section.index("| layer |"))]
    return [(row[0], _ticked(row[1])) for row in _rows(table)[1:]]


def _detail(package: str) -> dict[str, set[str]]:
    """A package's detail table: module -> the modules of the package it imports."""
    section = _section("## Packages and what they may import")
    start = section.index(f"`{package}/` in detail")
    table = section[section.index("| module |", start):]
    table = table[:table.index("\n\n")] if "\n\n" in table else table
    out = {}
    for row in _rows(table)[1:]:
        (module,) = _ticked(row[0])
        out[module] = set(_ticked(row[2]))
    return out


def is_entry(module: str) -> bool:
    """A CLI module: the top layer."""
    return module in ("fecbench.cli", "fecbench.__main__") or module.startswith("fecbench.cli.")


def layer_of(module: str, layers: list[tuple[str, list[str]]]) -> int | None:
    """The index of the module's layer (entry modules: the last), None if the table does not name it."""
    if is_entry(module):
        return len(layers) - 1
    for index, (_, tokens) in enumerate(layers):
        for token in tokens:
            name = "fecbench" if token == "fecbench" else f"fecbench.{token.rstrip('/').replace('/', '.')}"
            if module == name or (token.endswith("/") and module.startswith(name + ".")):
                return index
    return None


def test_every_module_is_in_exactly_the_layer_table() -> None:
    layers = _layers()
    assert [name for name, _ in layers] == ["base", "storage", "data path", "planning", "campaigns", "analysis",
                                           "reproduction", "entry"]
    modules = _modules()
    missing = sorted(m for m in modules if layer_of(m, layers) is None)
    assert not missing, f"modules ARCHITECTURE.md's layer table does not name: {missing}"
    named = [t for _, tokens in layers for t in tokens]
    unknown = [t for t in named if ("fecbench" if t == "fecbench" else f"fecbench.{t.rstrip('/').replace('/', '.')}")
               not in modules]
    assert not unknown, f"ARCHITECTURE.md names modules the code lacks: {unknown}"


def test_no_module_imports_a_higher_layer_or_a_cli() -> None:
    layers, modules = _layers(), _modules()
    bad = []
    for name, path in modules.items():
        mine = layer_of(name, layers)
        for target, _, line in _imports(name, path, modules):
            if target not in modules or target == name:
                continue
            theirs = layer_of(target, layers)
            if is_entry(target) and not is_entry(name):
                bad.append(f"{path.relative_to(REPO_ROOT)}:{line} imports the CLI module {target}")
            elif mine is not None and theirs is not None and theirs > mine and not is_entry(name):
                bad.append(f"{path.relative_to(REPO_ROOT)}:{line} ({layers[mine][0]}) imports {target} "
                           f"({layers[theirs][0]})")
    assert not bad, "\n".join(bad)


def test_the_detail_tables_match_the_code() -> None:
    """Every module of runners/, analysis/ and reproduce/ has its row, and its imports within the package are listed."""
    graph, modules = _graph(), _modules()
    for package in DETAILED:
        prefix = f"fecbench.{package}"
        table = _detail(package)
        code = {m.removeprefix(prefix + ".") for m in modules if m.startswith(prefix + ".")}
        if modules[prefix].read_text().strip():   # an empty __init__.py is no module to describe
            code.add(package)
        assert set(table) == code, f"{package}/: table {sorted(set(table) - code)} not in the code, " \
                                   f"code {sorted(code - set(table))} not in the table"
        for module, listed in table.items():
            full = prefix if module == package else f"{prefix}.{module}"
            within = {t.removeprefix(prefix + ".") for t in graph[full] if t.startswith(prefix + ".")}
            assert listed == within, f"{package}/{module}: ARCHITECTURE.md lists {sorted(listed)}, code imports " \
                                     f"{sorted(within)}"


def test_the_layer_check_finds_an_upward_import() -> None:
    layers = [("low", ["a"]), ("high", ["b/"]), ("entry", ["cli"])]
    assert layer_of("fecbench.a", layers) == 0 and layer_of("fecbench.b.x", layers) == 1
    assert layer_of("fecbench.cli.b", layers) == 2 and layer_of("fecbench.zzz", layers) is None


def test_the_cli_starts_without_the_analysis_stack() -> None:
    """Every `fecbench` command imports fecbench.cli first: pulling seaborn, scipy or pandas in there costs
    each command ~1.5 s of CPU before it does anything (the suite starts hundreds)."""
    import subprocess
    import sys

    heavy = ("seaborn", "matplotlib", "pandas", "scipy", "dask", "nbclient")
    code = f"import sys, fecbench.cli; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"fecbench.cli imports {out.stdout.strip()} at start"


RUNNERS_ORDER = ("experiment", "run", "executors", "commands")   # what an experiment is ← one run ← where ← CLI


def test_runners_sub_packages_import_only_those_before_them() -> None:
    """runners/ by job: a sub-package imports only the ones before it in RUNNERS_ORDER (ARCHITECTURE.md), and
    every module of runners/ lives in one of them."""
    modules, graph = _modules(), _graph()
    prefix = "fecbench.runners."
    inside = [m for m in modules if m.startswith(prefix)]
    stray = [m for m in inside if m.removeprefix(prefix).split(".")[0] not in RUNNERS_ORDER]
    assert not stray, f"runners/ modules outside its sub-packages {RUNNERS_ORDER}: {stray}"
    bad = []
    for module in inside:
        mine = RUNNERS_ORDER.index(module.removeprefix(prefix).split(".")[0])
        for target in graph[module]:
            if target.startswith(prefix) and RUNNERS_ORDER.index(target.removeprefix(prefix).split(".")[0]) > mine:
                bad.append(f"{module} imports {target}")
    assert not bad, "\n".join(bad)


ANY_ANNOTATION = re.compile(r"(?::\s*Any\b|->\s*Any\b)")


def test_runners_name_their_types() -> None:
    """Project types, not Any, for what runners/ hands around (`dict[str, Any]` for JSON stays): a
    dependency hidden behind Any is one the layering checks cannot see (issue 36 allows at most 10)."""
    found = [f"{path.relative_to(REPO_ROOT)}:{n}" for path in sorted((PACKAGE / "runners").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if ANY_ANNOTATION.search(line)]
    assert len(found) <= 10, "Any as a parameter, attribute or return type in runners/:\n" + "\n".join(found)


WHERE_TO_ADD = ("a loss model", "a topology", "an implementation", "a workload", "a planner method", "a figure",
                "a reproduction pack", "a claim statistic", "an executor")


def test_where_to_add_names_files_that_exist() -> None:
    """ARCHITECTURE.md's "Where to add": a bullet for each common change, and every file or folder it names
    exists (so the guide cannot point a contributor at a file that moved)."""
    section = _section("## Where to add")
    bullets = re.findall(r"^- \*\*([^*]+)\*\*", section, flags=re.M)
    assert [b for b in WHERE_TO_ADD if b not in bullets] == [], bullets
    named = [t for t in re.findall(r"`([^`\s]+)`", section) if "/" in t]   # paths (bare names are examples)
    assert len(named) > 10
    missing = []
    for token in named:
        path = token.split("::")[0].rstrip("/")
        candidates = [REPO_ROOT / path, PACKAGE / path, REPO_ROOT / "fecbench" / path]
        if "*" in path or "<" in path:
            pattern = re.sub(r"<[^>]+>", "*", path)
            if not list(REPO_ROOT.glob(pattern)) and not list(PACKAGE.glob(pattern)):
                missing.append(token)
        elif not any(c.exists() for c in candidates):
            missing.append(token)
    assert not missing, f"ARCHITECTURE.md's 'Where to add' names what does not exist: {missing}"


SQL_TEXT = re.compile(r"\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|PRAGMA|CREATE TABLE)\b")
#: Where SQL may be written: the storage layer and the results reader every analysis goes through.
SQL_HOMES = {"fecbench/records/db.py", "fecbench/records/run_records.py", "fecbench/analysis/results.py"}
#: The named exceptions, each justified in ARCHITECTURE.md ("Reading results"); at most 3.
SQL_EXCEPTIONS = {"fecbench/cli/status.py", "fecbench/runners/commands/campaign_bench.py"}


def test_sql_lives_in_the_storage_layer_and_the_results_reader() -> None:
    found = {str(p.relative_to(REPO_ROOT)) for p in PACKAGE.rglob("*.py") if SQL_TEXT.search(p.read_text())}
    stray = sorted(found - SQL_HOMES - SQL_EXCEPTIONS)
    assert not stray, f"SQL outside the storage layer and analysis.results (read through them): {stray}"
    assert len(SQL_EXCEPTIONS) <= 3, "issue 36 allows at most 3 named exceptions"
    assert SQL_EXCEPTIONS <= found, f"exceptions that no longer need to be: {sorted(SQL_EXCEPTIONS - found)}"
    unjustified = [e for e in SQL_EXCEPTIONS if f"`{Path(e).stem}`" not in _section("## Reading results")]
    assert not unjustified, f"exceptions ARCHITECTURE.md's 'Reading results' does not justify: {unjustified}"


def test_no_folder_holds_more_than_15_modules() -> None:
    crowded = {str(d.relative_to(REPO_ROOT)): n for d in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
               if d.name != "__pycache__" and d != PACKAGE and (n := len(list(d.glob("*.py")))) > 15}
    assert not crowded, f"folders of fecbench/ with more than 15 modules (split them by job): {crowded}"


def _loads_by_name(source: str) -> list[int]:
    """Lines calling importlib.import_module or __import__ with a name that is, or may be, a project module:
    a "fecbench…" literal, a name the file binds to one (a constant, a loop over literals), or any name the
    file cannot show (a parameter, an attribute): a constant or a variable hides the dependency as well as a
    literal. Third-party names the file spells out (hostinfo's versions of numpy, scipy, pandas) pass."""
    tree = ast.parse(source)

    def strings(node: ast.AST | None) -> list[str] | None:   # the literal names an expression can take, or None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            head = node.values[0] if node.values else None
            return [head.value if isinstance(head, ast.Constant) else ""]
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            parts = [strings(e) for e in node.elts]
            return None if any(s is None for s in parts) else [s for part in parts for s in part or []]
        return None

    bound: dict[str, list[str] | None] = {}
    for node in ast.walk(tree):
        pairs = [(t, node.value) for t in node.targets] if isinstance(node, ast.Assign) else \
            [(node.target, node.iter)] if isinstance(node, ast.For) else []
        for target, value in pairs:
            if isinstance(target, ast.Name):   # every value the name is given; None once one is unknown
                known, before = strings(value), bound.get(target.id, [])
                bound[target.id] = None if known is None or before is None else [*before, *known]

    def project(arg: ast.AST) -> bool:
        names = bound.get(arg.id) if isinstance(arg, ast.Name) else strings(arg)
        return names is None or any(not n or n.split(".")[0] == "fecbench" for n in names)

    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args
            and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                 or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))
            and project(node.args[0])]


def test_no_project_module_is_loaded_by_name() -> None:
    """A module loaded by name (importlib.import_module, __import__) hides a dependency from every check here:
    fecbench imports its own modules plainly (optional third-party packages: importlib.util.find_spec)."""
    found = [f"{p.relative_to(REPO_ROOT)}:{line}" for p in PACKAGE.rglob("*.py")
             for line in _loads_by_name(p.read_text())]
    assert not found, found
    assert _loads_by_name("import importlib\nNAME = 'fecbench.analysis.flows'\nimportlib.import_module(NAME)\n") == [3]
    assert _loads_by_name("from importlib import import_module\nimport_module(f'fecbench.{x}')\n") == [2]
    assert _loads_by_name("def f(name):\n    return __import__(name)\n") == [2]
    assert _loads_by_name("for m in ('numpy', 'scipy'):\n    __import__(m)\nimportlib.util.find_spec('x')\n") == []


# --- a claim statistic is one object (issue 36) ------------------------------------------------------------------

STATISTICS_PACKAGE = PACKAGE / "verdicts" / "statistics"
#: A statistic's name tested outside its object: compared, looked up in a table of one's own, or matched.
NAME_TESTS = re.compile(r"statistic\s*(?:==|!=|\bnot\s+in\b|\bin\b)|statistic\.startswith|"
                        r"\[\s*[\w.]*\bstatistic\s*\]|(?<!statistics)\.get\(\s*[\w.]*\bstatistic\b")


def _name_tests(source: str, names: set[str]) -> list[str]:
    """Where a source tests a claim statistic's name: NAME_TESTS, or a registered name as a string literal."""
    found = [f"{n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if NAME_TESTS.search(line)]
    found += [f"{node.lineno}: {node.value!r}" for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]
    return found


def test_no_module_outside_the_statistics_tests_a_statistic_name() -> None:
    """What a statistic is lives in its object (fecbench/verdicts/statistics/); every other module asks it
    (`claim.stat.…`), so adding a statistic touches its own module and the registry's line only."""
    from fecbench.verdicts.statistics import REGISTRY

    names = set(REGISTRY)
    found = [f"{p.relative_to(REPO_ROOT)}:{hit}" for p in sorted(PACKAGE.rglob("*.py"))
             if not p.is_relative_to(STATISTICS_PACKAGE) for hit in _name_tests(p.read_text(), names)]
    assert not found, "statistic names tested outside fecbench/verdicts/statistics/:\n" + "\n".join(found)
    assert _name_tests('if claim.statistic == "x":\n    pass\n', set()) and _name_tests("u = 2 if s in P else 1\n"
                                                                                        "k = T.get(c.statistic)\n",
                                                                                        set()) == \
        ["2: k = T.get(c.statistic)"]
    assert _name_tests("w = {'trend': 1}\n", {"trend"}) == ["1: 'trend'"]
    assert _name_tests("stat = statistics.get(self.statistic)\n", set()) == []


def _definitions(source: str) -> tuple[list[str], list[str]]:
    """The classes a module defines and the names it assigns at its top level."""
    tree = ast.parse(source)
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    assigned = [target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)]
    return classes, assigned


def test_one_name_per_class_and_one_vocabulary_for_directions() -> None:
    """Issue 72, item 6: a class name says which class it is anywhere in the package (8 names stood for 2-3
    classes each), and the link's directions have one home (fecbench/inputs/directions.py; `DIRECTIONS` stood
    five times for different sets)."""
    where: dict[str, list[str]] = {}
    directions: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        classes, assigned = _definitions(path.read_text())
        for name in classes:
            where.setdefault(name, []).append(str(path.relative_to(REPO_ROOT)))
        directions += [f"{path.relative_to(REPO_ROOT)}: {name}" for name in assigned if name == "DIRECTIONS"]
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, f"class names defined more than once: {twice}"
    assert not directions, f"link directions are fecbench.inputs.directions' names: {directions}"
    assert _definitions("class A:\n    class B:\n        pass\nDIRECTIONS = 1\nx: int = 2\n") == (["A", "B"],
                                                                                               ["DIRECTIONS", "x"])
