"""The built-in store: a folder, local or on a shared file system (scheme ``file``).

    ROOT/NAME/VERSION/           one published version, read-only: manifest.json, the spec, its code
    ROOT/NAME/.metadata.json     the deprecations of NAME (replaced atomically)
    ROOT/NAME/.metadata.lock     flock(2)ed around each metadata update
    ROOT/.staging/               versions being built, each named after its publisher (``_staging``);
                                 one whose publisher is gone is removed by the next publish

A version is built in ``.staging`` and renamed to ``NAME/VERSION`` in one ``rename(2)``,
atomic on one POSIX file system (NFS included); a directory is never renamed over a
non-empty one, so of several publishers of one version exactly one succeeds. Paths stay inside
ROOT: a NAME, VERSION or ``.staging`` that is a symbolic link is refused, never followed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from ..base.files import tree_usage
from ._fs import fsync_dir, make_read_only, remove_tree, write_json_atomic
from ._records import RegistryError
from ._staging import leftover, owner_prefix
from ._store import Metadata

__all__ = ["DirectoryStore", "directory_store"]

STAGING = ".staging"
METADATA = ".metadata.json"


def _part(text: str) -> str:
    """A name or version as one path component inside the root, never '..' or a path."""
    if not text or text in (".", "..") or text.startswith(".") or any(c in text for c in "/\\\0"):
        raise RegistryError(f"{text!r} cannot be a registry name or version")
    return text


class DirectoryStore:
    """Versions as read-only ``ROOT/NAME/VERSION`` folders (see the module's docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def _dirs(self, folder: Path) -> Iterator[str]:
        try:
            with os.scandir(folder) as entries:
                yield from (e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return

    def names(self) -> list[str]:
        return sorted(self._dirs(self.root))

    def versions(self, name: str) -> list[str]:
        # one listdir, no stat: this runs on every resolve, among thousands of versions
        try:
            return [n for n in os.listdir(self.root / _part(name)) if n[0] != "."]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _inside(self, path: Path, what: str) -> Path:
        """``path`` itself, refused when it is a symbolic link (it would lead out of the registry)."""
        if path.is_symlink():
            raise RegistryError(f"the registry at {self.root} holds {what} {path} as a symbolic link (to "
                                f"{os.readlink(path)}); the registry only uses its own folders: remove the link")
        return path

    def folder(self, name: str, version: str) -> Path | None:
        self._inside(self.root / _part(name), "the component folder")
        path = self._inside(self.root / name / _part(version), "the version folder")
        return path if path.is_dir() else None

    def stage(self, name: str, version: str) -> Path:
        staging = self._inside(self.root / STAGING, "its staging folder")
        staging.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=owner_prefix(f"{_part(name)}@{_part(version)}"), dir=staging))

    def sweep(self) -> list[str]:
        """Remove the staging folders no live publisher owns (``_staging.leftover``); one line
        per folder removed: NAME@VERSION, its files and size, why it was left over."""
        removed: list[str] = []
        try:
            with os.scandir(self._inside(self.root / STAGING, "its staging folder")) as entries:
                found = [(e.path, e.name) for e in entries]
        except (FileNotFoundError, NotADirectoryError):
            return removed
        for path, name in found:
            try:
                left = leftover(name, os.lstat(path).st_mtime)
            except FileNotFoundError:  # its publisher has just stored it
                continue
            if left is None:
                continue
            files, size = tree_usage(path)
            remove_tree(Path(path))
            if not os.path.lexists(path):
                removed.append(f"{left.label}: {files} file{'s' * (files != 1)}, {size / 1e6:.1f} MB ({left.reason})")
        return removed

    def put(self, name: str, version: str, folder: Path) -> bool:
        parent = self._inside(self.root / _part(name), "the component folder")
        target = parent / _part(version)
        try:
            make_read_only(folder, keep_top=True)
            parent.mkdir(exist_ok=True)
            os.rename(folder, target)
        except OSError as exc:
            remove_tree(folder)
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR) or os.path.lexists(target):
                return False
            raise RegistryError(f"cannot store {name}@{version} in the registry at {self.root}: "
                                f"{exc.strerror or exc}") from None
        os.chmod(target, 0o555)
        fsync_dir(parent)
        return True

    def metadata(self, name: str) -> Metadata:
        path = self.root / _part(name) / METADATA
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RegistryError(f"the registry's metadata of {name}, {path}, cannot be read "
                                f"({getattr(exc, 'strerror', None) or exc}); fix or remove it") from None
        if not isinstance(data, dict):
            raise RegistryError(f"the registry's metadata of {name}, {path}, is not a JSON object; fix or remove it")
        return data

    def update_metadata(self, name: str, change: Callable[[Metadata], Metadata]) -> Metadata:
        folder = self._inside(self.root / _part(name), "the component folder")
        folder.mkdir(parents=True, exist_ok=True)
        try:  # never through a link: opening one would create or lock a file outside the registry
            fd = os.open(folder / ".metadata.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise RegistryError(f"cannot lock {folder / '.metadata.lock'} ({exc.strerror}); it must be a plain "
                                "file of the registry: remove it") from None
        with open(fd, "r+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            data = change(self.metadata(name))
            write_json_atomic(folder / METADATA, data)
        return data


def directory_store(location: str) -> DirectoryStore:
    """The store of a plain path or a ``file://`` URI (``~`` is expanded, relative paths made
    absolute). ``_builtin`` registers it as the ``file`` scheme."""
    path = location[len("file://"):] if location.startswith("file://") else location
    if not path:
        raise RegistryError(f"registry location {location!r} names no folder")
    return DirectoryStore(Path(path).expanduser().absolute())

