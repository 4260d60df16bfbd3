"""What every target's loader accepts: a ComponentSpec, a spec file, or a folder holding
``component.yaml``, read with the launcher names the installed plugins know."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Union

from ..spec import ComponentSpec, check_file

SpecLike = Union[ComponentSpec, str, "os.PathLike[str]"]


def resolve_spec(spec_or_path: SpecLike, error: type[Exception]) -> tuple[ComponentSpec, Mapping[str, str]]:
    """The spec and the launcher alias table; every problem raises ``error`` with a message
    a user can act on (the spec's own diagnostics, one per line)."""
    from ..plugins import PluginError, get_plugin_manager

    try:
        launchers = get_plugin_manager().alias_table()
    except PluginError as exc:
        raise error(str(exc)) from None
    if isinstance(spec_or_path, ComponentSpec):
        return spec_or_path, launchers
    if not isinstance(spec_or_path, (str, os.PathLike)):
        raise error(f"expected a ComponentSpec or the path of a spec file, got {type(spec_or_path).__name__}")
    path = Path(spec_or_path)
    if path.is_dir():
        path = path / "component.yaml"
    result = check_file(path, launchers)
    if result.spec is None:
        raise error("\n".join(str(d) for d in result.errors))
    return result.spec, launchers
