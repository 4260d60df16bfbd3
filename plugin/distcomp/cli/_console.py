"""The console is best effort: a reader that goes away (``distcomp run ... 2>&1 | head``) ends
what distcomp shows, never what it does. The job runs on, its MLflow run and status.json end
with it, and the exit code is the job's own.

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError (EPIPE). ``guard``
wraps stdout and stderr for the whole command: the first such write points the stream's file
descriptor at /dev/null (so every later write, and the flush at exit, which would otherwise turn
the exit code into 120, succeed) and the command goes on.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, TextIO


class BestEffort:
    """A text stream whose writes never fail because its reader went away."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False  # the reader went away: everything written since went to /dev/null

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        self.gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())
            finally:
                os.close(null)
            self._stream.flush()  # what the buffer still held goes to /dev/null
        except (OSError, ValueError):  # no file descriptor (a test's capture): nothing to redirect
            pass

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer: the stream's own
        return getattr(self._stream, name)


def gone(stream: object) -> bool:
    """Whether ``stream`` is a guarded one whose reader went away."""
    return isinstance(stream, BestEffort) and stream.gone


@contextmanager
def guard() -> Iterator[None]:
    """stdout and stderr best effort while the command runs; both flushed before they are put
    back, so nothing is left for the flush at exit to fail on."""
    saved = sys.stdout, sys.stderr
    if saved[0] is None or saved[1] is None:  # no console at all (pythonw): nothing to guard
        yield
        return
    out, err = (s if isinstance(s, BestEffort) else BestEffort(s) for s in saved)
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved
