"""``distcomp.export(fn, FOLDER)``: ``FOLDER/component.yaml`` (the DistributedComponent text
``FunctionComponent.spec`` loads) and ``FOLDER/code/``, a copy of the code folder as a publish
takes it (no .git, .venv, caches, .env, what a run writes, nor what ``.gitignore`` and
``.distcompignore`` leave out). ``distcomp validate`` accepts it and ``distcomp run`` of it does
what ``distcomp.run(fn)`` does: a YAML or Azure ML user needs no Python of the author's.

Written whole or not at all: the spec text is checked with the normal loader before anything
is copied, the export is made in a sibling folder, then renamed into place."""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..base.files import MARKER, is_marked, mark_folder, swap_folder
from ..errors import UsageError
from ._signature import FunctionError

if TYPE_CHECKING:
    from ..spec import ComponentSpec
    from ._component import FunctionComponent

__all__ = ["CODE", "SPEC_FILE", "export", "write"]

SPEC_FILE = "component.yaml"
CODE = "code"


def export(fn: "FunctionComponent | Callable[..., Any]", folder: "str | os.PathLike[str]", *,
           force: bool = False) -> "ComponentSpec":
    """Write ``fn``'s spec and code into ``folder`` (made if missing; refused when it holds
    anything, unless ``force``: then replaced whole, if it is an export distcomp wrote: it holds
    ``.distcomp-made``). Never ``/``, a system folder, ``$HOME``, a registry or anything in it,
    the code folder or a folder holding it. ``fn``: a component, or a plain function (made one
    with the decorator's defaults). Returns the spec loaded from the written file."""
    return write(fn, folder, force=force, mark=True)


def write(fn: "FunctionComponent | Callable[..., Any]", folder: "str | os.PathLike[str]", *, force: bool = False,
          skip: "tuple[Path, ...]" = (), mark: bool = False) -> "ComponentSpec":
    """``export``, with folders of the project left out besides the export's own (``skip``: a
    registry that lies in the project, when publishing). ``mark``: leave distcomp's marker,
    which a later ``force`` needs (a publish's temporary export is no folder of the user's)."""
    from ..base.codefolder import CodeFolderError, folder_files
    from ..spec import check_text
    from ._component import FunctionComponent, component

    made = fn if isinstance(fn, FunctionComponent) else component(fn)
    dest = Path(os.path.abspath(folder))
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"export to {folder}: it is a file, not a folder")
    if made.code.is_relative_to(dest):
        raise UsageError(f"export to {folder}: it holds the code folder {made.code} itself; export elsewhere")
    why = _place_problem(dest, made.code, force)
    if why:
        raise UsageError(f"export to {folder}: it {why}")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(f"export to {folder}: the folder is not empty; choose an empty or new folder, or pass "
                         "force=True to replace it")
    text = made.spec_text(CODE)
    try:
        files = folder_files(made.code, skip=(dest, *skip))  # an export inside the project stays out
    except CodeFolderError as exc:
        raise FunctionError(f"the code folder cannot be shipped: {exc}") from None
    # checked where it will be, before anything is made or copied (its code folder, not there yet, is a warning)
    result = check_text(text, str(dest / SPEC_FILE), dest)
    if result.spec is None:  # a setting the loader refuses (a launcher that is not installed...)
        raise FunctionError(f"export of {made.origin.target}: " + "; ".join(str(d) for d in result.errors))
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{os.urandom(4).hex()}.export")
    try:
        tmp.mkdir()
        _copy(files, tmp / CODE)
        (tmp / SPEC_FILE).write_text(text, encoding="utf-8")
        if mark:
            mark_folder(tmp, "distcomp.export")
        swap_folder(tmp, dest, marked_only=True)  # what it replaces, distcomp made
    except BaseException:
        import shutil  # here: only a failed export needs it

        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # what was checked is what was written (its code folder there now): no second reading
    return dataclasses.replace(result.spec, source=dest / SPEC_FILE)


def _place_problem(dest: Path, code: Path, force: bool) -> str | None:
    """Why ``export`` must not write ``dest``, or None (``distcomp.core.owned.folder_problem``'s
    rule; a registry is told by ``distcomp.base.places``, as this layer may not import the registry)."""
    from ..base.places import protected

    why = protected(dest, code)
    if why:
        return f"{why}: distcomp never writes or replaces it; export to a new folder of its own"
    if force and dest.is_dir() and any(dest.iterdir()) and not is_marked(dest):
        return (f"was not written by distcomp.export (it holds no {MARKER}): force=True replaces only an export "
                "distcomp made; export to a new or empty folder")
    return None


def _copy(files: Mapping[str, Path], code: Path) -> None:
    """Each file to ``code/REL`` with its mode (what the code delivery and its hash read), as
    ``shutil.copy`` does, with about half its system calls; each folder made once (not once a file)."""
    code.mkdir()
    made = {str(code)}
    for rel, source in files.items():
        target = os.path.join(code, rel)
        parent = os.path.dirname(target)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        _copy_file(str(source), target)


# sendfile refused by the file system (shutil.copyfile's rule): the plain read/write copy instead
_NO_SENDFILE = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.ENOTSOCK, errno.EXDEV, errno.EOPNOTSUPP}


def _copy_file(source: str, target: str) -> None:
    """``shutil.copy(source, target)`` for a new ``target`` in a folder of distcomp's own: the
    content (``sendfile``, as shutil on Linux) and the permission bits (``fchmod``, not a
    second path lookup), without shutil's look for a same file (``target`` is new); the walk
    hands regular files (a link's target: opened through it), and what is not one now is refused."""
    fin = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a pipe swapped in since the walk: no wait
    try:
        st = os.fstat(fin)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (any more)", source)
        mode = stat.S_IMODE(st.st_mode)
        fout = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            try:
                while os.sendfile(fout, fin, None, 1 << 23):
                    pass
            except OSError as exc:
                if exc.errno not in _NO_SENDFILE or os.lseek(fout, 0, os.SEEK_CUR):
                    raise
                os.lseek(fin, 0, os.SEEK_SET)
                while chunk := memoryview(os.read(fin, 1 << 20)):
                    while chunk:
                        chunk = chunk[os.write(fout, chunk):]
            os.fchmod(fout, mode)
        finally:
            os.close(fout)
    finally:
        os.close(fin)
