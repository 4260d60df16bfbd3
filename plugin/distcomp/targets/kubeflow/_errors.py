"""The error of a spec or of options that cannot make a Kubeflow job, in a module of its own:
every part of the compile raises it, and ``_compile`` uses every part."""

from __future__ import annotations

from ...errors import UsageError


class CompileError(UsageError, ValueError):
    """The spec or the options cannot make a job (no image, a bad name, ...)."""
