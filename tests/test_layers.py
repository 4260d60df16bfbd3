"""The import graph that ``make test``'s import-linter contracts (pyproject.toml) check, seen
through grimp, import-linter's own graph library: what it sees, and no cycle at module level.

import-linter's ``acyclic_siblings`` contract compares the children of each package; a cycle
through a package's own ``__init__`` is not one of them, so this test looks at every module."""

from __future__ import annotations

import distcomp
from pathlib import Path

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # as pyproject's [tool.importlinter] builds it: an import under `if TYPE_CHECKING:` never runs
    return grimp.build_graph("distcomp", exclude_type_checking_imports=True, cache_dir=None)


def test_the_graph_holds_imports_inside_functions_and_relative_ones(graph: grimp.ImportGraph) -> None:
    """What the contracts rely on: a checker that missed these would pass a broken layering."""
    assert graph.direct_import_exists(importer="distcomp.core.plan", imported="distcomp.core.own")  # in make_plan
    assert graph.direct_import_exists(importer="distcomp.core.plugins", imported="distcomp.core.hookspec")  # from . import
    # a TYPE_CHECKING-only import is no edge (records names RegistryStore for a type only)
    assert not graph.direct_import_exists(importer="distcomp.records", imported="distcomp.registry")


def test_no_module_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    """Tarjan's strongly connected components over every module, ``__init__`` modules included."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    assert cycles == []


def test_every_relative_import_names_a_module_that_exists() -> None:
    """Imports inside functions run late: one left pointing at a moved module fails only when its
    path runs. Each ``from .x import y`` in the package must name a module or package that exists."""
    import ast
    import importlib.util

    root = Path(distcomp.__file__).parent
    missing = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        package = parts[:-1]  # a module's package; an __init__'s is its own folder
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = list(package[:len(package) - node.level + 1])
                target = ".".join(base + ([node.module] if node.module else []))
                if importlib.util.find_spec(target) is None:
                    missing.append(f"{path.relative_to(root)}:{node.lineno}: {target}")
    assert missing == []
