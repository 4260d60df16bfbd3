"""A function component's spec in a file, for the targets that read or ship a spec file: the KFP
step embeds it, the Kubeflow and Slurm code stores and a build context ship the code folder
beside it, a job started in the background has its worker load it again.

The file holds the component's DistributedComponent text with ``code:`` the code folder's
absolute path, so the code that travels is the project itself, taken by each target's usual
delivery (``.gitignore`` and ``.distcompignore`` honoured), and a job runs in it as a local
run does. It lives in the user's cache under its text's hash
(``$XDG_CACHE_HOME/distcomp/functions/NAME-HASH/component.yaml``): never in the user's project,
written once (atomically) per distinct spec, the same path for the same function, and no copy
of the code is made."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ..base.cachedir import cache_dir
from ..base.files import write_atomic
from ._signature import FunctionError

if TYPE_CHECKING:
    from ..spec import ComponentSpec
    from ._component import FunctionComponent

__all__ = ["SPEC_FILE", "filed_spec", "functions_cache"]

SPEC_FILE = "component.yaml"


def functions_cache(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/distcomp/functions`` (default ``~/.cache/distcomp/functions``)."""
    return Path(cache_dir("functions", env=env))


def filed_spec(fn: "FunctionComponent") -> "ComponentSpec":
    """``fn.spec`` with ``source`` its file in the cache (written when missing)."""
    spec = fn.spec  # checked by the loader: the file holds a valid spec
    text = fn.spec_text(str(fn.code))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    path = functions_cache() / f"{fn.name}-{digest}" / SPEC_FILE
    if not _holds(path, text):
        try:
            write_atomic(path, text)
        except OSError as exc:
            raise FunctionError(f"{fn.origin.file}:{fn.origin.qualname}: cannot write its spec file {path}: "
                                f"{exc.strerror or exc}; set XDG_CACHE_HOME to a folder you may write") from None
    return dataclasses.replace(spec, source=path)


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False
