"""Guards that keep issue 61's clean-up so, beside tests/test_architecture.py (modules, functions, folders) and
tests/test_rust_layout.py (fecq's folders): the tests write their designs through one builder
(tests/helpers/designs.py), and the pinned-archive builds of rQUIC and XQUIC share one script."""

from __future__ import annotations

import ast

from fecbench.host.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"


def hand_written_designs(source: str) -> list[int]:
    """Lines of string literals (f-strings included) holding a whole design: a [design] table and an [[impl]]."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        else:
            continue
        if "[design]" in text and "[[impl]]" in text:
            found.append(node.lineno)
    return found


def test_tests_write_designs_through_the_builder() -> None:
    found = [f"{p.name}:{line}" for p in sorted(TESTS.glob("test_*.py")) if p.name != "test_guards.py"
             for line in hand_written_designs(p.read_text())]
    assert not found, f"designs written by hand (use tests/helpers/designs.py: design_text, design_file): {found}"


def test_the_guard_sees_a_design_written_by_hand() -> None:
    assert hand_written_designs('D = """\n[design]\nname = "x"\n[[impl]]\nname = "fecq"\n"""\n') == [1]
    assert hand_written_designs('D = f"[design]\\nname = {n}\\n[[impl]]\\n"\n') == [1]
    assert hand_written_designs('D = "[design]"\nE = "[[impl]]"\n') == []


def test_the_pinned_builds_share_one_script() -> None:
    shared = REPO_ROOT / "quic-impls" / "pinned-build.sh"
    assert shared.is_file()
    for stack in ("rquic", "xquic"):
        script = (REPO_ROOT / "quic-impls" / stack / "build.sh").read_text()
        assert '. "$here/../pinned-build.sh"' in script, f"{stack}/build.sh does not source the shared script"
        # Finding, checking (the unpacked tree's hash) and caching the archive live in the shared script only.
        for own in ("tree_hash()", "-o \"$URL\"", '"$URL"', "tar -xzf \"$tarball\""):
            assert own not in script, f"{stack}/build.sh does {own!r} itself: the shared script's job"
    assert "tree_hash()" in shared.read_text()
