"""status.json: ``running`` with the supervisor's identity while a job runs, the final record after.

Written whole or not at all (a temporary file renamed over it). Every string in it passes
through the job's masker (``distcomp.redact``) first: a secret input never lands here,
whatever the rank printed into the tails of its log.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Mapping

from ..._files import write_atomic
from ...redact import NONE, Masker
from ._procs import boot_id, start_time

NAME = "status.json"


def supervisor(watchdog: int | None = None) -> dict[str, Any]:
    """Who runs the job: enough to tell later whether it is still alive (a reused pid has
    another start time; a reboot another boot id)."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "start_time": start_time(os.getpid()),
            "boot_id": boot_id(), "watchdog_pid": watchdog}


def write(path: Path, record: Mapping[str, Any], masker: Masker = NONE) -> None:
    """Replace ``path`` with ``record`` whole, or raise OSError and leave the old one. One writer
    at a time: whoever holds the run folder's lock."""
    write_atomic(path, json.dumps(masker.data(dict(record)), indent=2) + "\n")


def read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def now() -> float:
    return round(time.time(), 3)
