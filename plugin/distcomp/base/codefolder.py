"""What of a code folder travels, wherever it goes: into the registry (``registry._snapshot``),
to a job's ranks (``delivery.code``), into a function component's export (``function._export``).
Core, below all three, so that each takes the same rules without importing another.

Left out, anywhere in the code folder: version-control and tool folders (``.git``, ``.hg``,
``.svn``, ``.venv``, ``__pycache__``, ``.pytest_cache``, ``.mypy_cache``, ``.ruff_cache``,
``.ipynb_checkpoints``, ``.tox``), ``*.pyc``, ``.DS_Store`` and ``.env`` (local secrets must
not reach a shared registry); at its top only, what running it writes (``runs/``, ``mlruns/``,
``outputs/``, ``mlflow.db`` and its creation lock ``mlflow.db.lock``); and what the code folder's ``.gitignore`` and ``.distcompignore``
files leave out (``distcomp.base.ignore``).

A symbolic link to a file in the code folder is taken as a copy of that file. Refused: a link
to a file outside the code folder (it would copy whatever it leads to, ``/etc/passwd`` or a
key, into a shared registry) unless the caller allows it, a link to a file the rules leave
out (``.env``), a link to a folder, a loop, a link that leads nowhere.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Iterable

from .files import code_file_problem
from .ignore import Ignores
from ..errors import UsageError

__all__ = ["EXCLUDED", "EXCLUDED_AT_TOP", "MAX_BYTES", "MAX_FILES", "CodeFolderError", "check_link", "folder_files",
           "left_out", "safe_path", "walk"]

EXCLUDED = frozenset({".git", ".hg", ".svn", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                      ".ipynb_checkpoints", ".tox", ".DS_Store", ".env"})
EXCLUDED_AT_TOP = frozenset({"runs", "mlruns", "outputs", "mlflow.db", "mlflow.db.lock"})
MAX_FILES = 10_000
MAX_BYTES = 1 << 30


class CodeFolderError(UsageError, ValueError):
    """A code folder that cannot travel as it is (the registry raises it as a RegistryError)."""


def safe_path(path: object) -> bool:
    """A relative POSIX path that stays inside its folder: no '..', no absolute path, no '\\'."""
    return (isinstance(path, str) and bool(path) and not path.startswith("/") and "\\" not in path
            and not any(c < " " for c in path)
            and all(part not in ("", ".", "..") for part in path.split("/")))


def left_out(rel: str) -> bool:
    """Whether the walk below leaves out the file at ``rel`` (relative to the code folder)."""
    parts = rel.split("/")
    return (any(p in EXCLUDED for p in parts) or parts[-1].endswith(".pyc")
            or (len(parts) > 1 and parts[0] in EXCLUDED_AT_TOP) or rel in EXCLUDED_AT_TOP)


def check_link(path: Path, code: Path, spec_file: Path, skip: frozenset[Path], allow_external: bool) -> str | None:
    """Check the symbolic link ``path`` to a file before its target is stored as a copy: it
    must stay in the code folder (``allow_external``: anywhere; returns its target then, for
    the publisher to be told) and lead to a file the snapshot would keep."""
    try:
        os.stat(path)
    except OSError as exc:
        what = (f"a symbolic link loop ({path.name} -> {os.readlink(path)})" if exc.errno == errno.ELOOP
                else "a symbolic link that leads nowhere" if exc.errno == errno.ENOENT
                else f"a symbolic link that cannot be followed ({exc.strerror})")
        raise CodeFolderError(f"{spec_file}: {path} in the code folder is {what}; remove it to publish") from None
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(code) or any(target.is_relative_to(s) for s in skip):
        if not allow_external:
            raise CodeFolderError(f"{spec_file}: {path} is a symbolic link to {target}, outside the code folder; copy "
                                "the file in, or pass --allow-external-links")
        return str(target)
    if left_out(target.relative_to(code).as_posix()):
        raise CodeFolderError(f"{spec_file}: {path} is a symbolic link to {target}, which publishing leaves out "
                            "(tool folders, bytecode, .env, what a run writes); copy the file in if it belongs "
                            "in the component, or remove the link")
    return None


def walk(code: Path, spec_file: Path, skip: frozenset[Path],
                allow_external: bool) -> tuple[dict[str, Path], dict[str, str]]:
    """The files to store (relative path -> file) and the links to outside stored as copies
    (the link -> its target)."""
    out: dict[str, Path] = {}
    external: dict[str, str] = {}
    size = 0
    rules = {code: Ignores.at(code)}
    for folder, dirs, names in os.walk(code):
        here = Path(folder)
        top = here == code
        ignores = rules.pop(here)
        for name in list(dirs):
            path = here / name
            if (name in EXCLUDED or (top and name in EXCLUDED_AT_TOP) or path in skip
                    or ignores.ignored(path, is_dir=not path.is_symlink())):
                dirs.remove(name)
            elif path.is_symlink():
                raise CodeFolderError(f"{spec_file}: the code folder holds a symbolic link to a folder, {path}; the "
                                    "registry stores plain files: put the folder itself there, or remove the link")
            else:
                rules[path] = ignores.enter(path)
        prefix = "" if top else here.relative_to(code).as_posix() + "/"
        for name in names:
            path = here / name
            if (name in EXCLUDED or name.endswith(".pyc") or (top and name in EXCLUDED_AT_TOP)
                    or ignores.ignored(path, is_dir=False)):
                continue
            rel = prefix + name
            if not safe_path(rel):
                raise CodeFolderError(f"{spec_file}: cannot publish {str(path)!r}: control characters in its name")
            try:
                st = os.lstat(path)
            except OSError:
                st = None
            if st is None or not stat.S_ISREG(st.st_mode):  # a link, a special file, gone: the checks say which
                target = check_link(path, code, spec_file, skip, allow_external) if path.is_symlink() else None
                special = code_file_problem(path)
                if special:
                    raise CodeFolderError(f"{spec_file}: {special}")
                if not path.is_file():
                    raise CodeFolderError(f"{spec_file}: {path} in the code folder is not a regular file; remove it "
                                          "to publish")
                if target is not None:
                    external[str(path)] = target
                st = path.stat()
            out[rel] = path
            size += st.st_size
            if len(out) > MAX_FILES or size > MAX_BYTES:
                raise CodeFolderError(f"{spec_file}: the code folder {code} holds more than {MAX_FILES} files or "
                                    f"{MAX_BYTES >> 20} MiB; the registry stores code, not data: point code: at "
                                    "the code only")
    return out, external


def folder_files(code: Path, skip: Iterable[Path] = ()) -> dict[str, Path]:
    """The files of the code folder ``code`` a snapshot would store (relative path -> file), for
    a component with no spec file yet (a function component's project)."""
    code = Path(os.path.abspath(code))
    if not code.is_dir():
        raise CodeFolderError(f"code folder {code} does not exist")
    return walk(code, code, frozenset(Path(os.path.abspath(p)) for p in skip), False)[0]
