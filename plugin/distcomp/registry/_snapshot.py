"""The snapshot a publish stores: the spec file, its code folder (and a conda file it names),
laid out as they are relative to each other so the stored spec loads unchanged.

Left out, anywhere in the code folder: version-control and tool folders (``.git``, ``.hg``,
``.svn``, ``.venv``, ``__pycache__``, ``.pytest_cache``, ``.mypy_cache``, ``.ruff_cache``,
``.ipynb_checkpoints``, ``.tox``), ``*.pyc``, ``.DS_Store`` and ``.env`` (local secrets must
not reach a shared registry); at its top only, what running
it writes (``runs/``, ``mlruns/``, ``outputs/``, ``mlflow.db``); and what the code folder's
``.gitignore`` and ``.distcompignore`` files leave out (``distcomp._ignore``).

A symbolic link to a file in the code folder is stored as a copy of that file. Refused: a
link to a file outside the code folder (it would copy whatever it leads to, ``/etc/passwd``
or a key, into a shared registry) unless the publisher allows it, a link to a file publishing
leaves out (``.env``), a link to a folder, a loop, a link that leads nowhere.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .._files import code_file_problem
from .._ignore import Ignores
from ._manifest import FileEntry, safe_path
from ._records import RegistryError

if TYPE_CHECKING:
    from ..spec import ComponentSpec

__all__ = ["EXCLUDED", "EXCLUDED_AT_TOP", "MAX_BYTES", "MAX_FILES", "Snapshot", "copy_into", "folder_files", "plan",
           "summary"]

EXCLUDED = frozenset({".git", ".hg", ".svn", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                      ".ipynb_checkpoints", ".tox", ".DS_Store", ".env"})
EXCLUDED_AT_TOP = frozenset({"runs", "mlruns", "outputs", "mlflow.db"})
MAX_FILES = 10_000
MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class Snapshot:
    root: Path  # the folder holding the spec and its code folder
    files: Mapping[str, Path]  # relative POSIX path in the snapshot -> the file to copy
    spec: str
    code: str
    external: Mapping[str, str] = field(default_factory=dict)  # stored path -> the outside file a link led to


def _left_out(rel: str) -> bool:
    """Whether the walk below leaves out the file at ``rel`` (relative to the code folder)."""
    parts = rel.split("/")
    return (any(p in EXCLUDED for p in parts) or parts[-1].endswith(".pyc")
            or (len(parts) > 1 and parts[0] in EXCLUDED_AT_TOP) or rel in EXCLUDED_AT_TOP)


def _link(path: Path, code: Path, spec_file: Path, skip: frozenset[Path], allow_external: bool) -> str | None:
    """Check the symbolic link ``path`` to a file before its target is stored as a copy: it
    must stay in the code folder (``allow_external``: anywhere; returns its target then, for
    the publisher to be told) and lead to a file the snapshot would keep."""
    try:
        os.stat(path)
    except OSError as exc:
        what = (f"a symbolic link loop ({path.name} -> {os.readlink(path)})" if exc.errno == errno.ELOOP
                else "a symbolic link that leads nowhere" if exc.errno == errno.ENOENT
                else f"a symbolic link that cannot be followed ({exc.strerror})")
        raise RegistryError(f"{spec_file}: {path} in the code folder is {what}; remove it to publish") from None
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(code) or any(target.is_relative_to(s) for s in skip):
        if not allow_external:
            raise RegistryError(f"{spec_file}: {path} is a symbolic link to {target}, outside the code folder; copy "
                                "the file in, or pass --allow-external-links")
        return str(target)
    if _left_out(target.relative_to(code).as_posix()):
        raise RegistryError(f"{spec_file}: {path} is a symbolic link to {target}, which publishing leaves out "
                            "(tool folders, bytecode, .env, what a run writes); copy the file in if it belongs "
                            "in the component, or remove the link")
    return None


def _code_files(code: Path, spec_file: Path, skip: frozenset[Path],
                allow_external: bool) -> tuple[dict[str, Path], dict[str, str]]:
    """The files to store (relative path -> file) and the links to outside stored as copies
    (the link -> its target)."""
    out: dict[str, Path] = {}
    external: dict[str, str] = {}
    size = 0
    rules = {code: Ignores.at(code)}
    for folder, dirs, names in os.walk(code):
        here = Path(folder)
        top = here == code
        ignores = rules.pop(here)
        for name in list(dirs):
            path = here / name
            if (name in EXCLUDED or (top and name in EXCLUDED_AT_TOP) or path in skip
                    or ignores.ignored(path, is_dir=not path.is_symlink())):
                dirs.remove(name)
            elif path.is_symlink():
                raise RegistryError(f"{spec_file}: the code folder holds a symbolic link to a folder, {path}; the "
                                    "registry stores plain files: put the folder itself there, or remove the link")
            else:
                rules[path] = ignores.enter(path)
        for name in names:
            path = here / name
            if (name in EXCLUDED or name.endswith(".pyc") or (top and name in EXCLUDED_AT_TOP)
                    or ignores.ignored(path, is_dir=False)):
                continue
            rel = path.relative_to(code).as_posix()
            if not safe_path(rel):
                raise RegistryError(f"{spec_file}: cannot publish {str(path)!r}: control characters in its name")
            target = _link(path, code, spec_file, skip, allow_external) if path.is_symlink() else None
            special = code_file_problem(path)
            if special:
                raise RegistryError(f"{spec_file}: {special}")
            if not path.is_file():
                raise RegistryError(f"{spec_file}: {path} in the code folder is not a regular file; remove it to "
                                    "publish")
            if target is not None:
                external[str(path)] = target
            out[rel] = path
            size += path.stat().st_size
            if len(out) > MAX_FILES or size > MAX_BYTES:
                raise RegistryError(f"{spec_file}: the code folder {code} holds more than {MAX_FILES} files or "
                                    f"{MAX_BYTES >> 20} MiB; the registry stores code, not data: point code: at "
                                    "the code only")
    return out, external


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
    files, external = _code_files(code, spec_file, left_out, allow_external_links)
    extra: list[Path] = []
    conda = spec.environment.conda_file if spec.environment else None
    if conda and not os.path.isabs(conda) and "://" not in conda and (spec_file.parent / conda).is_file():
        path = Path(os.path.abspath(spec_file.parent / conda))  # where it is, not where a link leads
        if not (path.is_relative_to(code) and path.relative_to(code).as_posix() in files):
            linked = os.path.realpath(path) != str(path)  # the file, or a folder on its way, is a link
            if linked and (target := _link(path, code, spec_file, left_out, allow_external_links)):
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
    code = Path(os.path.abspath(code))
    if not code.is_dir():
        raise RegistryError(f"code folder {code} does not exist")
    return _code_files(code, code, frozenset(Path(os.path.abspath(p)) for p in skip), False)[0]


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
