"""What every target's loader accepts: a ComponentSpec, a spec file, a folder holding
``component.yaml``, a registry reference (``name@1.2.0``, ``name@latest``, ``name@^1.2``), or a
Python-function component (``@distcomp.component``, ``FILE.py:FUNCTION``), read with the
launcher names the installed plugins know."""

from __future__ import annotations

import os
from typing import Mapping, Union

from ..spec import ComponentSpec, check_file

SpecLike = Union[ComponentSpec, str, "os.PathLike[str]"]


def resolve_spec(spec_or_path: SpecLike, error: type[Exception],
                 registry: str | None = None) -> tuple[ComponentSpec, Mapping[str, str]]:
    """The spec and the launcher alias table; every problem raises ``error`` with a message
    a user can act on (the spec's own diagnostics, one per line). A reference is looked up in
    ``registry`` (default ``$DISTCOMP_REGISTRY``, else the user's registry) and its content
    hash checked."""
    from ..core.plugins import PluginError, get_plugin_manager
    from ..registry import RegistryError, locate

    try:
        launchers = get_plugin_manager().alias_table()
    except PluginError as exc:
        raise error(str(exc)) from None
    if isinstance(spec_or_path, ComponentSpec):
        return spec_or_path, launchers
    from ..errors import UsageError
    from ..function._resolve import function_spec

    try:
        function = function_spec(spec_or_path)
        if function is not None:
            return function, launchers
    except UsageError as exc:
        raise error(str(exc)) from None
    if not isinstance(spec_or_path, (str, os.PathLike)):
        raise error(f"expected a ComponentSpec or the path of a spec file, got {type(spec_or_path).__name__}")
    try:
        path = locate(os.fspath(spec_or_path), registry)
    except RegistryError as exc:
        raise error(str(exc)) from None
    result = check_file(path, launchers)
    if result.spec is None:
        raise error("\n".join(str(d) for d in result.errors))
    return result.spec, launchers
