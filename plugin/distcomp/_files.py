"""Files: writing outputs whole or not at all, and measuring what a folder holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable


def write_atomic(path: Path, text: str, durable: bool = False, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temporary sibling, so a reader (or a crash) never
    sees half a file and a previous version stays until the new one is complete. The sibling's
    name is this writer's own (pid and a random part): two writers of one file (a supervisor and
    its watchdog, two publishers) never write into each other's. ``durable``: fsync the file and
    its folder, so the new content survives a power cut (the registry's metadata). ``mode``: the
    file's permissions from its creation on (0o600: never readable by others, not even a moment)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode is None:
            f = open(tmp, "w", encoding="utf-8")
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            os.fchmod(fd, mode)  # exactly: the umask may leave fewer bits, not more
            f = os.fdopen(fd, "w", encoding="utf-8")
        with f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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


def targz(entries: Iterable[tuple[str, bytes, int]]) -> bytes:
    """A reproducible tar.gz of (name, data, mode) entries, in the order given: no times, owners
    or user names, gzip without a timestamp, so the same entries always give the same bytes."""
    import gzip
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)
