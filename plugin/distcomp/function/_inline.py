"""A function with no file behind it (a notebook's or a REPL's ``__main__``) given ``code=``:
its source travels in the runner's command line, and the code folder travels as for any
function (so what it imports from there works on every rank).

Ranks cannot import ``__main__`` of a notebook, so the function's own source (read as
``inspect.getsource`` reads it: IPython keeps each cell's text) goes with its parameters in one
word, ``--inline PAYLOAD`` (zlib + urlsafe base64 of JSON: letters, digits, ``-``, ``_``, ``=``,
no character a shell or the spec's templates read). The runner defines the function from it in
a module of its own, annotations left unevaluated, and calls it as it calls an imported one.

As with KFP's lightweight components, only the function travels, not the notebook: a function
that reads a name of the notebook's other cells (a module imported there, a helper, a constant)
is refused at decoration, naming those names (import them inside the function); ``distcomp``
itself is there on the ranks."""

from __future__ import annotations

import ast
import base64
import builtins
import json
import textwrap
import zlib
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ._signature import FunctionError

if TYPE_CHECKING:
    from types import CodeType

    from ._signature import Param

__all__ = ["decode", "define", "encode", "source_of"]

MODULE = "__distcomp_inline__"
PROVIDED = frozenset({"distcomp"})  # names the ranks' module holds before the function is defined


def source_of(fn: Callable[..., Any], where: str) -> str:
    """The function's ``def`` (its decorators left out, dedented), checked to run on its own."""
    import inspect

    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise FunctionError(f"{where}: its source cannot be read (a function typed at a plain Python prompt, "
                            "or given by python -c): define it in a notebook cell or a .py file") from None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        raise FunctionError(f"{where}: its source cannot be parsed on its own; define it at the top level of a cell") \
            from None
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fn.__name__), None)
    if node is None:
        raise FunctionError(f"{where}: its source does not define {fn.__name__}(); define it at the top level of a cell")
    for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
        try:
            ast.literal_eval(default)
        except ValueError:
            raise FunctionError(f"{where}: the default {ast.unparse(default)} is not a literal; ranks define the "
                                "function from its source alone: write the value itself") from None
    outside = sorted(set(_globals(fn.__code__)) - set(dir(builtins)) - PROVIDED - {fn.__name__})
    if outside:
        raise FunctionError(f"{where} uses {', '.join(outside)} from the notebook; ranks run the function's source "
                            "alone (with code= importable): import them inside the function")
    lines = text.splitlines(keepends=True)
    return "".join(lines[node.lineno - 1:node.end_lineno])


def _globals(code: "CodeType") -> Iterator[str]:
    """Every global name the function's code (and the code it holds) reads."""
    import dis

    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield str(ins.argval)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from _globals(const)


def encode(source: str, params: "tuple[Param, ...]") -> str:
    """One word holding the source and the parameters."""
    data = {"source": source, "params": [[p.name, p.kind, p.type, p.default, p.optional, list(p.choices)]
                                         for p in params]}
    raw = zlib.compress(json.dumps(data, separators=(",", ":")).encode("utf-8"), 9)
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode(payload: str) -> "tuple[str, tuple[Param, ...]]":
    from ._signature import Param

    data = json.loads(zlib.decompress(base64.urlsafe_b64decode(payload.encode("ascii"))))
    params = tuple(Param(name, kind, type_, default, optional, tuple(choices))
                   for name, kind, type_, default, optional, choices in data["params"])
    return data["source"], params


def define(payload: str, qualname: str) -> "tuple[Callable[..., Any], tuple[Param, ...]]":
    """The function and its parameters, defined from ``payload`` in a module of its own (its
    source registered with linecache, so a traceback shows its lines)."""
    import __future__
    import linecache
    import sys
    import types

    import distcomp

    source, params = decode(payload)
    filename = f"<{qualname} from the notebook>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = types.ModuleType(MODULE)
    module.__dict__["distcomp"] = distcomp
    sys.modules[MODULE] = module
    code = compile(source, filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, module.__dict__)
    return module.__dict__[qualname], params
