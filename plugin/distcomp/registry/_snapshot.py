"""The snapshot a publish stores: the spec file, its code folder (and a conda file it names),
laid out as they are relative to each other so the stored spec loads unchanged.

What of the code folder is stored, and which links are refused: ``distcomp.base.codefolder``
(the rules every place code travels shares); its CodeFolderError is raised here as a RegistryError.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..base.codefolder import EXCLUDED, EXCLUDED_AT_TOP, MAX_BYTES, MAX_FILES, CodeFolderError, check_link, walk
from ..base.codefolder import folder_files as _folder_files
from ._manifest import FileEntry
from ._records import RegistryError

if TYPE_CHECKING:
    from ..spec import ComponentSpec

__all__ = ["EXCLUDED", "EXCLUDED_AT_TOP", "MAX_BYTES", "MAX_FILES", "Snapshot", "copy_into", "folder_files", "plan",
           "summary"]


@dataclass(frozen=True)
class Snapshot:
    root: Path  # the folder holding the spec and its code folder
    files: Mapping[str, Path]  # relative POSIX path in the snapshot -> the file to copy
    spec: str
    code: str
    external: Mapping[str, str] = field(default_factory=dict)  # stored path -> the outside file a link led to


def plan(spec: "ComponentSpec", skip: Iterable[Path] = (), allow_external_links: bool = False) -> Snapshot:
    """What publishing ``spec`` (loaded from a file) stores; folders in ``skip`` (the registry
    itself, when it lies inside the code folder) are left out. A link to a file outside the
    code folder is refused unless ``allow_external_links`` (then stored as a copy, and listed
    in ``Snapshot.external``)."""
    assert spec.source is not None
    spec_file, code = spec.source, spec.code
    if not code.is_dir():
        raise RegistryError(f"{spec_file}: code folder {code} does not exist; a published component carries its code")
    left_out = frozenset(p.resolve() for p in skip)
    try:
        return _plan(spec_file, code, spec, left_out, allow_external_links)
    except CodeFolderError as exc:
        raise RegistryError(str(exc)) from None


def _plan(spec_file: Path, code: Path, spec: "ComponentSpec", left_out: frozenset[Path],
          allow_external_links: bool) -> Snapshot:
    files, external = walk(code, spec_file, left_out, allow_external_links)
    extra: list[Path] = []
    conda = spec.environment.conda_file if spec.environment else None
    if conda and not os.path.isabs(conda) and "://" not in conda and (spec_file.parent / conda).is_file():
        path = Path(os.path.abspath(spec_file.parent / conda))  # where it is, not where a link leads
        if not (path.is_relative_to(code) and path.relative_to(code).as_posix() in files):
            linked = os.path.realpath(path) != str(path)  # the file, or a folder on its way, is a link
            if linked and (target := check_link(path, code, spec_file, left_out, allow_external_links)):
                external[str(path)] = target
            extra.append(path)
    root = Path(os.path.commonpath([spec_file.parent, code, *(p.parent for p in extra)]))
    stored = {(code / rel).relative_to(root).as_posix(): path for rel, path in files.items()}
    for path in (spec_file, *extra):
        stored[path.relative_to(root).as_posix()] = path
    notes = {Path(link).relative_to(root).as_posix(): target for link, target in external.items()}
    return Snapshot(root, stored, spec_file.relative_to(root).as_posix(), code.relative_to(root).as_posix(), notes)


def folder_files(code: Path, skip: Iterable[Path] = ()) -> dict[str, Path]:
    """The files of the code folder ``code`` a snapshot would store (relative path -> file), for
    a component with no spec file yet (a function component's project)."""
    try:
        return _folder_files(code, skip)
    except CodeFolderError as exc:
        raise RegistryError(str(exc)) from None


def copy_into(snapshot: Snapshot, dest: Path) -> dict[str, FileEntry]:
    """Copy the snapshot's files into the empty folder ``dest``, hashing them as they are
    written (each file synced to disk); returns the manifest's file entries."""
    entries: dict[str, FileEntry] = {}
    for rel, source in sorted(snapshot.files.items()):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with open(source, "rb") as src, open(target, "xb") as out:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
            executable = bool(os.fstat(src.fileno()).st_mode & 0o100)
        if executable:
            os.chmod(target, 0o755)
        entries[rel] = FileEntry(digest.hexdigest(), executable)
    return entries


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def summary(spec: "ComponentSpec") -> dict[str, Any]:
    """What ``list``, ``show`` and ``search`` print without loading the spec."""
    dist = spec.distribution
    return {
        "display_name": spec.display_name or "", "description": spec.description or "",
        "tags": {str(k): str(v) for k, v in spec.tags.items()},
        "launcher": dist.launcher, "nodes": dist.nodes, "processes_per_node": dist.processes_per_node,
        "inputs": {n: {"type": i.type, "optional": i.optional, "default": _plain(i.default),
                       "description": i.description or ""} for n, i in spec.inputs.items()},
        "outputs": {n: {"type": o.type, "description": o.description or ""} for n, o in spec.outputs.items()},
    }
