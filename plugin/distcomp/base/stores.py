"""Where component registries are, and whether a path lies in one: core, below the registry,
the jobs and function exports alike, so that each refuses to write into a registry without
importing another (``distcomp.registry._stored`` re-exports it). Cheap: a few stats and one
small JSON per parent folder, no hashing.

A stored version is ``NAME/VERSION/`` holding a ``manifest.json`` that names that NAME and
VERSION (what ``read_manifest`` checks first); the folder of a plain project rarely is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["default_location", "inside_store", "stored_version"]

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
