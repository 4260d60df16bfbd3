"""``distcomp.build_context``: a Docker build context for a component's image, for users who
build images rather than ship code at submit (``distcomp build-context``; see
``distcomp.targets.kubeflow._image`` for what the folder holds).

>>> import distcomp
>>> context = distcomp.build_context("examples/pytorch-ddp", "/tmp/ctx")   # doctest: +SKIP
>>> context.files[:3], context.base_image                                   # doctest: +SKIP
(('Dockerfile', '.dockerignore', 'requirements.txt'), 'python:3.11-slim')
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from . import SpecRef
    from ..targets.kubeflow._image import Context

__all__ = ["build_context"]


def build_context(spec: "SpecRef", dest: "str | os.PathLike[str]", *, base_image: str | None = None,
                  include_distcomp: bool = True, force: bool = False,
                  warn: Callable[[str], None] | None = None) -> "Context":
    """Write ``spec``'s build context into the folder ``dest`` (new or empty; ``force``: replace
    what it holds), whole or not at all, and return what was written. ``base_image``: default the
    spec's environment image, else python:3.11-slim; ``include_distcomp``: distcomp's own wheel
    (a KFP step runs distcomp, a Kubeflow job's training pods do not). Problems raise a
    UsageError (``BuildContextError``)."""
    from . import load
    from ..targets.kubeflow._image import write_context

    named = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else None
    return write_context(load(spec, warn=warn), dest, base_image, distcomp=include_distcomp, force=force,
                         spec_arg=named)
