"""The registry's actions as one call each, returning records (what ``distcomp registry ACTION``
prints): ``publish``, ``components``/``search``, ``show``, ``deprecate``. ``registry``: a folder
or ``SCHEME://...`` (default ``$DISTCOMP_REGISTRY``, else the user's registry).

>>> from distcomp import registry
>>> registry.publish("components/*", registry="/shared/registry").ok            # doctest: +SKIP
True
>>> registry.show("pytorch-ddp-train@^1", registry="/shared/registry").version   # doctest: +SKIP
'1.0.0'
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Union

from ._locate import open_registry
from ._records import Published, RegistryError, Summary, VersionInfo
from ._reference import parse_reference
from ._registry import SPEC_NAMES

__all__ = ["Deprecation", "Listing", "PublishFailure", "PublishReport", "Skipped", "VersionDetails", "components",
           "deprecate", "publish", "search", "show"]

if TYPE_CHECKING:
    from ..function import FunctionComponent

PathLike = Union[str, "os.PathLike[str]"]
Publishable = Union[str, "os.PathLike[str]", "FunctionComponent"]


@dataclass(frozen=True)
class Skipped:
    """A path a pattern matched that is neither a spec file nor a component folder."""

    path: str
    reason: str  # "not a spec file (.yaml) or a component folder", "no component.yaml in it"


@dataclass(frozen=True)
class PublishFailure:
    """A spec that was not published, and why (the others still are)."""

    spec: str
    message: str


PublishResult = Union[Skipped, Published, PublishFailure]


@dataclass(frozen=True)
class PublishReport:
    """Every path ``publish`` was given, in order: skipped ones first (as the patterns were
    expanded), then each spec published or failed."""

    location: str
    results: tuple[PublishResult, ...]

    @property
    def published(self) -> tuple[Published, ...]:
        return tuple(r for r in self.results if isinstance(r, Published))

    @property
    def failures(self) -> tuple[PublishFailure, ...]:
        return tuple(r for r in self.results if isinstance(r, PublishFailure))

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        """``distcomp registry publish``'s: 0, or 2 when any spec was refused."""
        return 0 if self.ok else 2


@dataclass(frozen=True)
class Listing:
    """The components of a registry (``query``: those whose name, title, description or tags
    contain it), each with its latest version."""

    location: str
    components: tuple[Summary, ...]
    query: str = ""

    def as_json(self) -> list[dict[str, Any]]:
        return [s.as_json() for s in self.components]


@dataclass(frozen=True)
class VersionDetails:
    """One stored version, verified: its metadata (``about``: display_name, description, tags,
    launcher, nodes, processes_per_node, inputs, outputs), and every version of its name."""

    name: str
    version: str
    sha256: str
    spec: Path  # the stored spec file
    deprecated: str | None  # "NAME@VERSION is deprecated: MESSAGE" where it is
    published: str  # UTC, ISO 8601
    user: str
    files: int
    about: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    versions: tuple[VersionInfo, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "sha256": self.sha256, "spec": str(self.spec),
                "deprecated": self.deprecated, "published": self.published, "user": self.user, "files": self.files,
                **self.about, "versions": [{"version": v.version, "prerelease": v.prerelease,
                                            "deprecated": v.deprecated} for v in self.versions]}


@dataclass(frozen=True)
class Deprecation:
    """A version deprecated (``undo``: no longer); ``was``: its deprecation before (None: none)."""

    name: str
    version: str
    message: str
    undo: bool
    was: str | None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def changed(self) -> bool:
        return (self.was is not None) if self.undo else True


def _is_function(item: Publishable) -> bool:
    """A function component, or ``FILE.py:FUNCTION`` (the registry's ``publish`` resolves it)."""
    if not isinstance(item, (str, os.PathLike)):
        return True
    return isinstance(item, str) and ".py:" in item and not Path(item).exists()


def _label(item: Publishable) -> str:
    if isinstance(item, (str, os.PathLike)):
        return os.fspath(item)
    origin = getattr(item, "origin", None)
    return f"{origin.file.name}:{origin.qualname}" if origin is not None else repr(item)


def _expand(given: tuple[Publishable, ...], found: Callable[[PublishResult], None]) -> list[Publishable]:
    """Spec files and component folders as given, function components as they are; a pattern
    the shell left alone (``'components/*'``) is expanded; what it matches that is no spec (a
    README beside the folders) is skipped."""
    out: list[Publishable] = []
    for given_item in given:
        if _is_function(given_item):
            out.append(given_item)
            continue
        item = os.fspath(given_item)
        matches = sorted(glob.glob(item)) if glob.has_magic(item) and not Path(item).exists() else [item]
        if not matches:
            raise RegistryError(f"{item}: matches no file or folder")
        for match in matches:
            path = Path(match)
            if path.is_file() and path.suffix.lower() not in (".yaml", ".yml"):
                found(Skipped(match, "not a spec file (.yaml) or a component folder"))
            elif path.is_dir() and not any((path / n).is_file() for n in SPEC_NAMES):
                if len(matches) == 1:
                    raise RegistryError(f"{match}: no {SPEC_NAMES[0]} in this folder (give a component's folder or "
                                        "its spec file)")
                found(Skipped(match, f"no {SPEC_NAMES[0]} in it"))
            else:
                out.append(match)
    return out


def publish(*specs: Publishable, registry: str | None = None, allow_external_links: bool = False,
            progress: Callable[[PublishResult], None] | None = None) -> PublishReport:
    """Store each spec (a file, a folder holding component.yaml, or a pattern such as
    ``components/*``; a Python-function component, ``@distcomp.component`` or
    ``FILE.py:FUNCTION``, as ``distcomp.export`` writes it) and its code as ``name@version``;
    a spec refused (invalid, a conflict) is a ``PublishFailure`` and the others still publish.
    ``progress`` hears each result as it is known. A path that matches nothing raises a
    RegistryError."""
    store = open_registry(registry)
    results: list[PublishResult] = []

    def found(result: PublishResult) -> None:
        results.append(result)
        if progress is not None:
            progress(result)

    for spec in _expand(specs, found):
        try:
            found(store.publish(spec, allow_external_links))
        except RegistryError as exc:
            found(PublishFailure(_label(spec), str(exc)))
    return PublishReport(store.location, tuple(results))


def components(text: str = "", *, registry: str | None = None) -> Listing:
    """Every component (``text``: those whose name, title, description or tags contain it, in
    any case), each with its latest version."""
    store = open_registry(registry)
    return Listing(store.location, tuple(store.summaries(text)), text)


def search(text: str, *, registry: str | None = None) -> Listing:
    return components(text, registry=registry)


def show(ref: str, *, registry: str | None = None) -> VersionDetails:
    """The version ``ref`` names (``NAME``: its latest; ``NAME@1.2.0``, ``NAME@^1.2``, ...),
    its content hash checked."""
    store = open_registry(registry)
    resolved, manifest = store.describe(parse_reference(ref, default="latest"))
    return VersionDetails(resolved.name, resolved.version, resolved.sha256, resolved.spec_path, resolved.deprecated,
                          manifest.published, manifest.user, len(manifest.files), MappingProxyType(dict(manifest.summary)),
                          tuple(store.versions(resolved.name)))


def deprecate(ref: str, message: str = "", *, undo: bool = False, registry: str | None = None) -> Deprecation:
    """Mark an exact version deprecated (``latest`` and ranges skip it; naming it exactly still
    works, with a warning), or, ``undo``, no longer."""
    store = open_registry(registry)
    parsed = parse_reference(ref)
    before = store.versions(parsed.name)
    info = store.deprecate(parsed, message, undo=undo)
    was = next((v.deprecated for v in before if v.version == info.version), None)
    return Deprecation(parsed.name, info.version, message, undo, was)
