"""Follow a path's symbolic links without being caught by a loop of them."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..errors import UsageError


class SymlinkLoop(UsageError, ValueError):
    """A path whose symbolic links lead back to themselves."""


def resolve(path: Path) -> Path:
    """``path`` made absolute with every symbolic link followed; SymlinkLoop for a loop.
    Python before 3.13 raises RuntimeError for one, later versions leave it unresolved."""
    try:
        out = path.resolve()
    except RuntimeError:
        raise SymlinkLoop(f"{path} is a symbolic link loop") from None
    try:
        os.stat(out)
    except OSError as exc:  # a missing path is fine: it is what a new output is
        if exc.errno == errno.ELOOP:
            raise SymlinkLoop(f"{path} is a symbolic link loop") from None
    return out
