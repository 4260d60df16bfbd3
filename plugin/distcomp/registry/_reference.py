"""``NAME@SELECTOR`` references, and the names the registry accepts."""

from __future__ import annotations

import re

from ._records import Reference, RegistryError
from ._versions import selector

__all__ = ["NAME", "check_name", "looks_like_reference", "parse_reference"]

# a spec name as the registry keeps it: lowercase, so one name is one folder on any filesystem
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}\Z")
_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*@")  # what a reference starts with (any case)


def check_name(name: str, where: str = "") -> str:
    """``name`` if the registry accepts it; else a RegistryError saying what would be."""
    if isinstance(name, str) and NAME.match(name):
        return name
    hint = f"; did you mean {name.lower()!r}?" if isinstance(name, str) and NAME.match(name.lower()) else ""
    raise RegistryError(f"{where}invalid component name {name!r}: registry names are 1-100 lowercase letters, "
                        f"digits, '.', '_' or '-', starting with a letter or digit{hint}")


def looks_like_reference(text: str) -> bool:
    """Whether ``text`` is meant as ``NAME@SELECTOR`` rather than a path (no '/', a name, '@')."""
    return bool(_SHAPE.match(text)) and "/" not in text and "\\" not in text


def parse_reference(text: str, default: str | None = None) -> Reference:
    """``name@1.2.0``, ``name@latest``, ``name@^1.2``, ``name@~1.2.3``, ``name@1.*``,
    ``name@>=1.0,<2``; a bare ``name`` means ``name@DEFAULT`` when a default is given."""
    if not isinstance(text, str):
        raise RegistryError(f"a reference is a string NAME@VERSION, got {type(text).__name__}")
    name, at, chosen = text.strip().partition("@")
    if not at:
        if default is None:
            raise RegistryError(f"{text!r} is not a reference: expected NAME@VERSION, NAME@latest or a range "
                                "such as NAME@^1.2")
        chosen = default
    return selector(check_name(name, f"{text!r}: "), chosen)
