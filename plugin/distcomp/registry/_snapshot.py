"""The snapshot a publish stores: the spec file, its code folder (and a conda file it names),
laid out as they are relative to each other so the stored spec loads unchanged.

Left out, anywhere in the code folder: version-control and tool folders (``.git``, ``.hg``,
``.svn``, ``.venv``, ``__pycache__``, ``.pytest_cache``, ``.mypy_cache``, ``.ruff_cache``,
``.ipynb_checkpoints``, ``.tox``), ``*.pyc``, ``.DS_Store`` and ``.env`` (local secrets must
not reach a shared registry); at its top only, what running
it writes (``runs/``, ``mlruns/``, ``outputs/``, ``mlflow.db``). A symbolic link to a file is
stored as a copy of that file; a link to a folder, or one that leads nowhere, is refused.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ._manifest import FileEntry, safe_path
from ._records import RegistryError

if TYPE_CHECKING:
    from ..spec import ComponentSpec

__all__ = ["EXCLUDED", "EXCLUDED_AT_TOP", "MAX_BYTES", "MAX_FILES", "Snapshot", "copy_into", "plan", "summary"]

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


def _code_files(code: Path, spec_file: Path, skip: frozenset[Path]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    size = 0
    for folder, dirs, names in os.walk(code):
        here = Path(folder)
        top = here == code
        for name in list(dirs):
            path = here / name
            if name in EXCLUDED or (top and name in EXCLUDED_AT_TOP) or path in skip:
                dirs.remove(name)
            elif path.is_symlink():
                raise RegistryError(f"{spec_file}: the code folder holds a symbolic link to a folder, {path}; the "
                                    "registry stores plain files: put the folder itself there, or remove the link")
        for name in names:
            path = here / name
            if name in EXCLUDED or name.endswith(".pyc") or (top and name in EXCLUDED_AT_TOP):
                continue
            if not path.is_file():
                what = "a symbolic link that leads nowhere" if path.is_symlink() else "not a regular file"
                raise RegistryError(f"{spec_file}: {path} in the code folder is {what}; remove it to publish")
            rel = path.relative_to(code).as_posix()
            if not safe_path(rel):
                raise RegistryError(f"{spec_file}: cannot publish {str(path)!r}: control characters in its name")
            out[rel] = path
            size += path.stat().st_size
            if len(out) > MAX_FILES or size > MAX_BYTES:
                raise RegistryError(f"{spec_file}: the code folder {code} holds more than {MAX_FILES} files or "
                                    f"{MAX_BYTES >> 20} MiB; the registry stores code, not data: point code: at "
                                    "the code only")
    return out


def plan(spec: "ComponentSpec", skip: Iterable[Path] = ()) -> Snapshot:
    """What publishing ``spec`` (loaded from a file) stores; folders in ``skip`` (the registry
    itself, when it lies inside the code folder) are left out."""
    assert spec.source is not None
    spec_file, code = spec.source, spec.code
    if not code.is_dir():
        raise RegistryError(f"{spec_file}: code folder {code} does not exist; a published component carries its code")
    extra = []
    conda = spec.environment.conda_file if spec.environment else None
    if conda and not os.path.isabs(conda) and "://" not in conda and (spec_file.parent / conda).is_file():
        extra.append((spec_file.parent / conda).resolve())
    root = Path(os.path.commonpath([spec_file.parent, code, *(p.parent for p in extra)]))
    left_out = frozenset(p.resolve() for p in skip)
    files = {(code.relative_to(root) / rel).as_posix(): path
             for rel, path in _code_files(code, spec_file, left_out).items()}
    for path in (spec_file, *extra):
        files[path.relative_to(root).as_posix()] = path
    code_rel = code.relative_to(root).as_posix()
    return Snapshot(root, files, spec_file.relative_to(root).as_posix(), code_rel)


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
