"""The entry points of one group, kept between processes, so that ``distcomp run`` reads no
distribution's metadata and imports no ``importlib.metadata`` (15-50 ms) when nothing changed.

One file per ``sys.path`` and group: ``$XDG_CACHE_HOME/distcomp/entry-points/GROUP-CRC.json``
(default ``~/.cache``). Its key, checked on every read: the group, ``sys.path``, and for each
path entry its (mtime, inode), since pip adds or removes a ``.dist-info`` folder in it on every
install, upgrade and uninstall, which changes the folder's mtime, plus the mtime of each
``entry_points.txt`` that declared the group (an edit in place). A file that cannot be read,
does not parse or holds another key is ignored and written again: the cache never raises.
Not kept: a key holding an mtime under ``RACY_S`` old (a change within the file system's mtime
step, as git's racy-clean rule), and any answer while another finder of distributions than the
path's is on ``sys.meta_path`` (not keyed here). Not seen: an ``entry_points.txt`` written into
an existing ``.dist-info`` that had none (no installer does that)."""

from __future__ import annotations

import binascii
import json
import os
import sys
import time
from types import SimpleNamespace
from typing import Any, Iterable, Sequence

from ..base.cachedir import cache_dir

__all__ = ["CachedEntryPoint", "RACY_S", "cache_file", "declaring", "entry_points", "other_finders"]

VERSION = 1  # the file's format
RACY_S = 2.0  # seconds: a path entry changed more recently than this is not cached


class CachedEntryPoint:
    """What the plugin manager reads of an ``importlib.metadata.EntryPoint`` (name, value,
    group, ``dist.name``/``dist.version``, ``load()``), made without importing it. A plain class:
    a dataclass's generated methods cost every start ~0.5 ms."""

    __slots__ = ("name", "value", "group", "dist")

    def __init__(self, name: str, value: str, group: str, dist: tuple[str, str] | None) -> None:
        self.name, self.value, self.group = name, value, group
        self.dist = SimpleNamespace(name=dist[0], version=dist[1]) if dist is not None else None

    def load(self) -> Any:
        """``EntryPoint.load``: import the module, then follow the dotted attribute."""
        import functools
        import importlib
        import re

        # importlib.metadata.EntryPoint.pattern
        match = re.match(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$", self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r}: {self.value!r} is no module[:attribute]")
        module = importlib.import_module(match.group("module"))
        return functools.reduce(getattr, filter(None, (match.group("attr") or "").split(".")), module)

    def __repr__(self) -> str:
        return f"CachedEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def entry_points(group: str) -> Sequence[Any]:
    """``importlib.metadata.entry_points(group=group)``, from the cache when its key still holds."""
    if other_finders():
        return _importlib(group)
    path = cache_file(group)
    found = _read(path, group)
    if found is not None:
        return found
    files = declaring(group)
    eps = _importlib(group) if files is None or files else ()
    if files is not None:  # what it could not look into (a zip, an egg) is not keyed: asked each time
        _write(path, group, files, eps)
    return eps


def cache_file(group: str) -> str:
    """Where the entries of ``group`` under this ``sys.path`` are kept."""
    crc = binascii.crc32("\0".join(sys.path).encode("utf-8", "surrogateescape"))
    return cache_dir("entry-points", f"{group}-{crc:08x}.json")


def declaring(group: str) -> list[str] | None:
    """Every ``entry_points.txt`` of a ``*.dist-info`` or ``*.egg-info`` on ``sys.path`` with a
    ``[group]`` section (read as importlib.metadata reads it); None where this cannot tell: a zip
    or egg on the path, or a folder it may not list."""
    found: list[str] = []
    for entry in sys.path:
        root = entry or "."
        if os.path.basename(root).lower().endswith(".egg"):
            return None
        try:
            names = os.listdir(root)
        except OSError:
            if os.path.exists(root):  # a zip file, or a folder it may not list
                return None
            continue
        for name in names:
            if not name.lower().endswith((".dist-info", ".egg-info")):
                continue
            file = os.path.join(root, name, "entry_points.txt")
            try:
                with open(file, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:  # none (most distributions), or an .egg-info file
                continue
            for line in text.splitlines():  # importlib.metadata's Sectioned.read
                line = line.strip()
                if line.startswith("[") and line.endswith("]") and line.strip("[]") == group:
                    found.append(file)
                    break
    return found


def other_finders() -> bool:
    """Whether a finder of distributions other than the path's is on ``sys.meta_path``."""
    from importlib.machinery import PathFinder

    return any(getattr(f, "find_distributions", None) is not None and f is not PathFinder for f in sys.meta_path)


def _importlib(group: str) -> Sequence[Any]:
    from importlib.metadata import entry_points as found

    return tuple(found(group=group))


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path or ".")
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ino]


def _key(group: str, files: Iterable[str]) -> dict[str, Any]:
    return {"version": VERSION, "group": group, "path": list(sys.path),
            "stats": [_stat(entry) for entry in sys.path], "files": {f: _stat(f) for f in files}}


def _read(path: str, group: str) -> list[CachedEntryPoint] | None:
    """The cached entries, or None: no file, a broken one, or one whose key no longer holds."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc["key"] != _key(group, doc["key"]["files"]):
            return None
        return [CachedEntryPoint(str(name), str(value), group, None if dist is None else (str(dist[0]), str(dist[1])))
                for name, value, dist in doc["entries"]]
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):  # missing, corrupt: asked again
        return None


def _write(path: str, group: str, files: Sequence[str], eps: Sequence[Any]) -> None:
    key = _key(group, files)
    stats = [s for s in (*key["stats"], *key["files"].values()) if s is not None]
    if any(mtime > time.time_ns() - RACY_S * 1e9 for mtime, _ino in stats):
        return  # changed just now: a second change within the mtime's step would go unseen
    entries = [[ep.name, ep.value, None if getattr(ep, "dist", None) is None else [ep.dist.name, ep.dist.version]]
               for ep in eps]
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"  # hosts sharing a home: their own
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"key": key, "entries": entries}, f)
        os.replace(tmp, path)  # whole or not at all: a reader never sees half a file
    except (OSError, TypeError, ValueError):  # a read-only home, a full disk: simply not cached
        try:
            os.unlink(tmp)
        except OSError:
            pass
