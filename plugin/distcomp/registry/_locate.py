"""Where the registry is, and what every spec loader calls: ``locate(path or reference)``."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ._stored import default_location, stored_version

if TYPE_CHECKING:
    from ..core.plugins import PluginManager
    from ._registry import Registry

# the registry's hashing, versions, stores and records load only for a reference or stored code:
# a spec file of the user's (every `distcomp run` of one) needs none of them

__all__ = ["default_location", "locate", "open_registry"]

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def open_registry(location: str | None = None, pm: "PluginManager | None" = None) -> "Registry":
    """The registry at ``location`` (default: ``default_location()``): a plain path is the
    built-in directory store; ``SCHEME://...`` the store a plugin registers for SCHEME."""
    from ..core.plugins import PluginError, get_plugin_manager
    from ._records import RegistryError
    from ._registry import Registry

    where = location.strip() if location and location.strip() else default_location()
    m = _SCHEME.match(where)
    scheme = m.group(1).lower() if m else "file"
    manager = pm if pm is not None else get_plugin_manager()
    try:
        kind, provider = manager.registry_store(scheme)
    except PluginError as exc:
        raise RegistryError(f"registry {where!r}: {exc}") from None
    try:
        store = kind.factory(where)
    except RegistryError:
        raise
    except Exception as exc:  # a plugin's factory: name it, do not crash
        raise RegistryError(f"registry {where!r}: the {scheme!r} store from {provider} failed: "
                            f"{type(exc).__name__}: {exc}") from None
    return Registry(store, None if pm is None else manager.alias_table())


def _warn(message: str) -> None:
    from ._records import DeprecatedComponentWarning

    warnings.warn(message, DeprecatedComponentWarning, stacklevel=3)


def _checked(path: Path) -> Path:
    """``path``, after the hash check of the stored version it lies in, if any: a stored copy
    named by its path runs only what its hash covers, as one named by reference does."""
    folder = stored_version(path)
    if folder is not None:
        from ._manifest import read_manifest, verify

        verify(folder, read_manifest(folder, folder.parent.name, folder.name))
    return path


def locate(text: str, registry: str | None = None, *, warn: Callable[[str], None] | None = None) -> Path:
    """The spec file ``text`` means: an existing file; an existing folder's component.yaml;
    for ``NAME@SELECTOR`` (``pytorch-ddp-train@1.0.0``, ``@latest``, ``@^1.2``, ``@>=1.0,<2``)
    the verified stored spec from the registry at ``registry`` (default as ``open_registry``);
    otherwise ``Path(text)`` unchanged, for the caller's loader to report. A deprecated version
    named exactly resolves, and ``warn`` (default: a DeprecatedComponentWarning) is told. A
    file or folder inside a stored version is hash-checked too."""
    path = Path(text)
    if path.is_file():
        return _checked(path)
    if path.is_dir():
        return _checked(path / ("component.yml" if not (path / "component.yaml").exists()
                                and (path / "component.yml").is_file() else "component.yaml"))
    from ._reference import looks_like_reference, parse_reference

    if not looks_like_reference(text):
        return path
    resolved = open_registry(registry).resolve(parse_reference(text))
    if resolved.deprecated:
        (warn or _warn)(resolved.deprecated)
    return resolved.spec_path
