"""A function component read from its file without importing it.

``distcomp run train.py:train`` needs the component's spec, not the function: importing the
module would run its top level here too (an ``import torch`` at the top costs about a second
of the job's start, and a compile for a cluster would need every package the ranks use). So
the file is parsed, and where the decorator's arguments, the parameters' annotations and their
defaults are plain literals, the spec is made from them with the decorator's own checks
(``settings_of``, ``place``, ``_param``): the same component an import gives, which a test holds
for every function component in the repository.

Anything this reading cannot be sure of returns None and the module is imported as before: a
decorator argument or a default that is not a literal, another decorator, a name the decorator
or an annotation uses that the module binds twice (or with ``global``/``del``/``import *``),
an annotation naming anything but the component types, ``*args``, an ``async def``, and a module
that may rebind what this reading takes as given otherwise than by binding a name (``_rebinds``:
``distcomp.component = wrapper``, ``setattr(typing, ...)``, ``sys.modules[...] = ...``,
``globals()``, ``exec``...), anywhere in the file: then only the import says what the decorator is."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from ._component import FunctionComponent

__all__ = ["read"]

_BUILTINS = {"int": int, "float": float, "bool": bool, "str": str}
# what the reading takes as given: these attributes of distcomp, typing and builtins...
_RELIED = frozenset({"component", "Input", "Output", "Literal", "Optional", "Union", *_BUILTINS})
# ...and the modules through which a file could change them (or the names bound to them)
_MODULES = frozenset({"distcomp", "typing", "builtins", "sys", "importlib"})
_CHANGES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "reload"})
_DYNAMIC = frozenset({"exec", "eval", "globals", "locals", "__import__", "__builtins__"})


class _Unsure(Exception):
    """What the file says cannot be read without running it: import it instead."""


def read(file: Path, qualname: str, load: "Callable[[], Callable[..., Any]] | None" = None) -> "FunctionComponent | None":
    """The component ``qualname`` of ``file`` read from its source, or None when that cannot be
    sure (import it then). A FunctionError when what it says is final and wrong, as the
    decorator would raise it on import. ``load`` imports the function, when it is called."""
    if "." in qualname:
        return None
    try:
        tree = ast.parse(file.read_bytes(), str(file))
    except (SyntaxError, ValueError, OSError):  # the import reports it, with its line
        return None
    if _rebinds(tree):
        return None
    try:
        names = _Names(tree)
        node = names.function(qualname)
        given = names.decorator_arguments(node)
        return _component(file, node, given, names, load)
    except _Unsure:
        return None


class _Names:
    """What the module's top level binds: how many times each name, and which are ``distcomp``,
    ``typing`` or names imported from them."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.bound: dict[str, int] = {}
        self.modules: dict[str, str] = {}  # local name -> "distcomp" / "typing"
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (module, attribute)
        for node in _top_level(tree):
            self._bind(node)
        for node in ast.walk(tree):  # a function may rebind a module name
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    self.bound[name] = self.bound.get(name, 0) + 2

    def _count(self, name: str) -> None:
        self.bound[name] = self.bound.get(name, 0) + 1

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                local = alias.asname or top
                module = alias.name if alias.asname else top
                if module in ("distcomp", "typing") and self.modules.get(local) == module:
                    continue  # ``import distcomp`` then ``import distcomp.runtime``: the same binding
                self._count(local)
                if module in ("distcomp", "typing"):
                    self.modules[local] = module
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    raise _Unsure
                local = alias.asname or alias.name
                self._count(local)
                if node.level == 0 and node.module in ("distcomp", "typing"):
                    self.imported[local] = (node.module, alias.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._count(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            self._count(node.id)  # assigned or deleted
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._count(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            self._count(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self._count(node.rest)

    def once(self, name: str) -> bool:
        return self.bound.get(name, 0) == 1

    def module(self, node: ast.expr) -> str | None:
        """``distcomp`` / ``typing`` when ``node`` is a name bound once to that module."""
        if isinstance(node, ast.Name) and node.id in self.modules and self.once(node.id):
            return self.modules[node.id]
        return None

    def refers(self, node: ast.expr, module: str, attribute: str) -> bool:
        """Whether ``node`` is ``module.attribute`` (through an alias) or a name imported from it."""
        if isinstance(node, ast.Attribute):
            return node.attr == attribute and self.module(node.value) == module
        if isinstance(node, ast.Name):
            return self.imported.get(node.id) == (module, attribute) and self.once(node.id)
        return False

    def function(self, name: str) -> ast.FunctionDef:
        found = [n for n in self.tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        if len(found) != 1 or not self.once(name):
            raise _Unsure
        return found[0]

    def decorator_arguments(self, node: ast.FunctionDef) -> dict[str, Any]:
        """The keywords ``@distcomp.component(...)`` is given (literals), {} when bare."""
        if len(node.decorator_list) != 1:
            raise _Unsure
        decorator = node.decorator_list[0]
        call = decorator if isinstance(decorator, ast.Call) else None
        if not self.refers(call.func if call else decorator, "distcomp", "component"):
            raise _Unsure
        if call is None:
            return {}
        if call.args or any(k.arg is None for k in call.keywords):
            raise _Unsure
        return {k.arg: _literal(k.value) for k in call.keywords if k.arg is not None}

    def hint(self, node: ast.expr) -> Any:
        """The annotation's object, as ``typing.get_type_hints`` would give it."""
        import typing

        from ._ports import Input, Output

        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
            try:
                return self.hint(ast.parse(node.value.strip(), mode="eval").body)
            except SyntaxError:
                raise _Unsure from None
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.Name) and node.id in _BUILTINS and node.id not in self.bound:
            return _BUILTINS[node.id]
        for port in (Input, Output):
            if self.refers(node, "distcomp", port.__name__):
                return port
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union(self.hint(node.left), self.hint(node.right))
        if isinstance(node, ast.Subscript):
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if self.refers(node.value, "typing", "Literal"):
                return typing.Literal[tuple(_literal(a) for a in args)]
            if self.refers(node.value, "typing", "Optional") and len(args) == 1:
                return typing.Optional[self.hint(args[0])]
            if self.refers(node.value, "typing", "Union"):
                return typing.Union[tuple(self.hint(a) for a in args)]
        raise _Unsure


def _rebinds(tree: ast.Module) -> bool:
    """Whether the file may change, in any scope, what ``_Names`` takes a name to be, otherwise
    than by binding that name (which ``_Names`` counts): an attribute of ``distcomp``, ``typing``
    or ``builtins`` set or deleted (``distcomp.component = functools.partial(...)``), through
    ``setattr``, a module's ``__dict__`` or ``sys.modules``; ``globals()``, ``exec`` and the like."""
    aliases: set[str] = set()  # every name any import binds to one of _MODULES or to a name from one
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update(a.asname or a.name.partition(".")[0] for a in node.names
                           if a.name.partition(".")[0] in _MODULES)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").partition(".")[0] in _MODULES:
            aliases.update(a.asname or a.name for a in node.names)

    def touches(node: ast.expr) -> bool:
        """``node`` reaches one of those modules, a module's ``__dict__``, or ``globals()``/``vars()``."""
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(node, ast.Attribute) and node.attr in ("__dict__", "modules"):
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars"):
                return True
            node = node.func if isinstance(node, ast.Call) else node.value
        return isinstance(node, ast.Name) and node.id in aliases

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _DYNAMIC:
            return True
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if touches(node.value) or (isinstance(node, ast.Attribute) and node.attr in _RELIED and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):  # any other object may be one
                return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            args = node.args
            if len(args) < 2 or touches(args[0]) or not (isinstance(args[1], ast.Constant)
                                                         and isinstance(args[1].value, str) and args[1].value not in _RELIED):
                return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CHANGES:
            if touches(node.func.value):
                return True
    return False


def _union(left: Any, right: Any) -> Any:
    try:
        return left | right  # as Python makes ``int | None`` (types.UnionType)
    except TypeError:
        raise _Unsure from None


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Unsure from None


def _top_level(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node whose bindings are the module's: its statements and their expressions, not
    the bodies of functions, classes, lambdas or comprehensions (their own scopes)."""
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # its decorators, defaults and annotations bind nothing in practice
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _component(file: Path, node: ast.FunctionDef, given: dict[str, Any], names: _Names,
               load: "Callable[[], Callable[..., Any]] | None") -> "FunctionComponent":
    from ._component import DEFAULTS, FunctionComponent, settings_of
    from ._origin import _natural_root, place
    from ._signature import _param

    settings = dict(DEFAULTS)
    if not set(given) <= set(settings):
        raise _Unsure  # the import's TypeError says which
    settings.update(given)
    code = settings.pop("code")
    path = file.resolve()
    module = _natural_root(path, "__main__")[1]
    origin = place(path, module, node.name, code, f"@distcomp.component {module}.{node.name}")
    where = f"@distcomp.component {origin.file.name}:{origin.qualname}"
    arguments = node.args
    if arguments.posonlyargs or arguments.vararg or arguments.kwarg:
        raise _Unsure  # refused on import, with its message
    positional = arguments.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    params = []
    for arg, default in [*zip(positional, defaults), *zip(arguments.kwonlyargs, arguments.kw_defaults)]:
        if arg.annotation is None:
            raise _Unsure
        value = None if default is None else _literal(default)
        params.append(_param(arg.arg, names.hint(arg.annotation), value, where, default is not None and value is None))
    doc = ast.get_docstring(node, clean=False)
    return FunctionComponent(None, settings_of(node.name, doc, where, **settings), origin, tuple(params), doc, load)
