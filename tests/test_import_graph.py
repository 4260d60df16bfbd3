"""The import graph of the source itself, read with ``ast``: every import statement anywhere in a
module (top level, inside functions, under ``if TYPE_CHECKING:``), so unlike tests/test_layers.py
(grimp, which drops type-only imports as import-linter does) a type-only edge counts too.

Issue 35: no import cycle at all, ``api`` and ``worker`` reach no private target module, and the
spec layer never imports the plugin manager (it sits above it)."""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import distcomp
import pytest

ROOT = Path(distcomp.__file__).parent


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Module -> the distcomp modules it imports. ``from a import b`` is an edge to ``a.b`` where
    that is a module, else to ``a`` (a package's edge is to its ``__init__``)."""
    files = {_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                names += [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source for a in node.names]
        edges = set()
        for name in names:
            while name and name not in files:  # `import distcomp.x.y` where y is a name, not a module
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return _graph()


def _shortest_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """The shortest cycle (breadth-first from every module), as module names, or None."""
    best: list[str] | None = None
    for start in sorted(graph):
        came_from: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            module = queue.popleft()
            if start in graph[module]:
                path = [module]
                while (previous := came_from[path[-1]]) is not None:
                    path.append(previous)
                cycle = [*reversed(path), start]
                if best is None or len(cycle) < len(best):
                    best = cycle
                break
            for imported in sorted(graph[module]):
                if imported not in came_from:
                    came_from[imported] = module
                    queue.append(imported)
    return best


def test_the_graph_sees_every_kind_of_import(graph: dict[str, set[str]]) -> None:
    """What the checks below rely on: a reader that missed these would pass a cycle."""
    assert "distcomp.core.own" in graph["distcomp.core.plan"]  # inside make_plan, relative
    assert any(m.startswith("distcomp.registry") for m in graph["distcomp.records"])  # under `if TYPE_CHECKING:`
    assert "distcomp.core.hookspec" in graph["distcomp.core.plugins"]  # `from . import hookspec`: a module
    assert "distcomp" in graph["distcomp.function._inline"]  # `import distcomp`: the package's __init__


def test_no_import_cycle_type_only_and_function_level_imports_included(graph: dict[str, set[str]]) -> None:
    cycle = _shortest_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_api_and_worker_import_no_private_target_module(graph: dict[str, set[str]]) -> None:
    private = {(m, i) for m in ("distcomp.api", "distcomp.worker") for i in graph[m]
               if i.startswith("distcomp.targets.") and any(p.startswith("_") for p in i.split(".")[2:])}
    assert private == set()


def test_the_spec_layer_imports_nothing_of_the_plugin_manager(graph: dict[str, set[str]]) -> None:
    upward = {(m, i) for m, imported in graph.items() if m == "distcomp.spec" or m.startswith("distcomp.spec.")
              for i in imported if i == "distcomp.core.plugins" or i.startswith("distcomp.core.plugins.")}
    assert upward == set()
