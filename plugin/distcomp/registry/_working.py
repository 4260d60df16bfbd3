"""A job's own working copy of stored code: the ranks of a registry job never run in the
registry, so nothing a job does (``./lightning_logs``, a file rewritten in place, bytecode; as
root, read-only modes stop none of it) can change a stored version.

The copy holds the files the manifest lists, each hashed as it is copied and compared with the
manifest, so what runs is exactly what the hash covers, even if the store changed since the
spec was loaded. A plain copy, because it is the one safe and fast way on every file system:
a hard link shares the stored inode (``open(f, 'w')`` truncates the stored file), reflinks
exist on few file systems (not ext4), an overlay needs privileges. 100 small files: 18 ms of
CPU to copy and remove on ext4 (``benchmarks/registry.py`` measures it, and the whole run).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ._manifest import mismatch, read_manifest
from ._stored import stored_version

__all__ = ["WorkingCopy", "working_copy"]

_BYTECODE = "__pycache__"


@dataclass(frozen=True)
class WorkingCopy:
    """A copy of one stored version's files in ``folder``; ``code`` is its code folder there."""

    folder: Path
    code: Path
    files: tuple[str, ...]  # the copied files, relative POSIX paths in ``folder``

    def remove(self) -> list[str]:
        """Remove the copied files (changed or not), bytecode and the folders left empty; what
        else the job wrote there (``lightning_logs/``) stays. Returns those top-level entries."""
        top = str(self.folder)
        plain: dict[str, bool] = {"": True}  # folder -> no symbolic link on the way from ``top``

        def no_link(folder: str) -> bool:
            if folder not in plain:
                plain[folder] = no_link(os.path.dirname(folder)) and not os.path.islink(os.path.join(top, folder))
            return plain[folder]

        for rel in self.files:
            if not no_link(os.path.dirname(rel)):  # the job made a folder a link: never delete through it
                continue
            try:
                os.unlink(os.path.join(top, rel))
            except OSError:  # gone, or the job put a folder where a file was (or a file where a folder was)
                pass
        for folder, dirs, _names in os.walk(self.folder, topdown=False):
            if os.path.basename(folder) == _BYTECODE:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            try:
                os.rmdir(folder)  # only if empty
            except OSError:
                pass
        try:
            return sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return []


def _copy(source: str, target: str, executable: bool) -> str:
    """Copy one file, returning the SHA-256 of what was written."""
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(target, "xb") as out:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if executable:
        os.chmod(target, 0o755)
    return digest.hexdigest()


def _fresh(dest: Path) -> Path:
    """``dest``, or ``dest-2``, ``dest-3``, ... : the first that did not exist, now created (a
    run folder used again keeps what an earlier job left, and a copy never goes through it)."""
    for n in range(1, 1000):
        folder = dest if n == 1 else dest.with_name(f"{dest.name}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"{dest} and 998 folders named after it exist already; remove them")


def working_copy(code: str | os.PathLike[str], dest: Path) -> WorkingCopy | None:
    """A verified copy in a new folder ``dest`` (``dest-2``, ... when taken) of the stored
    version whose code folder is ``code``, or None when ``code`` is no stored code. A file that
    no longer matches the manifest raises the hash-mismatch RegistryError, and nothing of the
    copy is left."""
    version = stored_version(code)
    if version is None:
        return None
    manifest = read_manifest(version, version.parent.name, version.name)
    inside = Path(os.path.relpath(os.path.abspath(code), version))
    dest = _fresh(dest)
    made = {""}
    top, source = str(dest), str(version)  # plain strings: pathlib costs more than the copy of a small file
    try:
        for rel, entry in sorted(manifest.files.items()):
            parent = os.path.dirname(rel)
            if parent not in made:
                os.makedirs(os.path.join(top, parent), exist_ok=True)
                made.add(parent)
            try:
                same = _copy(os.path.join(source, rel), os.path.join(top, rel), entry.executable) == entry.sha256
            except FileNotFoundError:
                raise mismatch(manifest.name, manifest.version, version, f"{rel} is missing") from None
            if not same:
                raise mismatch(manifest.name, manifest.version, version, f"{rel} changed")
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return WorkingCopy(dest, dest / inside, tuple(sorted(manifest.files)))
