"""The job record: what a process distcomp starts for itself reads (``distcomp.worker``).

A versioned JSON file, never command-line flags: a flag renamed in the CLI cannot break a
process started by another distcomp, and a record of another version is read by its rules or
refused with what to do. It may hold input values and secret variables, so it is written for
its owner only (mode 600).

Record, version 1::

    {"distcomp_job": 1, "action": "run", "spec": PATH, "cwd": DIR, "inputs": {...}, "outputs": {...},
     "env": {...}, "options": {"run_dir": ..., "nodes": ..., "timeout": ..., ...}}
    {"distcomp_job": 1, "action": "reap", "options": {"run_dir": DIR, "lock_fd": N, "cookie": ..., "grace": S}}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import UsageError

__all__ = ["ACTIONS", "JobRecord", "KEY", "RUN_OPTIONS", "RecordError", "VERSION", "read_record", "write_record"]

KEY = "distcomp_job"
VERSION = 1
ACTIONS = ("run", "reap")
# the keywords of ``distcomp.run`` a record's options may carry, with their types
RUN_OPTIONS: dict[str, type | tuple[type, ...]] = {
    "run_dir": str, "nodes": int, "nproc_per_node": int, "timeout": (int, float), "max_restarts": int,
    "grace": (int, float), "tracking": bool, "experiment": str, "system_metrics": bool, "quiet": bool}


class RecordError(UsageError):
    """A job record that cannot be read: its message says which file, why, and what to do."""


@dataclass(frozen=True)
class JobRecord:
    """What a worker process does: ``run`` a spec here, or ``reap`` a job whose supervisor died."""

    action: str
    spec: str | None = None
    cwd: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {KEY: VERSION, "action": self.action, "spec": self.spec, "cwd": self.cwd, "inputs": dict(self.inputs),
                "outputs": dict(self.outputs), "env": dict(self.env), "options": dict(self.options)}


def write_record(path: Path, record: JobRecord) -> Path:
    """``record`` at ``path``, whole or not at all, readable by its owner only."""
    from ._files import write_atomic

    write_atomic(path, json.dumps(record.to_json(), indent=1) + "\n", mode=0o600)
    return path


def _texts(data: Any, what: str, where: str) -> dict[str, str]:
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise RecordError(f"{where}: {what} must map names to text")
    return dict(data)


def read_record(path: "str | os.PathLike[str]") -> JobRecord:
    """The record at ``path``; one of a newer version, or a file that is no record, is a RecordError."""
    where = os.fspath(path)
    try:
        with open(where, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise RecordError(f"cannot read the job record {where}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RecordError(f"{where}: not a job record (not JSON: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(KEY), int):
        raise RecordError(f"{where}: not a distcomp job record (no {KEY!r} version)")
    version = data[KEY]
    if version > VERSION:
        raise RecordError(f"{where}: a job record of format {version}, written by a newer distcomp than this one "
                          f"(it reads format {VERSION} and older); run it with the distcomp that wrote it, or upgrade "
                          "distcomp here")
    if version < 1:
        raise RecordError(f"{where}: job record format {version} is unknown; make the job again with this distcomp")
    action = data.get("action")
    if action not in ACTIONS:
        raise RecordError(f"{where}: unknown action {action!r} (expected one of: {', '.join(ACTIONS)})")
    options = data.get("options") or {}
    if not isinstance(options, dict):
        raise RecordError(f"{where}: options must be a mapping")
    for key in ("spec", "cwd"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise RecordError(f"{where}: {key} must be text")
    return JobRecord(action, data.get("spec"), data.get("cwd"), _texts(data.get("inputs") or {}, "inputs", where),
                     _texts(data.get("outputs") or {}, "outputs", where), _texts(data.get("env") or {}, "env", where),
                     options)


