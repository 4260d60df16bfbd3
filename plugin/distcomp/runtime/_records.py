"""What a logging call queues for the sender thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Metric:
    key: str
    value: float
    timestamp: int  # ms since the epoch, taken when the caller logged it
    step: int


@dataclass(frozen=True, slots=True)
class Param:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Artifact:
    staged: str  # our private copy: the caller may change or delete the original right away
    artifact_path: str | None
    is_dir: bool
    staging_dir: str  # removed once sent or given up
    files: int = 1


@dataclass(frozen=True, slots=True)
class Flush:
    """Everything queued before it is sent; then ``done`` is set. With ``until`` (a
    ``time.monotonic()`` deadline) what the store did not take is retried until then."""

    done: threading.Event
    until: float | None = None


Record = Metric | Param | Artifact | Flush
