"""What PyYAML made of a text (a spec's parse), or the text it made of a value (a function
component's spec), kept between processes as Python keeps a module's bytecode:
``$XDG_CACHE_HOME/distcomp/yaml/KIND/TAG/CRC-LEN.marshal`` (default ``~/.cache``; TAG names the
interpreter).

Importing PyYAML costs every process that loads a spec ~13-16 ms (its reader compiles a large
Unicode regex), more than the parse of a spec itself: ~10 % of ``distcomp run``'s own start and
of an export. A spec is loaded again and again unchanged (each run, each node agent, each export
of one function), so its parse is kept. An entry holds the whole content it answers for and is
used for that very content only, made by the very same code: the key is the (mtime, inode, size)
of PyYAML's ``__init__.py`` (pip replaces it on every install) and of the caller's own module
files. A file that cannot be read, or holds another key or content, is ignored and replaced; the
cache never raises. Nothing is written where Python writes no bytecode
(``PYTHONDONTWRITEBYTECODE``, ``-B``); ``DISTCOMP_YAML_CACHE=off`` turns all of it off. Past
``LIMIT`` entries of a kind, the older half goes (edited specs leave old texts behind).
Stdlib only, and none of it imports PyYAML."""

from __future__ import annotations

import binascii
import marshal
import os
import sys

from .cachedir import cache_dir

TYPE_CHECKING = False  # no typing import on this path; mypy reads True
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ENV", "LIMIT", "MISS", "entry_file", "get", "key", "put"]

ENV = "DISTCOMP_YAML_CACHE"  # "off": PyYAML every time
LIMIT = 512  # entries kept of each kind (one per content seen; a few KB each)
FORMAT = 1  # the entry's layout
MISS = object()  # what ``get`` returns when nothing is kept
_yaml: str | None = None  # PyYAML's __init__.py ("" where there is none), looked up once a process


def key(*files: str) -> tuple[Any, ...] | None:
    """What the cached answer depends on besides the content: PyYAML and ``files`` (the caller's
    own modules), as they are now; None where the cache is off or one cannot be found."""
    if os.environ.get(ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    global _yaml
    if _yaml is None:
        from importlib.machinery import PathFinder

        found = PathFinder.find_spec("yaml")  # where `import yaml` would load it from, without importing it
        _yaml = (found.origin or "") if found is not None else ""
    stats: list[tuple[str, int, int, int]] = []
    for path in (_yaml, *files):
        if not path:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        stats.append((path, st.st_mtime_ns, st.st_ino, st.st_size))
    return (FORMAT, *stats)


def entry_file(kind: str, content: bytes) -> str:
    """Where the answer for ``content`` of ``kind`` is kept."""
    name = f"{binascii.crc32(content):08x}-{len(content)}.marshal"
    return cache_dir("yaml", kind, sys.implementation.cache_tag or "python", name)


def get(kind: str, content: bytes, cache_key: tuple[Any, ...] | None) -> Any:
    """The answer kept for ``content`` under ``cache_key``, or MISS."""
    if cache_key is None:
        return MISS
    try:
        with open(entry_file(kind, content), "rb") as f:
            stored_key, stored, value = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):  # none yet, or broken: made again, then replaced
        return MISS
    return value if stored_key == cache_key and stored == content else MISS


def put(kind: str, content: bytes, cache_key: tuple[Any, ...] | None, value: Any) -> None:
    """Keep ``value`` as the answer for ``content``; quietly not where it cannot be (the cache is
    off, bytecode is not written, marshal cannot hold a value such as a timestamp, no disk)."""
    if cache_key is None or sys.dont_write_bytecode:
        return
    try:
        blob = marshal.dumps((cache_key, content, value))
    except ValueError:
        return
    from ..agent.shared import write_atomic  # as base.files has it: a miss only

    path = entry_file(kind, content)
    try:
        write_atomic(path, blob)  # whole or not at all: a reader never sees half an entry
        _prune(os.path.dirname(path))
    except OSError:  # a read-only home, a full disk: made again next time
        pass


def _prune(folder: str) -> None:
    """Past LIMIT entries, remove the older half (by mtime)."""
    names = [n for n in os.listdir(folder) if n.endswith(".marshal")]
    if len(names) <= LIMIT:
        return
    aged = []
    for name in names:
        try:
            aged.append((os.stat(os.path.join(folder, name)).st_mtime_ns, name))
        except OSError:
            continue
    for _mtime, name in sorted(aged)[: len(aged) - LIMIT // 2]:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
