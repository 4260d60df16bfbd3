"""The registry over any store: publish, resolve, list, search, deprecate."""

from __future__ import annotations

import difflib
import getpass
import json
import os
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from . import _versions
from ._fs import remove_tree
from ._manifest import MANIFEST, Manifest, content_hash, read_manifest, verify
from ._records import Published, Reference, RegistryError, Resolved, Summary, VersionInfo
from ._reference import check_name, parse_reference
from ._snapshot import copy_into, plan, summary
from ._store import RegistryStore

if TYPE_CHECKING:
    from ..function import FunctionComponent
    from ..spec import ComponentSpec

__all__ = ["Registry"]

SPEC_NAMES = ("component.yaml", "component.yml")
_SHOWN = 8  # versions named in an error message


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no name for this uid (a container): still publish
        return "unknown"


def _note(name: str, version: str, entry: Any) -> str:
    message = entry.get("message", "") if isinstance(entry, dict) else ""
    return f"{name}@{version} is deprecated" + (f": {message}" if message else "")


class Registry:
    """Components shared by ``name@version`` in one store (see ``open_registry``)."""

    def __init__(self, store: RegistryStore, launchers: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.location = store.location
        self._launchers = launchers  # the launcher names a published spec may use (None: the installed ones)

    def __repr__(self) -> str:
        return f"Registry({self.location!r})"

    # -- publishing ---------------------------------------------------------------------------
    def _load(self, path: Path) -> "ComponentSpec":
        from ..spec import check_file

        launchers = self._launchers
        if launchers is None:
            from ..core.plugins import PluginError, get_plugin_manager

            try:
                launchers = get_plugin_manager().alias_table()
            except PluginError as exc:
                raise RegistryError(str(exc)) from None
        result = check_file(path, launchers)
        if result.spec is None:
            problems = "\n  ".join(str(d) for d in result.errors)
            raise RegistryError(f"{path}: not published: the spec is not valid:\n  {problems}")
        return result.spec

    def publish(self, spec_path: "str | Path | FunctionComponent", allow_external_links: bool = False) -> Published:
        """Store the spec at ``spec_path`` (a file, or a folder holding component.yaml) and its
        code as ``name@version``; a Python-function component (``@distcomp.component``, or
        ``FILE.py:FUNCTION``) is stored as ``distcomp.export`` writes it. The same content
        again is a no-op; other content under a published version is refused. A link to a file
        outside the code folder is refused unless ``allow_external_links`` (then its target is
        stored as a copy, and listed in ``Published.copied``). First, what interrupted
        publishes left is removed (``swept``)."""
        from ..errors import UsageError
        from ..function._resolve import as_component

        try:
            function = as_component(spec_path)
        except UsageError as exc:  # FILE.py:FUNCTION that does not import, or names no component
            raise RegistryError(str(exc)) from None
        if function is not None:
            return self._publish_function(function, allow_external_links)
        if not isinstance(spec_path, (str, os.PathLike)):
            raise RegistryError(f"expected a spec file, a component folder or a function component, got "
                                f"{type(spec_path).__name__}")
        source = Path(spec_path)
        if source.is_dir():
            source = next((source / n for n in SPEC_NAMES if (source / n).is_file()), source / SPEC_NAMES[0])
        spec = self._load(source)
        name = check_name(spec.name, f"{source}: ")
        if spec.version is None:
            raise RegistryError(f"{source}: {name} has no version; add one (e.g. `version: 1.0.0`) to publish it")
        version = _versions.canonical(str(spec.version))
        sweep = getattr(self.store, "sweep", None)  # optional: a store that can tell dead publishers' folders
        try:
            swept = tuple(sweep()) if sweep is not None else ()
            staged = self.store.stage(name, version)
        except OSError as exc:
            raise RegistryError(f"cannot write to the registry at {self.location}: {exc.strerror or exc}") from None
        try:
            snapshot = plan(spec, (staged, Path(self.location)), allow_external_links)  # registry in the code
            files = copy_into(snapshot, staged)
            manifest = Manifest(name, version, content_hash(files), snapshot.spec, snapshot.code, files,
                                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), _user(), summary(spec))
            with open(staged / MANIFEST, "x", encoding="utf-8") as f:
                f.write(json.dumps(manifest.as_json(), indent=1))
                f.flush()
                os.fsync(f.fileno())
            self._check_stored_spec(source, staged, snapshot.code, manifest)
            created = self.store.put(name, version, staged)
        except OSError as exc:
            raise RegistryError(f"cannot publish {name}@{version} to the registry at {self.location}: "
                                f"{exc.strerror or exc}") from None
        finally:
            remove_tree(staged)  # put moved it (or removed it) unless something failed first
        if not created:
            existing = self._stored(name, version)
            if existing.sha256 != manifest.sha256:
                raise RegistryError(f"{name}@{version} is already published with different content (sha256 "
                                    f"{existing.sha256[:12]}, yours {manifest.sha256[:12]}); a published version "
                                    "never changes: publish a new version")
        folder = self.store.folder(name, version)
        return Published(name, version, manifest.sha256, str(folder or f"{self.location} {name}/{version}"), created,
                         tuple(sorted(snapshot.external.items())), swept)

    def _publish_function(self, function: "FunctionComponent", allow_external_links: bool) -> Published:
        """Export the function (its spec and its project's code, as ``distcomp.export`` writes
        them) into a temporary folder and publish that: the registry holds what runs, the
        runner being distcomp's own (the decorator refuses a project with a ``distcomp``)."""
        from ..errors import UsageError
        from ..function._export import write

        where = f"{function.origin.file.name}:{function.origin.qualname}"
        if function.settings.version is None:
            raise RegistryError(f"{where}: {function.name} has no version; add one (e.g. "
                                f"@distcomp.component(version=\"1.0.0\")) to publish it")
        check_name(function.name, f"{where}: ")
        local = () if "://" in self.location else (Path(self.location),)  # a registry inside the project stays out
        with tempfile.TemporaryDirectory(prefix="distcomp-publish-") as tmp:
            folder = Path(tmp) / function.name
            try:
                write(function, folder, skip=local)
            except UsageError as exc:
                raise RegistryError(f"{where}: not published: {exc}") from None
            return self.publish(folder, allow_external_links)

    def _check_stored_spec(self, source: Path, staged: Path, code: str, manifest: Manifest) -> None:
        """The stored copy must load as it will be loaded from the registry, its code folder
        inside it (an absolute ``code:``, or one reached through a link, would point out)."""
        stored = self._load(staged / manifest.spec)
        if stored.code != (staged / code).resolve():
            raise RegistryError(f"{source}: code: must be a folder path relative to the spec, without symbolic "
                                f"links (it is {stored.code}); the stored copy would use another folder")

    # -- reading --------------------------------------------------------------------------------
    def _stored(self, name: str, version: str) -> Manifest:
        """The verified manifest of a version known to exist."""
        folder = self.store.folder(name, version)
        if folder is None:
            raise RegistryError(f"{name}@{version} vanished from the registry at {self.location}")
        manifest = read_manifest(folder, name, version)
        verify(folder, manifest)
        return manifest

    def _deprecations(self, name: str) -> Mapping[str, Any]:
        found = self.store.metadata(name).get("deprecated", {})
        return found if isinstance(found, dict) else {}

    def _ordered(self, name: str) -> list[str]:
        return sorted((v for v in self.store.versions(name) if _versions.info(v) is not None), key=_versions.sort_key)

    def resolve(self, ref: str | Reference) -> Resolved:
        """The stored version ``ref`` names, its content hash checked."""
        return self.describe(ref)[0]

    def describe(self, ref: str | Reference) -> tuple[Resolved, Manifest]:
        ref = parse_reference(ref) if isinstance(ref, str) else ref
        deprecated = self._deprecations(ref.name)
        if ref.kind == "exact":
            assert ref.version is not None
            version: str | None = ref.version
            folder = self.store.folder(ref.name, ref.version)
        else:
            folders, skip = self.store.versions(ref.name), set(deprecated)
            while True:  # a stray entry that is not a folder is passed over
                version = _versions.pick(folders, skip, ref)
                folder = self.store.folder(ref.name, version) if version else None
                if version is None or folder is not None:
                    break
                skip.add(version)
        if version is None or folder is None:
            raise self._missing(ref, deprecated)
        manifest = read_manifest(folder, ref.name, version)
        verify(folder, manifest)
        note = _note(ref.name, version, deprecated[version]) if version in deprecated else None
        return Resolved(ref.name, version, manifest.sha256, folder / manifest.spec, note), manifest

    def _missing(self, ref: Reference, deprecated: Mapping[str, Any]) -> RegistryError:
        where = f"the registry at {self.location}"
        ordered = self._ordered(ref.name)
        if not ordered:
            names = [n for n in self.names() if self._ordered(n)]
            if not names:
                return RegistryError(f"no component named {ref.name!r}: {where} is empty; publish one with "
                                     "`distcomp registry publish SPEC`")
            close = difflib.get_close_matches(ref.name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (it has: {', '.join(names[:_SHOWN])}" + (
                ", ...)" if len(names) > _SHOWN else ")")
            return RegistryError(f"no component named {ref.name!r} in {where}{hint}")
        usable = [v for v in reversed(ordered) if v not in deprecated]
        listed = ", ".join(usable[:_SHOWN]) + (f" and {len(usable) - _SHOWN} more" if len(usable) > _SHOWN else "")
        have = f"it has {listed}" if usable else "every version is deprecated"
        if ref.kind == "exact":
            return RegistryError(f"{ref.name}@{ref.version} is not published in {where} ({have})")
        hint = ""
        blocked = _versions.pick(ordered, (), ref)
        if blocked is not None:
            hint = f"; {blocked} matches but is deprecated: name it exactly ({ref.name}@{blocked}) to use it anyway"
        what = "has no usable version" if ref.kind == "latest" else f"has no version matching {ref.selector!r}"
        return RegistryError(f"{ref.name} {what} in {where} ({have}){hint}")

    def names(self) -> list[str]:
        from ._reference import NAME

        return [n for n in self.store.names() if NAME.match(n)]

    def versions(self, name: str) -> list[VersionInfo]:
        """Every published version of ``name``, lowest first."""
        deprecated = self._deprecations(check_name(name))
        out = []
        for v in self._ordered(name):
            entry = deprecated.get(v)
            note = None if v not in deprecated else entry.get("message", "") if isinstance(entry, dict) else ""
            out.append(VersionInfo(v, _versions.info(v)[1], note))  # type: ignore[index]
        return out

    def summaries(self, text: str = "") -> list[Summary]:
        """One Summary per component whose name, display name, description or tags contain
        ``text`` (any case); every component when ``text`` is empty."""
        needle = text.casefold()
        out = []
        for name in self.names():
            ordered = self._ordered(name)
            if not ordered:
                continue
            deprecated = self._deprecations(name)
            latest = _versions.pick(ordered, deprecated, Reference(name, "latest", "latest")) or ordered[-1]
            try:
                folder = self.store.folder(name, latest)
                info = read_manifest(folder, name, latest).summary if folder else {}
            except RegistryError:
                info = {}
            raw_tags = info.get("tags")
            tags = raw_tags if isinstance(raw_tags, dict) else {}
            item = Summary(name, latest, len(ordered), sum(v in deprecated for v in ordered),
                           str(info.get("display_name") or ""), str(info.get("description") or ""),
                           MappingProxyType({str(k): str(v) for k, v in tags.items()}))
            hay = " ".join([name, item.display_name, item.description, *item.tags.keys(), *item.tags.values()])
            if needle in hay.casefold():
                out.append(item)
        return out

    def search(self, text: str) -> list[Summary]:
        return self.summaries(text)

    def deprecate(self, ref: str | Reference, message: str = "", undo: bool = False) -> VersionInfo:
        """Mark an exact version deprecated (``latest`` and ranges skip it; naming it exactly
        still works, with a warning), or undo that. Concurrent updates are not lost."""
        ref = parse_reference(ref) if isinstance(ref, str) else ref
        if ref.kind != "exact" or ref.version is None:
            raise RegistryError(f"deprecate takes an exact version, such as {ref.name}@1.2.0 (not {ref.selector!r})")
        name, version = ref.name, ref.version
        if self.store.folder(name, version) is None:
            raise self._missing(ref, {})

        def change(data: dict[str, Any]) -> dict[str, Any]:
            found = data.get("deprecated")
            table = found if isinstance(found, dict) else {}
            if undo:
                table.pop(version, None)
            else:
                table[version] = {"message": message, "user": _user(),
                                  "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            return {**data, "deprecated": table}

        self.store.update_metadata(name, change)
        found = _versions.info(version)
        return VersionInfo(version, bool(found and found[1]), None if undo else message)
