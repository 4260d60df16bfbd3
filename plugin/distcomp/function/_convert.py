"""A value as the command line gives it (text) back to the parameter's Python type, on the rank.

The spec's binding has checked the value already (an integer is an integer, an enum one of its
values); this only restores the type: ``"3"`` -> ``3``, ``"True"`` -> ``True``, a Literal's
text -> its member, a path -> ``distcomp.Input`` / ``distcomp.Output``. Text stays exactly as
given (spaces, quotes, ``$(...)``: the runner gets it as one argv word)."""

from __future__ import annotations

from typing import Any

from ._ports import Input, Output
from ._signature import Param

__all__ = ["from_text"]

_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


def from_text(param: Param, text: str) -> Any:
    """The Python value of ``text`` for ``param``; a ValueError names the parameter."""
    kind = param.type
    try:
        if param.kind == "input":
            return Input(text)
        if param.kind == "output":
            return Output(text)
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
        if kind == "boolean":
            low = text.strip().lower()
            if low not in _TRUE | _FALSE:
                raise ValueError("expected true or false")
            return low in _TRUE
        if kind == "enum":
            for member in param.choices:
                if str(member) == text:
                    return member
            raise ValueError(f"expected one of: {', '.join(map(str, param.choices))}")
        return text
    except ValueError as exc:
        raise ValueError(f"parameter {param.name!r} ({kind}): cannot take {text!r}: {exc}") from None
