"""Is a path inside a stored version, or a registry? Cheap (a few stats and one small JSON, no
hashing), for every ``distcomp run`` start: a job whose code folder is stored code runs in a
copy (``_working``), and a rank started in stored code all the same (``prepare`` called on
its own) keeps its bytecode elsewhere (``stored_code_env``), so no ``.pyc`` beside the stored
files is ever read; no run folder or output may lie in a registry (``inside_store``).

A stored version is ``NAME/VERSION/`` holding a ``manifest.json`` that names that NAME and
VERSION (what ``read_manifest`` checks first); the folder of a plain project rarely is.
"""

from __future__ import annotations

import os
from typing import Mapping

from ..base.cachedir import cache_dir
# the registry's places are core (``distcomp.base.stores``): jobs and exports refuse them without the registry
from ..base.stores import default_location, inside_store, stored_version

__all__ = ["default_location", "inside_store", "pycache_prefix", "stored_code_env", "stored_version"]


def pycache_prefix(env: Mapping[str, str] = os.environ) -> str:
    """Where ranks of a registry job keep bytecode (``PYTHONPYCACHEPREFIX``): a per-user cache
    outside any registry, ``$XDG_CACHE_HOME/distcomp/pycache`` (default ``~/.cache/...``), so
    bytecode beside the stored files is never read, and torch is compiled once, not per rank."""
    return cache_dir("pycache", env=env)


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
