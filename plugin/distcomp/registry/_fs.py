"""File-system steps the directory store needs: read-only trees, their removal, atomic JSON."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..base.files import fsync_dir, write_atomic

__all__ = ["fsync_dir", "make_read_only", "remove_tree", "write_json_atomic"]


def make_read_only(top: Path, keep_top: bool = False) -> None:
    """Files r--r--r-- (r-xr-xr-x when executable), folders r-xr-xr-x: a rank writing into its
    working folder cannot quietly change a stored version. ``keep_top``: leave ``top`` itself
    writable (a folder moved to another parent must be, to update its '..')."""
    for folder, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            os.chmod(path, 0o555 if os.stat(path).st_mode & 0o100 else 0o444)
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o555)
    if not keep_top:
        os.chmod(top, 0o555)


def _open_up(folder: str) -> None:
    """chmod 700 a folder, never what a link there leads to (O_NOFOLLOW: no race with a swap)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.fchmod(fd, 0o700)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_tree(top: Path) -> None:
    """Remove ``top`` even when it was made read-only; a missing one is fine. A symbolic link
    (or a file) is removed itself: nothing a link leads to is changed."""
    if os.path.islink(top) or os.path.isfile(top):
        try:
            os.unlink(top)
        except OSError:
            pass
        return
    _open_up(str(top))
    for folder, dirs, _files in os.walk(top):
        for name in dirs:
            _open_up(os.path.join(folder, name))
    shutil.rmtree(top, ignore_errors=True)




def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` by ``data`` as JSON: readers see the old file or the new one, whole."""
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True), durable=True)
