"""``python -m distcomp.worker JOB.json``: how distcomp starts a process of its own.

A background ``distcomp submit --target local`` job, and the watchdog that closes a job whose
``distcomp run`` died, are processes distcomp starts for itself. They read a **job record**, a
versioned JSON file, never command-line flags: a flag renamed in the CLI cannot break them, and
a record written by another distcomp is read by the rules of its version, or refused with a
message that says what to do. The record may hold input values and secret variables, so it is
written for its owner only (mode 600).

Record, version 1::

    {"distcomp_job": 1, "action": "run", "spec": PATH, "cwd": DIR, "inputs": {...}, "outputs": {...},
     "env": {...}, "options": {"run_dir": ..., "nodes": ..., "timeout": ..., ...}}
    {"distcomp_job": 1, "action": "reap", "run_dir": DIR, "lock_fd": N, "cookie": ..., "grace": S}
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import UsageError

__all__ = ["ACTIONS", "JobRecord", "KEY", "RecordError", "VERSION", "main", "read_record", "write_record"]

KEY = "distcomp_job"
VERSION = 1
ACTIONS = ("run", "reap")
# the keywords of ``distcomp.run`` a record's options may carry, with their types
_RUN_OPTIONS: dict[str, type | tuple[type, ...]] = {
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


def _run(record: JobRecord, where: str) -> int:
    from .api import load, run
    from .cli._common import deprecated, echo, speaker

    options = dict(record.options)
    for key, value in options.items():
        kind = _RUN_OPTIONS.get(key)
        if kind is None or value is not None and (not isinstance(value, kind) or isinstance(value, bool)
                                                   and kind is not bool):
            raise RecordError(f"{where}: option {key!r} = {value!r} is not one a run takes")
    if record.spec is None:
        raise RecordError(f"{where}: a run record names no spec")
    quiet = bool(options.pop("quiet", False))
    spec = load(record.spec, warn=deprecated)
    outcome = run(spec, inputs=dict(record.inputs), outputs=dict(record.outputs), env=dict(record.env),
                  console=None if quiet else echo, notify=speaker("run"), **options)
    return outcome.exit_code if outcome.exit_code is not None else 1


def _reap(record: JobRecord, where: str) -> int:
    from .targets.local import reap

    try:  # single-use: written for one watchdog, read once
        os.unlink(where)
    except OSError:
        pass
    o = record.options
    run_dir, lock_fd = o.get("run_dir"), o.get("lock_fd")
    if not isinstance(run_dir, str) or not isinstance(lock_fd, int):
        raise RecordError("a reap record needs run_dir (text) and lock_fd (a number)")
    grace = float(o.get("grace", 5.0))
    cookie = o.get("cookie") if isinstance(o.get("cookie"), str) else None
    report = reap(Path(run_dir), grace, lock_fd=lock_fd, cookie=cookie)
    print(f"distcomp reap: {run_dir}: {report.message}", flush=True)
    return 0


def execute(record: JobRecord, where: str = "the job record") -> int:
    """Do what ``record`` says, in its folder; the exit code a process of it returns."""
    if record.cwd:
        try:
            os.chdir(record.cwd)
        except OSError as exc:
            raise RecordError(f"{where}: cannot work in {record.cwd}: {exc.strerror or exc}") from None
    return _reap(record, where) if record.action == "reap" else _run(record, where)


def main(argv: Sequence[str] | None = None) -> int:
    from .cli._console import guard
    from .errors import DistcompError

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m distcomp.worker JOB.json  (a job record distcomp wrote)", file=sys.stderr)
        return 2
    action = "worker"
    with guard():  # a console that goes away ends what is shown, not what is done
        try:
            record = read_record(args[0])
            action = record.action
            return execute(record, args[0])
        except DistcompError as exc:  # said as `distcomp run` says it: the console reads the same
            print(f"distcomp {action}: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print("distcomp: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    raise SystemExit(main())
