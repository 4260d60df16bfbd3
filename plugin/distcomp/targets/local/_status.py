"""status.json: ``running`` with the supervisor's identity while a job runs, the final record after.

Written whole or not at all (a temporary file renamed over it). Every string in it passes
through the job's masker (``distcomp.base.redact``) first: a secret input never lands here,
whatever the rank printed into the tails of its log.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Mapping

from ...base.files import write_atomic
from ...errors import UsageError
from ...base.redact import NONE, Masker
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


# what ``status``, ``logs`` and ``cancel`` read, and the JSON types each may have (None: absent)
_NUMBER, _TEXT, _MAP = (int, float), (str,), (dict,)
_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "state": (_TEXT, "a job state"), "message": (_TEXT, "a string"), "job_id": (_TEXT, "a string"),
    "exit_code": ((int,), "an integer"), "started_at": (_NUMBER, "a number"), "wall_s": (_NUMBER, "a number"),
    "outputs": (_MAP, "an object"), "mlflow": (_MAP, "an object"), "root_cause": (_MAP, "an object"),
    "supervisor": (_MAP, "an object"), "cookie": (_TEXT, "a string"),
}
_INNER: dict[str, dict[str, tuple[tuple[type, ...], str]]] = {
    "mlflow": {"run_id": (_TEXT, "a string"), "tracking_uri": (_TEXT, "a string"),
               "experiment_id": (_TEXT, "a string")},
    "root_cause": {"returncode": ((int,), "an integer"), "detail": (_TEXT, "a string"),
                   "tail": ((list,), "a list of strings")},
    "supervisor": {"pid": ((int,), "an integer"), "start_time": (_NUMBER, "a number")},
}


def type_problem(data: Mapping[str, Any]) -> str | None:
    """What in a status.json is of a type distcomp never writes (``{"state": 5}``: a file
    edited or written by something else), or None; absent and null fields are fine."""
    from ...records import JobState

    def wrong(key: str, value: Any, types: tuple[type, ...], expected: str) -> str | None:
        if value is None:
            return None
        bad = isinstance(value, bool) or not isinstance(value, types)
        if expected == "a job state":
            expected = "one of: " + ", ".join(s.value for s in JobState)
            try:
                bad = bad or not JobState.parse(value)
            except (ValueError, TypeError):
                bad = True
        if not bad and types == (list,):
            bad = not all(isinstance(line, str) for line in value)
        return f"{key!r} is {json.dumps(value)[:60]}, expected {expected}" if bad else None

    for key, (types, expected) in _FIELDS.items():
        problem = wrong(key, data.get(key), types, expected)
        if problem:
            return problem
        inner = data.get(key)
        if not isinstance(inner, dict):
            continue
        for sub, (kinds, what) in _INNER.get(key, {}).items():
            problem = wrong(f"{key}.{sub}", inner.get(sub), kinds, what)
            if problem:
                return problem
    return None


def checked(path: Path) -> dict[str, Any]:
    """``read``, for a command that acts on what it says (``status``, ``logs``, ``cancel``): a
    record with a field of the wrong type is a UsageError naming the file and the field."""
    data = read(path) or {}
    problem = type_problem(data)
    if problem:
        raise UsageError(f"{path}: {problem}; distcomp did not write this (the file was edited or replaced): "
                         "restore it, or give a run folder distcomp made")
    return data


def now() -> float:
    return round(time.time(), 3)
