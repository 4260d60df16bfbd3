"""A package whose names load from its modules on first use (PEP 562), so that importing one
of its modules (``distcomp run`` needs a few) does not import them all."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs every process that imports this (an mpirun shim's too) ~10 ms; mypy reads True
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, MutableMapping


def exports(package: str, modules: Mapping[str, tuple[str, ...]], namespace: MutableMapping[str, Any],
            submodules: tuple[str, ...] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``: ``modules`` maps each module (``_claim``)
    to the names it provides; ``submodules`` are the package's own modules reachable as
    attributes (``pkg.runtime`` after a bare ``import pkg``, as ``import pkg.runtime`` would give);
    a name, once loaded, is kept in ``namespace`` (its globals)."""
    home = {name: module for module, names in modules.items() for name in names}
    own = frozenset(submodules)

    def getattr_(name: str) -> Any:
        import importlib  # on first use: `import distcomp` alone does not load it

        if name in own:
            value = importlib.import_module(f"{package}.{name}")
        else:
            module = home.get(name)
            if module is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *home, *own})

    return getattr_, dir_
