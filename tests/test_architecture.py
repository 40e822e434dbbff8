"""The layout docs/architecture.md describes (issue 38), pinned: the manager owns components it calls with
explicit inputs, no component imports the manager, no import circle, modules a reader can hold, and one
request that reads top to bottom."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import amplifier_module_context_simple
from amplifier_module_context_simple import SimpleContextManager

PACKAGE = Path(amplifier_module_context_simple.__file__).parent
DOC = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
MODULES = sorted(PACKAGE.glob("*.py"))


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports (``from .x import``, ``from . import x``), at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names |= {node.module.split(".")[0]} if node.module else {alias.name for alias in node.names}
    return names & {module.stem for module in MODULES}


def test_no_module_but_the_package_imports_the_manager() -> None:
    importers = sorted(path.stem for path in MODULES if "manager" in _imports(path))
    assert importers == ["__init__"]


def test_no_import_circle() -> None:
    graph = {path.stem: _imports(path) for path in MODULES}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for name in graph[start] - seen:
            seen.add(name)
            if name == goal or reaches(name, goal, seen):
                return True
        return False

    assert [name for name in graph if reaches(name, name, set())] == []


def test_module_sizes() -> None:
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in MODULES}
    assert sizes["manager.py"] <= 400
    assert {name: size for name, size in sizes.items() if size > 450} == {}


def test_one_request_reads_top_to_bottom() -> None:
    source = inspect.getsource(inspect.unwrap(SimpleContextManager.get_messages_for_request))
    assert len(source.splitlines()) <= 42


def test_the_architecture_page_names_every_module() -> None:
    assert [path.name for path in MODULES if f"`{path.name}`" not in DOC and path.name not in DOC] == []
