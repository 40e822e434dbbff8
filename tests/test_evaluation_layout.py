"""The evaluation's layout (issue 23): the harness's core, then studies and benchmarks by folder, and no
import circle anywhere in it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "evaluation"


def imports() -> dict[str, set[str]]:
    """Each evaluation module and the evaluation modules it imports (relative imports, any depth)."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if path.name == "__init__.py" else parts)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                if node.module:
                    deps.add(".".join([*base, node.module]))
                else:
                    deps |= {".".join([*base, alias.name]) for alias in node.names}
        graph[name] = deps
    return graph


def test_no_import_circle_in_the_evaluation():
    graph = imports()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in graph.get(node, ()):
            assert state.get(dep) != 1, "import circle: " + " -> ".join([*path, dep])
            if dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])
    assert "evaluation.report" in graph["evaluation.report_text"]  # prose reads the data, not back
    assert "evaluation.report_text" not in graph["evaluation.report"]


def test_studies_and_benchmarks_are_apart_from_the_core_and_use_it():
    studies = {p.stem for p in (ROOT / "studies").glob("*.py")} - {"__init__"}
    benchmarks = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - {"__init__"}
    assert "preset_sweep" in studies and "bench_scale" in benchmarks
    assert all(name.startswith("bench_") for name in benchmarks)
    core = {p.stem for p in ROOT.glob("*.py")}
    assert {"workloads", "runner", "driver", "provider", "cache", "metrics", "report"} <= core
    assert not (core & (studies | benchmarks))
    graph = imports()
    for name, deps in graph.items():
        if name.startswith("evaluation.") and name.count(".") == 1:  # the core never reaches into a study
            assert not any(d.startswith(("evaluation.studies", "evaluation.benchmarks")) for d in deps), name
        assert "evaluation.__main__" not in deps or name == "evaluation", name
