"""Where a function lives, as the ranks import it: its module's name, its qualified name, and
the code folder that travels (the folder its module's name is relative to).

The code folder is the folder of the function's module, or the root of the package the module
is in (the folder above the top package), or ``code=``; ranks import the module by name from
it, never by pickling. Refused, each with one line saying what to do: something that is not a
``def`` function, a lambda, a nested function, a closure, a function with no file behind it
(a notebook's or a REPL's ``__main__``), one whose module is an installed package, and a
code folder holding a ``distcomp`` module of its own (the ranks would run it, not distcomp's), and a
script read from standard input (``python - < nb.py``: its ``__file__`` is ``<stdin>``, a name
only, and its source cannot be read back to travel inline)."""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ._signature import FunctionError

__all__ = ["Origin", "locate", "place"]


@dataclass(frozen=True)
class Origin:
    """``module`` (dotted, importable with ``path`` under ``root`` on sys.path) and ``qualname``
    of the function; ``root``: the code folder; ``path``: where the module's top folder lies
    inside it, POSIX, ``""`` for ``root`` itself (only ``code=`` makes it another); ``file``:
    the module's file (``<__main__>`` where there is none); ``source``: the function's own
    source where it has no file (it travels inline: ``_inline``), else None."""

    module: str
    qualname: str
    root: Path
    file: Path
    path: str = ""
    source: str | None = None

    @property
    def target(self) -> str:
        """``MODULE:QUALNAME``, as the runner takes it."""
        return f"{self.module}:{self.qualname}"


def locate(fn: Callable[..., Any], code: "str | os.PathLike[str] | None", where: str) -> Origin:
    """Where ``fn`` lives, or a FunctionError saying why ranks could not import it."""
    _refuse_unimportable(fn, where)
    module = fn.__module__
    file = getattr(sys.modules.get(module), "__file__", None)
    if isinstance(file, str) and file.startswith("<") and file.endswith(">"):
        # ``python - < nb.py`` names its __main__ "<stdin>": no file to import, no source to read back
        raise FunctionError(f"{where} is defined in a script Python read from {file} (python - < FILE), not from a "
                            "file: ranks import a function from its module's file; run the script as a file "
                            "(python FILE), or import the function from a .py file")
    if not file:
        if code is None:
            raise FunctionError(f"{where} is defined in {module} with no file behind it (a notebook or a REPL): ranks "
                                "import a function from its module's file; put it in a .py file and import it from "
                                "there, or give code= the folder its ranks run in (its source then travels inline)")
        from ._inline import source_of

        source = source_of(fn, where)
        root = _code_folder(code, where)
        return Origin(module, fn.__qualname__, root, Path(f"<{module}>"), "", source)
    return place(Path(file).resolve(), module, fn.__qualname__, code, where)


def place(path: Path, module: str, qualname: str, code: "str | os.PathLike[str] | None", where: str) -> Origin:
    """The Origin of ``qualname`` in the module ``module`` whose file is ``path`` (resolved),
    ``code`` as the decorator was given it: what ``locate`` finds for an imported function, and
    what the static reading of a file (``_static``) finds without importing it."""
    natural, name = _natural_root(path, module)
    if code is None:
        if any(part in ("site-packages", "dist-packages") for part in natural.parts):
            raise FunctionError(f"{where} is in an installed package ({natural}); give code= the project folder to "
                                "ship, or define the component in your project")
        _refuse_shadow(natural, where)
        return Origin(name, qualname, natural, path)
    root = _code_folder(code, where)
    if not natural.is_relative_to(root):
        raise FunctionError(f"{where}: its module's file {path} is not inside code={os.fspath(code)!r} ({root}); "
                            "code= must hold the function's module")
    _refuse_shadow(natural, where)
    return Origin(name, qualname, root, path, natural.relative_to(root).as_posix().strip("."))


def _code_folder(code: "str | os.PathLike[str]", where: str) -> Path:
    root = Path(code).expanduser().resolve()
    if not root.is_dir():
        raise FunctionError(f"{where}: code={os.fspath(code)!r} is not a folder")
    _refuse_shadow(root, where)
    return root


def _refuse_shadow(folder: Path, where: str) -> None:
    """Each rank runs ``python -m distcomp.function.run`` in the code folder, which puts the
    folder (and the module's, ``--path``) first on sys.path: a ``distcomp`` module of the
    project's there would run instead of distcomp's own runner."""
    for name in ("distcomp.py", "distcomp/__init__.py"):
        if (folder / name).is_file():
            raise FunctionError(f"{where}: the code folder holds {folder / name}; on each rank it would be imported "
                                "instead of distcomp itself: rename it")


def _refuse_unimportable(fn: Callable[..., Any], where: str) -> None:
    if not isinstance(fn, types.FunctionType):
        raise FunctionError(f"{where} is a {type(fn).__name__}, not a function: decorate a function defined with def "
                            "at the top level of a module")
    if fn.__name__ == "<lambda>":
        raise FunctionError(f"{where} is a lambda: ranks import the function by name; define it with def at the top "
                            "level of a module")
    if "<locals>" in fn.__qualname__:
        raise FunctionError(f"{where} is nested in {fn.__qualname__.split('.<locals>')[0]}(): ranks import the "
                            "function by name; define it at the top level of its module")
    if fn.__code__.co_freevars:
        raise FunctionError(f"{where} is a closure over {', '.join(fn.__code__.co_freevars)}: those values would not "
                            "reach the ranks; make them parameters or module-level names")


def _natural_root(file: Path, module: str) -> tuple[Path, str]:
    """The folder the module's name is relative to, and that name: taken from the module's own
    name where the file's folders spell it (namespace packages included); else (a script's
    ``__main__``) from the file, walking up while a folder is a package (holds __init__.py)."""
    parts = module.split(".")
    chain = list(file.parent.parts[1:]) if file.name == "__init__.py" else [*file.parent.parts[1:], file.stem]
    if module != "__main__" and len(parts) <= len(chain) and chain[-len(parts):] == parts:
        root = file.parent
        for _ in range(len(parts) - (0 if file.name == "__init__.py" else 1)):
            root = root.parent
        return root, module
    folder, names = file.parent, ([] if file.name == "__init__.py" else [file.stem])
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        names.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(names)
