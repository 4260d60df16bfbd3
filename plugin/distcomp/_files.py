"""Files: writing outputs whole or not at all, and measuring what a folder holds."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling, so a reader (or a crash) never
    sees half a file and a previous version stays until the new one is complete."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def tree_usage(top: str | os.PathLike[str]) -> tuple[int, int]:
    """Files under ``top`` and their bytes, links not followed (a link or a file counts as one
    file itself); what vanishes meanwhile is not counted."""
    if not os.path.isdir(top) or os.path.islink(top):
        try:
            return 1, os.lstat(top).st_size
        except OSError:
            return 0, 0
    files = size = 0
    for folder, _dirs, names in os.walk(top):
        for name in names:
            try:
                size += os.lstat(os.path.join(folder, name)).st_size
                files += 1
            except OSError:
                pass
    return files, size
