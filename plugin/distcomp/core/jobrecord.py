"""The job record: what a process distcomp starts for itself reads (``distcomp.worker``).

A versioned JSON file, never command-line flags: a flag renamed in the CLI cannot break a
process started by another distcomp, nor a compiled KFP component or MLflow project that holds
a record. A record of an older format is read by its rules; one of a newer format is refused
with both formats named and what to do (upgrade distcomp where it runs). A record may hold
input values and secret variables, so a job's is written for its owner only (mode 600); and it
says what runs, so one owned by another user, or writable by others, is refused (as ssh refuses
a loose key file).

Format 1::

    {"distcomp_job": 1, "action": "run", "spec": PATH, "cwd": DIR, "inputs": {...}, "outputs": {...},
     "env": {...}, "options": {"run_dir": ..., "nodes": ..., "timeout": ..., ...}}
    {"distcomp_job": 1, "action": "reap", "options": {"run_dir": DIR, "lock_fd": N, "cookie": ..., "grace": S}}

Format 2 adds:

- ``"action": "submit"`` with ``"target": NAME``: ``distcomp.submit(spec, NAME, **options)``,
  then wait for the job (SIGTERM cancels it). ``options`` are the target's own (its declared
  ``TargetOption`` names, checked as ``distcomp.submit`` checks them, plus ``nodes`` and
  ``nproc_per_node``); ``inputs`` join its ``inputs`` option.
- ``"params": {NAME: "value" | "if-set"}``: the inputs the worker's command line may give after
  the record, as ``NAME=VALUE`` words (``python -m distcomp.worker JOB.json epochs=3``): the
  values MLflow fills into an MLproject's command. ``if-set``: an empty VALUE means "not
  given" (MLflow has no conditional commands), so the input's ``[ ... ]`` block vanishes.
- ``"outcome_file": PATH``: where the worker writes the job's ``JobOutcome`` as JSON.
- ``"distcomp": VERSION``: the distcomp that wrote it, named when it is refused.

A relative ``spec`` is relative to the record's own folder. Each record is written with the
lowest format that holds it, so a record that needs nothing new still runs with an older
distcomp.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..agent.trust import Untrusted, read_trusted
from ..errors import UsageError

__all__ = ["ACTIONS", "JobRecord", "KEY", "PARAM_RULES", "RUN_OPTIONS", "RecordError", "VERSION", "bind_params",
           "read_record", "write_record"]

KEY = "distcomp_job"
VERSION = 2  # the newest format this distcomp reads and writes
ACTIONS = ("run", "reap", "submit")
PARAM_RULES = ("value", "if-set")
# the keywords of ``distcomp.run`` a record's options may carry, with their types
RUN_OPTIONS: dict[str, type | tuple[type, ...]] = {
    "run_dir": str, "nodes": int, "nproc_per_node": int, "timeout": (int, float), "max_restarts": int,
    "grace": (int, float), "tracking": bool, "experiment": str, "system_metrics": bool, "quiet": bool,
    "system_metrics_interval": (int, float), "hang_timeout": (int, float),
    # a job the core submitted (``submit --target local``): its MLflow run's env and ref, its record
    "job_env": dict, "job_run": dict, "job_record": str}


class RecordError(UsageError):
    """A job record that cannot be read: its message says which file, why, and what to do."""


@dataclass(frozen=True)
class JobRecord:
    """What a worker process does: ``run`` a spec here, ``submit`` it to a target and wait, or
    ``reap`` a job whose supervisor died."""

    action: str
    spec: str | None = None
    cwd: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    target: str | None = None  # submit: the target's name
    params: Mapping[str, str] = field(default_factory=dict)  # input name -> "value" | "if-set"
    outcome_file: str | None = None

    @property
    def version(self) -> int:
        """The lowest format that holds this record: what an older distcomp may still read."""
        return 2 if self.action == "submit" or self.target or self.params or self.outcome_file else 1

    def to_json(self) -> dict[str, Any]:
        from .. import __version__

        data = {KEY: self.version, "distcomp": __version__, "action": self.action, "spec": self.spec,
                "cwd": self.cwd, "inputs": dict(self.inputs), "outputs": dict(self.outputs), "env": dict(self.env),
                "options": dict(self.options)}
        extra = {"target": self.target, "params": dict(self.params), "outcome_file": self.outcome_file}
        return {**data, **{k: v for k, v in extra.items() if v}}


def write_record(path: Path, record: JobRecord, mode: int = 0o600) -> Path:
    """``record`` at ``path``, whole or not at all; readable by its owner only unless ``mode``
    says otherwise (a compiled project's record, which holds no value)."""
    from ..base.files import write_atomic

    write_atomic(path, json.dumps(record.to_json(), indent=1) + "\n", mode=mode)
    return path


def _texts(data: Any, what: str, where: str) -> dict[str, str]:
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise RecordError(f"{where}: {what} must map names to text")
    return dict(data)


def _newer(where: str, version: int, data: dict[str, Any]) -> RecordError:
    from .. import __version__

    writer = data.get("distcomp")
    by = f"distcomp {writer}" if isinstance(writer, str) and writer else "a newer distcomp"
    return RecordError(f"{where}: a job record of format {version}, written by {by}, is newer than this distcomp "
                       f"{__version__} reads (format {VERSION} and older): upgrade distcomp where the job runs (in "
                       "the step's image, or the environment of `mlflow run`: pip install -U distcomp), or make "
                       "the job again with this distcomp")


def read_record(path: "str | os.PathLike[str]") -> JobRecord:
    """The record at ``path``; one of a newer format, a file that is no record, or one that may not be
    trusted (another user's, writable by others: ``distcomp.agent.trust``) is a RecordError."""
    where = os.fspath(path)
    try:  # what it says runs: only a record of this user's (or root's) that no one else may change
        data = json.loads(read_trusted(where, "the job record"))
    except Untrusted as exc:
        raise RecordError(str(exc)) from None
    except OSError as exc:
        raise RecordError(f"cannot read the job record {where}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RecordError(f"{where}: not a job record (not JSON: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(KEY), int) or isinstance(data.get(KEY), bool):
        raise RecordError(f"{where}: not a distcomp job record (no {KEY!r} version)")
    version = data[KEY]
    if version > VERSION:
        raise _newer(where, version, data)
    if version < 1:
        raise RecordError(f"{where}: job record format {version} is unknown; make the job again with this distcomp")
    action = data.get("action")
    known = ACTIONS if version >= 2 else ("run", "reap")
    if action not in known:
        raise RecordError(f"{where}: unknown action {action!r} in a format {version} record (expected one of: "
                          f"{', '.join(known)})")
    options = data.get("options") or {}
    if not isinstance(options, dict):
        raise RecordError(f"{where}: options must be a mapping")
    for key in ("spec", "cwd", "target", "outcome_file"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise RecordError(f"{where}: {key} must be text")
    spec = data.get("spec")
    if spec and not os.path.isabs(spec):  # a compiled project's record names the spec beside it
        spec = os.path.join(os.path.dirname(os.path.abspath(where)), spec)
    params = _texts(data.get("params") or {}, "params", where) if version >= 2 else {}
    bad = sorted(name for name, rule in params.items() if rule not in PARAM_RULES)
    if bad:
        raise RecordError(f"{where}: params {', '.join(bad)}: a rule is one of {', '.join(PARAM_RULES)}")
    if action == "submit" and not data.get("target"):
        raise RecordError(f"{where}: a submit record names no target")
    return JobRecord(str(action), spec, data.get("cwd"), _texts(data.get("inputs") or {}, "inputs", where),
                     _texts(data.get("outputs") or {}, "outputs", where), _texts(data.get("env") or {}, "env", where),
                     options, data.get("target") if version >= 2 else None, params,
                     data.get("outcome_file") if version >= 2 else None)


def bind_params(record: JobRecord, words: Sequence[str], where: str = "the job record") -> JobRecord:
    """``record`` with the inputs its command line gave (``NAME=VALUE`` words, one per name its
    ``params`` declare; an ``if-set`` one with an empty VALUE is left out)."""
    inputs = dict(record.inputs)
    seen: set[str] = set()
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or name not in record.params:
            declared = ", ".join(record.params) or "none"
            what = f"{name!r} is not one of its parameters" if sep else f"{word!r} is not NAME=VALUE"
            raise RecordError(f"{where}: {what} (its parameters: {declared})")
        if name in seen:
            raise RecordError(f"{where}: parameter {name!r} is given twice")
        seen.add(name)
        if value or record.params[name] == "value":
            inputs[name] = value
    return replace(record, inputs=inputs)
