"""One error hierarchy for the whole package, so that the CLI (and any caller) can tell the
user's mistakes from failed jobs from bugs without catching every ``ValueError``:

- ``UsageError``: a bad spec, input, option or configuration; the CLI prints it and exits 2.
- ``JobError``: the job failed or could not start; the CLI prints it and exits 1.

Anything else escaping a command is a bug and is shown with its traceback. Classes that were
``ValueError``/``RuntimeError`` before keep that as a second base, for callers that catch it.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["DistcompError", "JobError", "OptionError", "UsageError"]


class DistcompError(Exception):
    """Every error distcomp raises on purpose; ``exit_code`` is what the CLI exits with."""

    exit_code: ClassVar[int] = 1


class UsageError(DistcompError):
    exit_code = 2


class JobError(DistcompError):
    exit_code = 1


class OptionError(UsageError, ValueError):
    """An option's value is out of range (a timeout, a restart count, ...)."""
