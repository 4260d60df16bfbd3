"""The one check every spec loader makes (``distcomp.load``, the targets' ``resolve_spec``,
``validate``): is this a function component, or ``FILE.py:FUNCTION`` naming one?"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..spec import ComponentSpec
    from ._component import FunctionComponent

__all__ = ["as_component", "function_spec"]


def as_component(ref: object) -> "FunctionComponent | None":
    """The function component ``ref`` is or names, else None. A ``FILE.py:FUNCTION`` text
    imports the file; a job started while a rank imports its module is refused (``_guard``).
    Nothing of this package is imported for a ref that cannot be one."""
    found = None
    if isinstance(ref, str) and ".py:" in ref:
        from ._reference import is_reference, load_reference

        if is_reference(ref):
            found = load_reference(ref)
    else:
        module = sys.modules.get(f"{__package__}._component")
        if module is not None and isinstance(ref, module.FunctionComponent):
            found = ref
    if found is not None:
        from ._guard import check

        check(f"{found.origin.file.name}:{found.origin.qualname}")
    return found


def function_spec(ref: object) -> "ComponentSpec | None":
    """The spec of the function component ``ref`` is or names (else None), as every target
    gets it: loaded from its spec file (``_filed``), its code folder the function's project.
    A target then reads, embeds or ships it as it does a spec written by hand: none asks
    whether a spec came from a function."""
    found = as_component(ref)
    if found is None:
        return None
    from ._filed import filed_spec

    return filed_spec(found)
