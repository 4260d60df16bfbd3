"""``manifest.json``: what a stored version holds, and the check that it still holds it.

The content hash is the SHA-256 of a canonical listing, one line per file sorted by path:
``SHA256 x|- PATH`` (``x``: executable). Publishing the same files gives the same hash on
any machine; the published time, the user and the summary are not part of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..base.codefolder import safe_path
from ._records import RegistryError

__all__ = ["MANIFEST", "FileEntry", "Manifest", "content_hash", "hash_file", "read_manifest", "safe_path",
           "verify"]

MANIFEST = "manifest.json"
FORMAT = 1
_HEX = re.compile(r"[0-9a-f]{64}\Z")
_MAX_MANIFEST = 64 * 1024 * 1024


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    executable: bool = False


@dataclass(frozen=True)
class Manifest:
    name: str
    version: str
    sha256: str  # content_hash(files)
    spec: str  # the spec file, relative to the version's folder
    code: str  # the spec's code folder, relative to the version's folder ("." for the folder itself)
    files: Mapping[str, FileEntry]
    published: str = ""  # UTC, ISO 8601
    user: str = ""
    summary: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # for list, show, search

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "name": self.name, "version": self.version, "sha256": self.sha256,
                "spec": self.spec, "code": self.code, "published": self.published, "user": self.user,
                "files": {p: {"sha256": e.sha256, "executable": e.executable} for p, e in sorted(self.files.items())},
                "summary": dict(self.summary)}


def content_hash(files: Mapping[str, FileEntry]) -> str:
    listing = "".join(f"{e.sha256} {'x' if e.executable else '-'} {p}\n" for p, e in sorted(files.items()))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def hash_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _damaged(name: str, version: str, folder: Path, problem: str) -> RegistryError:
    return RegistryError(f"stored {name}@{version} at {folder} has a damaged {MANIFEST} ({problem}); the registry "
                         "copy was modified after publishing — republishing the same version is refused; publish a "
                         "new version or restore it")


def mismatch(name: str, version: str, folder: Path, what: str) -> RegistryError:
    return RegistryError(f"stored {name}@{version} at {folder} does not match its content hash: {what}; the registry "
                         "copy was modified after publishing — republishing the same version is refused; publish a "
                         "new version or restore it")


def read_manifest(folder: Path, name: str, version: str) -> Manifest:
    """The manifest of the stored version in ``folder``, checked for shape and self-consistency
    (its file listing gives its hash); the files themselves are checked by ``verify``."""
    try:
        with open(folder / MANIFEST, "rb") as f:
            raw = f.read(_MAX_MANIFEST + 1)
        data = json.loads(raw)
    except FileNotFoundError:
        raise mismatch(name, version, folder, f"{MANIFEST} is missing") from None
    except (OSError, ValueError) as exc:
        raise _damaged(name, version, folder, f"unreadable: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _damaged(name, version, folder, f"not a format {FORMAT} manifest")
    if (data.get("name"), data.get("version")) != (name, version):
        raise _damaged(name, version, folder, f"it describes {data.get('name')}@{data.get('version')}")
    raw_files = data.get("files")
    if not isinstance(raw_files, dict):
        raise _damaged(name, version, folder, "no file list")
    files: dict[str, FileEntry] = {}
    for path, entry in raw_files.items():
        if (not safe_path(path) or path == MANIFEST or not isinstance(entry, dict)
                or not _HEX.match(str(entry.get("sha256"))) or not isinstance(entry.get("executable", False), bool)):
            raise _damaged(name, version, folder, f"bad file entry {path!r}")
        files[path] = FileEntry(entry["sha256"], entry.get("executable", False))
    spec, code = data.get("spec"), data.get("code")
    if not isinstance(spec, str) or spec not in files or not isinstance(code, str) \
            or not (code == "." or safe_path(code)):
        raise _damaged(name, version, folder, "bad spec or code path")
    if data.get("sha256") != content_hash(files):
        raise mismatch(name, version, folder, f"{MANIFEST} changed (its file list no longer gives its sha256)")
    summary = data.get("summary")
    return Manifest(name, version, data["sha256"], spec, code, MappingProxyType(files), str(data.get("published", "")),
                    str(data.get("user", "")), MappingProxyType(summary if isinstance(summary, dict) else {}))


def _walk(folder: Path, prefix: str, found: dict[str, bool], odd: list[str]) -> None:
    """Every plain file under ``folder`` -> executable; symlinks and special files into ``odd``."""
    with os.scandir(folder) as entries:
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_symlink():
                odd.append(rel)
            elif entry.is_dir():
                _walk(Path(entry.path), rel + "/", found, odd)
            elif entry.is_file():
                found[rel] = bool(entry.stat().st_mode & 0o100)
            else:
                odd.append(rel)


def verify(folder: Path, manifest: Manifest) -> None:
    """Raise the hash-mismatch RegistryError unless ``folder`` holds exactly the manifest's
    files with their content. Nothing else is allowed, ``__pycache__`` included: Python would
    run a ``.pyc`` found there instead of the hashed source (ranks of registry jobs keep their
    bytecode elsewhere, see ``pycache_prefix``)."""
    found: dict[str, bool] = {}
    odd: list[str] = []
    try:
        _walk(folder, "", found, odd)
    except OSError as exc:
        raise mismatch(manifest.name, manifest.version, folder, f"it cannot be read ({exc.strerror})") from None
    found.pop(MANIFEST, None)
    extra = sorted(set(found) - set(manifest.files)) + sorted(odd)
    missing = sorted(set(manifest.files) - set(found))
    problems = [f"{p} is missing" for p in missing] + [f"{p} was added" for p in extra]
    for path, entry in sorted(manifest.files.items()):
        if path in found and not problems:
            try:
                same = hash_file(folder / path) == entry.sha256
            except OSError as exc:
                problems.append(f"{path} cannot be read ({exc.strerror})")
                continue
            if not same:
                problems.append(f"{path} changed")
            elif found[path] != entry.executable:
                problems.append(f"{path} changed (its executable bit)")
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise mismatch(manifest.name, manifest.version, folder, ", ".join(problems[:3]) + more)
