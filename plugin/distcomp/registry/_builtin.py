"""The built-in registry store as a plugin: the ``file`` scheme, through the same hook a
third-party store uses. Light on purpose: the store's module loads when a registry opens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.hookspec import hookimpl
from ..records import RegistryStoreType

if TYPE_CHECKING:
    from ._directory import DirectoryStore


def directory_store(location: str) -> "DirectoryStore":
    """The store of a plain path or a ``file://`` URI (``~`` is expanded, relative paths made absolute)."""
    from ._directory import directory_store as make

    return make(location)


@hookimpl
def distcomp_registry_stores():  # type: ignore[no-untyped-def]
    yield RegistryStoreType(scheme="file", factory=directory_store,
                            description="a folder, local or on a shared file system (the default)")
