"""The methods ``dataclasses`` generates for distcomp's records, compiled once and kept, as Python
keeps a module's bytecode: ``$XDG_CACHE_HOME/distcomp/dataclasses/TAG.marshal`` (default
``~/.cache``; TAG names the interpreter: its cache tag and bytecode magic number).

Python 3.11 and 3.12 compile each generated method from its source text, 5-6 a frozen
dataclass; for the ~80 records a ``distcomp run`` creates that is ~30 ms of CPU, a third of its
own start. ``install`` sets a stand-in for ``exec`` in the dataclasses module's namespace, which
``_create_fn`` finds before the builtin: for a class of a distcomp module it runs the code object
compiled from the very same text as ``exec`` of a string compiles it (file ``<string>``, no
inherited flags), from the cache where it is there; for any other class it is ``exec`` itself.
So every function is the one Python would make.

The dataclasses module is not imported for this (a bare ``import distcomp`` needs none): where it
is not imported yet, a finder on ``sys.meta_path`` loads it with a SourceFileLoader that sets the
stand-in, then leaves. The cache is read on the first record; what was compiled anew is added at
the process's exit, the file written whole (a temporary file renamed). A file that cannot be read
or unmarshalled is ignored and replaced. Nothing is written where Python writes no bytecode
(``PYTHONDONTWRITEBYTECODE``, ``-B``); ``DISTCOMP_METHOD_CACHE=off`` turns all of it off."""

from __future__ import annotations

import builtins
import os
import sys
from importlib.machinery import PathFinder, SourceFileLoader
from types import CodeType, ModuleType

from .cachedir import cache_dir

TYPE_CHECKING = False  # typing costs every process that imports distcomp ~10 ms; mypy reads True
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ENV", "LIMIT", "cache_file", "install", "stats"]

ENV = "DISTCOMP_METHOD_CACHE"  # "off": Python's own compile, every time
LIMIT = 20_000  # entries: past it, the file keeps what this process used (old versions' texts leave)
_PACKAGE = "distcomp"  # the package whose records are cached: distcomp's, never a user's

_exec = builtins.exec
_codes: dict[str, CodeType] | None = None  # text -> code, read on first use
_used: set[str] = set()
_counts = {"served": 0, "compiled": 0}


def install() -> None:
    """Make dataclasses use the cache (now, or when it is imported); idempotent."""
    if os.environ.get(ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return
    module = sys.modules.get("dataclasses")
    if module is not None:
        _patch(module)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def stats() -> dict[str, int]:
    """How many generated methods this process took from the cache, and compiled."""
    return dict(_counts)


def cache_file() -> str:
    from importlib.util import MAGIC_NUMBER

    return cache_dir("dataclasses", f"{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}.marshal")


def _patch(module: ModuleType) -> None:
    if getattr(module, "_create_fn", None) is not None and "exec" not in vars(module):
        module.exec = _cached_exec  # type: ignore[attr-defined]  # found before builtins.exec


def _cached_exec(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> None:
    """``exec`` as dataclasses calls it, with a distcomp record's text compiled once."""
    module = globals.get("__name__") if isinstance(globals, dict) else None
    if kwargs or not isinstance(source, str) or not isinstance(module, str) or module.partition(".")[0] != _PACKAGE:
        return _exec(source, globals, locals, **kwargs)
    codes = _load()
    code = codes.get(source)
    if code is None:
        code = codes[source] = compile(source, "<string>", "exec", dont_inherit=True)  # what exec(str) compiles
        _counts["compiled"] += 1
    else:
        _counts["served"] += 1
    _used.add(source)
    return _exec(code, globals, locals)


def _load() -> dict[str, CodeType]:
    global _codes
    if _codes is None:
        import atexit
        import marshal

        _codes = {}
        try:
            with open(cache_file(), "rb") as f:
                found = marshal.loads(f.read())  # from bytes: marshal.load(f) reads the file in small calls, ~10x the CPU
            if isinstance(found, dict):
                _codes = {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, CodeType)}
        except (OSError, EOFError, ValueError, TypeError):  # none yet, or broken: compiled again, then replaced
            pass
        atexit.register(_save)
    return _codes


def _save() -> None:
    if not _counts["compiled"] or _codes is None or sys.dont_write_bytecode:  # bytecode: PYTHONDONTWRITEBYTECODE holds
        return
    import marshal

    codes = _codes if len(_codes) <= LIMIT else {k: v for k, v in _codes.items() if k in _used}
    path = cache_file()
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"  # hosts sharing a home: their own
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(codes))
        os.replace(tmp, path)
    except (OSError, ValueError):  # a read-only home, a full disk: compiled again next time
        try:
            os.unlink(tmp)
        except OSError:
            pass


class _Finder:
    """Finds ``dataclasses`` once, as the path finder does, with a loader that patches it."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "dataclasses":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = PathFinder.find_spec(name, path)
        if spec is None or type(spec.loader) is not SourceFileLoader:  # frozen, zipped...: left as it is
            return None
        spec.loader = _Loader(spec.loader.name, spec.loader.path)
        return spec


class _Loader(SourceFileLoader):
    """The path finder's own loader of the module's file, which sets the stand-in once it ran."""

    def exec_module(self, module: ModuleType) -> None:
        super().exec_module(module)
        _patch(module)
