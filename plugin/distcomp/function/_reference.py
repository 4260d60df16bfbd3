"""``FILE.py:FUNCTION``, as every command taking a SPEC accepts it: the file is imported by
path (its folder, or its package's root, first on sys.path; its module name the file's stem,
or its package path), and the attribute must be a ``@distcomp.component``."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ._component import FunctionComponent

__all__ = ["is_reference", "load_imported", "load_reference"]

_REFERENCE = re.compile(r"(?P<file>.+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


def is_reference(text: str) -> bool:
    """Whether ``text`` reads as ``FILE.py:FUNCTION`` (the file need not exist)."""
    return _REFERENCE.fullmatch(text) is not None


def load_reference(text: str) -> "FunctionComponent":
    """The component ``FILE.py:FUNCTION`` names; a UsageError (one line) when the file cannot
    be imported or the name is not a component. The file is read without importing it where
    its decorator and signature are plain literals (``_static``), so what its module imports
    at the top (torch...) is not paid here: only the ranks import it."""
    match = _REFERENCE.fullmatch(text)
    if match is None:
        raise UsageError(f"{text!r}: expected FILE.py:FUNCTION")
    file = Path(match["file"]).expanduser()
    if not file.is_file():
        raise UsageError(f"{text}: no such file {match['file']}")
    if not _imported_already(file):
        from ._static import read

        found = read(file, match["name"], lambda: load_imported(file, match["name"], text).fn)
        if found is not None:
            return found
    return load_imported(file, match["name"], text)


def load_imported(file: Path, qualname: str, text: str | None = None) -> "FunctionComponent":
    """The component ``qualname`` of ``file``, its module imported (``text``: the reference, in
    messages)."""
    from ._component import FunctionComponent

    text = text or f"{file}:{qualname}"
    module = _import(file, text)
    obj: object = module
    for part in qualname.split("."):
        if not hasattr(obj, part):
            found = sorted(n for n, v in vars(module).items() if isinstance(v, FunctionComponent))
            raise UsageError(f"{text}: {file} has no {qualname!r} (its components: {', '.join(found) or 'none'})")
        obj = getattr(obj, part)
    if not isinstance(obj, FunctionComponent):
        what = "a function" if callable(obj) and hasattr(obj, "__code__") else f"a {type(obj).__name__}"
        raise UsageError(f"{text}: {qualname} is {what}, not a component: decorate it with @distcomp.component")
    return obj


def _imported_already(file: Path) -> bool:
    """Whether this process imported ``file`` already (then its object is exact and free)."""
    from ._origin import _natural_root

    path = file.resolve()
    loaded = sys.modules.get(_natural_root(path, "__main__")[1])
    known = getattr(loaded, "__file__", None)
    return bool(known) and Path(str(known)).resolve() == path


def _import(file: Path, text: str) -> object:
    """The module of ``file``: imported by its module name from its code folder, or the one
    already imported from that file."""
    import importlib

    from ._origin import _natural_root

    path = file.resolve()
    root, name = _natural_root(path, "__main__")
    loaded = sys.modules.get(name)
    known = getattr(loaded, "__file__", None)
    if loaded is not None and known and Path(known).resolve() == path:
        return loaded
    if loaded is not None:
        raise UsageError(f"{text}: a module named {name!r} is imported already from "
                         f"{getattr(loaded, '__file__', None) or 'elsewhere'}; rename {file.name}")
    folder = str(root)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    except UsageError:
        raise
    except Exception as exc:
        where = _user_frame(exc, path)
        raise UsageError(f"{text}: importing {file} failed{where}: {type(exc).__name__}: {exc}".splitlines()[0]) \
            from None


def _user_frame(exc: BaseException, file: Path) -> str:
    """`` at FILE:LINE``: the deepest frame in the user's file, to say where."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == str(file):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" at {file.name}:{line}" if line is not None else ""
