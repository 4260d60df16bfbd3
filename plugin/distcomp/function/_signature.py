"""A function's parameters as a component's inputs and outputs, read from its annotations.

``int``, ``float``, ``bool``, ``str`` -> typed parameters (their default, else required);
``Literal[...]`` -> an enum; ``distcomp.Input`` / ``distcomp.Output`` -> path ports;
``Optional[X] = None`` -> an input that may be left out. Anything else is refused here, at
decoration, naming the parameter and the types allowed."""

from __future__ import annotations

import inspect
import math
import typing
from dataclasses import dataclass
from typing import Any, Callable, Literal, Union

from ..errors import UsageError
from ._ports import Input, Output

__all__ = ["ALLOWED", "FunctionError", "Param", "parameters"]

ALLOWED = "int, float, bool, str, Literal[...], distcomp.Input, distcomp.Output, or Optional[one of them] = None"
_SCALARS: dict[Any, str] = {int: "integer", float: "number", bool: "boolean", str: "string"}


class FunctionError(UsageError, TypeError):
    """A function that cannot be a component (a lambda, a nested function, an annotation with
    no component type...): one line saying what, where and what to do."""


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` says whether it is a typed value (``parameter``), a path read
    (``input``) or written (``output``); ``type`` is the spec's parameter type (``integer``,
    ``number``, ``boolean``, ``string``, ``enum``) or ``path``; ``choices`` are a Literal's
    members, as Python values, in order."""

    name: str
    kind: Literal["parameter", "input", "output"]
    type: str
    default: Any = None  # None: none (required unless optional)
    optional: bool = False
    choices: tuple[Any, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is None and not self.optional


def parameters(fn: Callable[..., Any], where: str) -> tuple[Param, ...]:
    """The component parameters of ``fn``, in signature order; ``where`` names it in messages."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # a string annotation naming something not importable here
        raise FunctionError(f"{where}: its annotations cannot be resolved ({type(exc).__name__}: {exc}); "
                            f"annotate each parameter with {ALLOWED}") from None
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise FunctionError(f"{where}: parameter {p.name!r} is {p.kind.description}; a component's parameters "
                                "are named ones (each rank calls it with keywords)")
        if p.name not in hints:
            raise FunctionError(f"{where}: parameter {p.name!r} has no annotation; annotate it with {ALLOWED}")
        # ``x: int = None`` is an input that may be left out, as ``x: Optional[int] = None`` is
        out.append(_param(p.name, hints[p.name], None if p.default is p.empty else p.default, where,
                          p.default is None))
    return tuple(out)


def _param(name: str, hint: Any, default: Any, where: str, none_default: bool) -> Param:
    here = f"{where}: parameter {name!r}"
    inner, optional = _unwrap_optional(hint)
    if optional and not none_default:
        raise FunctionError(f"{here}: Optional[...] takes the default None (got "
                            f"{'no default' if default is None else repr(default)})")
    optional = optional or none_default
    if inner in (Input, Output):
        kind: Literal["input", "output"] = "input" if inner is Input else "output"
        if kind == "output" and optional:
            raise FunctionError(f"{here}: an output is always given a path; drop Optional[...]")
        if default is not None:
            raise FunctionError(f"{here}: a path port takes no default; use Optional[distcomp.Input] = None for an "
                                "input that may be left out")
        return Param(name, kind, "path", optional=optional)
    if typing.get_origin(inner) is Literal:
        return _enum(here, typing.get_args(inner), default, optional, name)
    kind_of = _SCALARS.get(inner)
    if kind_of is None:
        raise FunctionError(f"{here}: annotation {_show(hint)} is not a component type; allowed: {ALLOWED}")
    if default is not None:
        default = _check_default(here, inner, default)
    return Param(name, "parameter", kind_of, default, optional)


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """``Optional[X]`` / ``X | None`` -> ``(X, True)``; anything else as it is."""
    import types

    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _enum(here: str, members: tuple[Any, ...], default: Any, optional: bool, name: str) -> Param:
    if not members or not all(type(m) in (str, int, bool) for m in members):
        raise FunctionError(f"{here}: Literal[...] members must be str, int or bool values")
    texts = [str(m) for m in members]
    if len(set(texts)) != len(texts):
        raise FunctionError(f"{here}: Literal[...] members must differ as text (got {', '.join(texts)})")
    if default is not None and not any(default == m and type(default) is type(m) for m in members):
        raise FunctionError(f"{here}: the default {default!r} is not one of its Literal values")
    return Param(name, "parameter", "enum", default, optional, tuple(members))


def _check_default(here: str, kind: Any, default: Any) -> Any:
    if kind is float and type(default) is int:
        default = float(default)
    if type(default) is not kind:
        raise FunctionError(f"{here}: the default {default!r} is not a {kind.__name__}")
    if kind is float and not math.isfinite(default):
        raise FunctionError(f"{here}: the default {default!r} is not a finite number")
    return default


def _show(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint).replace("typing.", "")
