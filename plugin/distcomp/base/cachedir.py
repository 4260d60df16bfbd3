"""Where distcomp keeps its per-user cache: ``$XDG_CACHE_HOME/distcomp`` (default
``~/.cache/distcomp``). One rule for every cache in it (the records' compiled methods, entry
points, function specs, registry bytecode, the kept MLflow store); imports nothing but ``os``,
as the first of them is read at every start."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # no typing import at start (base/methodcache reads this first); mypy reads True
if TYPE_CHECKING:
    from typing import Mapping

__all__ = ["cache_dir"]


def cache_dir(*parts: str, env: Mapping[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/distcomp/PARTS...`` as an absolute path, from ``env`` (default: this
    process's environment); an empty or blank XDG_CACHE_HOME means ``~/.cache``."""
    base = (os.environ if env is None else env).get("XDG_CACHE_HOME", "").strip()
    return os.path.join(os.path.abspath(base or os.path.join(os.path.expanduser("~"), ".cache")), "distcomp", *parts)
