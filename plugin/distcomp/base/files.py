"""Files: writing outputs whole or not at all, measuring what a folder holds, and the one rule
for what a code folder may hold."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, Iterable

# the node agent writes its files whole too, and must stay stdlib-only: one copy, in its package
from ..agent.shared import fsync_dir as fsync_dir, write_atomic as write_atomic

# what a code folder may not hold: reading one would block (a FIFO), fail or never end
_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


USER_CWD = "DISTCOMP_USER_CWD"  # where the user stands, when a tool runs distcomp elsewhere (mlflow run)


def shown_path(path: "str | Path") -> str:
    """``path`` as the user can use it from where they stand: relative to their folder when it
    lies under it, else absolute. Their folder is ``$DISTCOMP_USER_CWD`` when a tool started
    distcomp in another one for them (the MLflow backend starts its worker in the project's
    folder), else this process's."""
    path = Path(os.path.abspath(path))
    here = Path(os.path.abspath(os.environ.get(USER_CWD) or os.getcwd()))
    try:
        return str(path.relative_to(here)) if path != here else "."
    except ValueError:
        return str(path)


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


def code_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path``, met in a code folder, cannot be packed or copied with the code (a FIFO, a
    socket, a device, a symbolic link that leads nowhere; a link is judged by what it points at),
    or None. Every walk of a code folder (a target's copy or bundle, publishing) asks this, so
    all refuse alike."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        if os.path.islink(path):
            return (f"{os.fspath(path)!r} in the code folder is a symbolic link that leads nowhere "
                    f"({os.readlink(path)}); remove it, or make it point at a file")
        return None  # gone meanwhile: the walk's own concern
    kind = next((what for test, what in _SPECIAL if test(mode)), None)
    if kind is None:
        return None
    return (f"{os.fspath(path)!r} in the code folder is {kind}, not a regular file: a code folder holds files and "
            "folders; remove it, or move it out of the code folder")


def checked_copy(error: Callable[[str], Exception]) -> Callable[[str, str], object]:
    """A ``shutil.copytree`` copy function that raises ``error(code_file_problem)`` for a special
    file instead of blocking on it or adding it to copytree's list of failures."""
    import shutil  # here: `distcomp run` writes its status through this module and copies nothing

    def copy(src: str, dst: str) -> object:
        why = code_file_problem(src)
        if why:
            raise error(why)
        return shutil.copy2(src, dst)
    return copy


# In a folder distcomp writes whole (a build context, an export): ``--force`` replaces a folder
# only when it holds this file, so never one distcomp did not make (``distcomp.core.owned``).
MARKER = ".distcomp-made"


def mark_folder(folder: Path, by: str) -> None:
    """Leave distcomp's marker in ``folder``, which ``by`` (a command) is writing."""
    (folder / MARKER).write_text(f"Written by `{by}`: `--force` may replace this folder, as it replaces nothing "
                                 "distcomp did not make.\n", encoding="utf-8")


def is_marked(folder: Path) -> bool:
    """Whether ``folder`` (a real folder, not a link to one) holds distcomp's marker."""
    return folder.is_dir() and not folder.is_symlink() and (folder / MARKER).is_file() \
        and not (folder / MARKER).is_symlink()


def swap_folder(tmp: Path, dest: Path, marked_only: bool = False) -> None:
    """Put the folder ``tmp`` where ``dest`` is (an empty ``dest`` is removed first); what was
    there goes only once the new folder is in place, so a reader never sees half of either.
    ``marked_only``: a ``dest`` that holds anything is replaced only when it holds distcomp's
    marker (checked again here, just before it is moved: FileExistsError otherwise)."""
    import shutil

    if dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir()):
        dest.rmdir()
    if not dest.exists():
        os.rename(tmp, dest)
        return
    if marked_only and not is_marked(dest):
        raise FileExistsError(f"{dest} was not written by distcomp (no {MARKER} in it): it is left as it is")
    old = dest.parent / f".{dest.name}.{os.getpid()}.{os.urandom(4).hex()}.old"
    os.rename(dest, old)
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)
