"""Is a path inside a stored version, or a registry? Cheap (a few stats and one small JSON, no
hashing), for every ``distcomp run`` start: a job whose code folder is stored code runs in a
copy (``_working``), and a rank started in stored code all the same (``prepare`` called on
its own) keeps its bytecode elsewhere (``stored_code_env``), so no ``.pyc`` beside the stored
files is ever read; no run folder or output may lie in a registry (``inside_store``).

A stored version is ``NAME/VERSION/`` holding a ``manifest.json`` that names that NAME and
VERSION (what ``read_manifest`` checks first); the folder of a plain project rarely is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

__all__ = ["default_location", "inside_store", "pycache_prefix", "stored_code_env", "stored_version"]

_MANIFEST = "manifest.json"  # _manifest.MANIFEST, without importing its hashing on this path
_STAGING = ".staging"  # _directory.STAGING: every directory store that was published to has one
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


def _holds_versions(root: Path) -> bool:
    """Whether some ``root/NAME/VERSION`` is a stored version (stops at the first one)."""
    try:
        names = [e.path for e in os.scandir(root) if e.name[:1] != "." and e.is_dir(follow_symlinks=False)]
        for name in names:
            with os.scandir(name) as versions:
                if any(v.is_dir(follow_symlinks=False) and _describes(Path(v.path)) for v in versions):
                    return True
    except OSError:
        pass
    return False


def default_location() -> str:
    """``$DISTCOMP_REGISTRY``, else ``$XDG_DATA_HOME/distcomp/registry`` (default
    ``~/.local/share/distcomp/registry``)."""
    given = os.environ.get("DISTCOMP_REGISTRY", "").strip()
    if given:
        return given
    data = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "distcomp", "registry")


def inside_store(path: str | os.PathLike[str]) -> Path | None:
    """The folder of a component registry that ``path`` (existing or not, links resolved) lies
    in, or None. A job must never write there: a stored version that changes fails its hash,
    and a stray ``NAME/VERSION`` folder breaks resolving NAME. A registry is the configured
    one (``$DISTCOMP_REGISTRY``, else the user's), or a folder holding a stored version or
    ``.staging`` beside stored versions. A few stats per parent folder: cheap for every run."""
    here = Path(os.path.realpath(path))
    configured = default_location()
    roots = [] if "://" in configured else [Path(os.path.realpath(os.path.expanduser(configured)))]
    if any(here.is_relative_to(root) for root in roots):
        return next(root for root in roots if here.is_relative_to(root))
    for folder in (here, *here.parents):
        if os.path.isfile(folder / _MANIFEST) and _describes(folder):
            return folder.parent.parent
        if os.path.isdir(folder / _STAGING) and _holds_versions(folder):
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
