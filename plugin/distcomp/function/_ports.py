"""The path annotations of a function component's parameters.

``data: distcomp.Input`` is a path the step reads (a folder or a file), ``model:
distcomp.Output`` one it writes; ``Optional[distcomp.Input] = None`` is an input that may be
left out. On each rank the parameter holds the path as a ``str`` (of these subclasses, so
``open``, ``os.path`` and ``pathlib.Path`` take it as it is); a direct call takes any path."""

from __future__ import annotations

__all__ = ["Input", "Output"]


class Input(str):
    """A path the step reads: a folder or a file (the spec's ``path`` port type)."""

    __slots__ = ()


class Output(str):
    """A path the step writes: a folder or a file (the spec's ``path`` output type; a folder
    is made for it before the function is called, on every target, unless a file is there)."""

    __slots__ = ()
