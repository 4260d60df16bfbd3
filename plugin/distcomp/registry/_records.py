"""What the registry answers: frozen records, and the one error it raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Mapping

from ..errors import UsageError

__all__ = ["DeprecatedComponentWarning", "Published", "Reference", "RegistryError", "Resolved", "Summary",
           "VersionInfo"]


class RegistryError(UsageError, ValueError):
    """A reference that cannot be resolved, a refused publish, a stored copy that fails its hash."""


class DeprecatedComponentWarning(UserWarning):
    """An exact reference named a deprecated version (it still resolves)."""


@dataclass(frozen=True)
class Reference:
    """``NAME@SELECTOR``: an exact version, ``latest``, or a range (kept as a PEP 440 specifier)."""

    name: str
    selector: str  # as written: 1.2, latest, ^1.2, ~1.2.3, 1.*, >=1.0,<2
    kind: Literal["exact", "latest", "range"]
    version: str | None = None  # exact: the canonical version (1.2 -> 1.2.0)
    specifier: str | None = None  # range: the PEP 440 specifier it means (^1.2 -> >=1.2,<2)

    def __str__(self) -> str:
        return f"{self.name}@{self.selector}"


@dataclass(frozen=True)
class Published:
    """The outcome of one publish; ``created`` is False when the same content was already there."""

    name: str
    version: str
    sha256: str
    location: str  # where the version is stored
    created: bool
    copied: tuple[tuple[str, str], ...] = ()  # (stored file, the file outside the code folder a link led to)
    swept: tuple[str, ...] = ()  # leftovers of interrupted publishes removed from the store's staging area


@dataclass(frozen=True)
class Resolved:
    """A reference resolved to one verified stored version."""

    name: str
    version: str
    sha256: str
    spec_path: Path  # the stored spec file; its code folder is inside the stored version
    deprecated: str | None = None  # "NAME@VERSION is deprecated: MESSAGE" (only an exact reference gets one)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


@dataclass(frozen=True)
class VersionInfo:
    version: str
    prerelease: bool = False
    deprecated: str | None = None  # the deprecation message ("" when given none); None when not deprecated


@dataclass(frozen=True)
class Summary:
    """One component as ``list`` and ``search`` show it: its newest usable version's metadata."""

    name: str
    version: str  # the latest (highest non-deprecated release; the highest version when all are deprecated)
    versions: int
    deprecated: int
    display_name: str = ""
    description: str = ""
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "latest": self.version, "versions": self.versions, "deprecated": self.deprecated,
                "display_name": self.display_name, "description": self.description, "tags": dict(self.tags)}
