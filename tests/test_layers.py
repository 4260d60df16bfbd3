"""The import graph that ``make test``'s import-linter contracts (pyproject.toml) check, seen
through grimp, import-linter's own graph library: what it sees, and no cycle at module level.

import-linter's ``acyclic_siblings`` contract compares the children of each package; a cycle
through a package's own ``__init__`` is not one of them, so this test looks at every module."""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # as pyproject's [tool.importlinter] builds it: an import under `if TYPE_CHECKING:` never runs
    return grimp.build_graph("distcomp", exclude_type_checking_imports=True, cache_dir=None)


def test_the_graph_holds_imports_inside_functions_and_relative_ones(graph: grimp.ImportGraph) -> None:
    """What the contracts rely on: a checker that missed these would pass a broken layering."""
    assert graph.direct_import_exists(importer="distcomp.plan", imported="distcomp.launchers.own")  # in make_plan
    assert graph.direct_import_exists(importer="distcomp.plugins", imported="distcomp.hookspec")  # from . import
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
