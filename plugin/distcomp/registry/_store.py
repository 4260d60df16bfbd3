"""What a registry store is: the small protocol a ``distcomp_registry_stores`` plugin implements.

The registry builds, hashes and verifies versions itself; a store only keeps folders, each
put once and never changed, and one small metadata document per name (the deprecations).
A store may also have ``sweep() -> list[str]``: remove what interrupted publishes left
(never a live publisher's), one line per leftover; ``publish`` calls it first and reports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, runtime_checkable

__all__ = ["RegistryStore"]

Metadata = dict[str, Any]


@runtime_checkable
class RegistryStore(Protocol):
    location: str  # how messages name the store

    def names(self) -> Iterable[str]:
        """The names that have a folder (they may hold no version yet)."""

    def versions(self, name: str) -> Iterable[str]:
        """The version folder names of ``name``, any order; cheap: called on every resolve."""

    def stage(self, name: str, version: str) -> Path:
        """A new empty local folder to build ``name@version`` in (for ``put``)."""

    def put(self, name: str, version: str, folder: Path) -> bool:
        """Add ``folder`` as ``name@version`` atomically: readers see all of it or nothing. False
        when that version exists already (nothing is replaced). ``folder`` is gone afterwards."""

    def folder(self, name: str, version: str) -> Path | None:
        """A local folder holding the version's files (``manifest.json`` included), or None."""

    def metadata(self, name: str) -> Metadata:
        """The metadata document of ``name`` ({} when there is none)."""

    def update_metadata(self, name: str, change: Callable[[Metadata], Metadata]) -> Metadata:
        """Replace the metadata of ``name`` with ``change(current)``, so that concurrent updates
        are not lost; returns the new document."""
