"""Is a path inside a stored version? Cheap (a few stats and one small JSON, no hashing), for
every ``distcomp run`` start: a job whose code folder is stored code runs with its bytecode
kept elsewhere (``stored_code_env``), so no ``.pyc`` beside the stored files is ever read.

A stored version is ``NAME/VERSION/`` holding a ``manifest.json`` that names that NAME and
VERSION (what ``read_manifest`` checks first); the folder of a plain project rarely is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

__all__ = ["pycache_prefix", "stored_code_env", "stored_version"]

_MANIFEST = "manifest.json"  # _manifest.MANIFEST, without importing its hashing on this path
_MAX_MANIFEST = 64 * 1024 * 1024


def _describes(folder: Path) -> bool:
    try:
        with open(folder / _MANIFEST, "rb") as f:
            data = json.loads(f.read(_MAX_MANIFEST + 1))
    except (OSError, ValueError):
        return False
    return (isinstance(data, dict) and data.get("format") == 1
            and (data.get("name"), data.get("version")) == (folder.parent.name, folder.name))


def stored_version(path: str | os.PathLike[str]) -> Path | None:
    """The stored version folder (``ROOT/NAME/VERSION``) that ``path`` lies in, or None."""
    here = Path(os.path.abspath(path))
    for folder in (here, *here.parents):
        if os.path.isfile(folder / _MANIFEST) and _describes(folder):
            return folder
    return None


def pycache_prefix(env: Mapping[str, str] = os.environ) -> str:
    """Where ranks of a registry job keep bytecode (``PYTHONPYCACHEPREFIX``): a per-user cache
    outside any registry, ``$XDG_CACHE_HOME/distcomp/pycache`` (default ``~/.cache/...``), so
    bytecode beside the stored files is never read, and torch is compiled once, not per rank."""
    cache = env.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(cache), "distcomp", "pycache")


def stored_code_env(code: str | os.PathLike[str], env: Mapping[str, str],
                    spec_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` for the ranks of a job whose code folder is ``code``. Stored code gets
    ``PYTHONPYCACHEPREFIX=pycache_prefix()``: Python then neither reads nor writes
    ``__pycache__`` beside the stored files (no hash covers bytecode; as root, Python would
    write it there). An inherited ``PYTHONDONTWRITEBYTECODE`` is dropped, or the empty cache
    would make every rank recompile torch (seconds); one the spec sets stays."""
    out = dict(env)
    if stored_version(code) is not None:
        out["PYTHONPYCACHEPREFIX"] = pycache_prefix(env)
        if "PYTHONDONTWRITEBYTECODE" not in (spec_env or {}):
            out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out
