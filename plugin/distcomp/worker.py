"""``python -m distcomp.worker JOB.json [NAME=VALUE ...]``: how distcomp starts a process of its own.

A background ``distcomp submit --target local`` job, the watchdog that closes a job whose
``distcomp run`` died, the KFP step (one node: ``run``; several: ``submit`` to kubeflow) and
the MLflow project's entry point are processes distcomp starts for itself. They read a job
record (``distcomp.core.jobrecord``: versioned JSON), never command-line flags; the only words after
the record are the ``NAME=VALUE`` inputs its ``params`` declare (what MLflow fills in).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from .core.jobrecord import RUN_OPTIONS, JobRecord, RecordError, bind_params, read_record

__all__ = ["execute", "main"]


def _run(record: JobRecord, where: str) -> int:
    from .api import load, run
    from .cli._common import deprecated, echo, speaker

    options = dict(record.options)
    for key, value in options.items():
        kind = RUN_OPTIONS.get(key)
        if kind is None or value is not None and (not isinstance(value, kind) or isinstance(value, bool)
                                                   and kind is not bool):
            raise RecordError(f"{where}: option {key!r} = {value!r} is not one a run takes")
    if record.spec is None:
        raise RecordError(f"{where}: a run record names no spec")
    quiet = bool(options.pop("quiet", False))
    spec = load(record.spec, warn=deprecated)
    outcome = run(spec, inputs=dict(record.inputs), outputs=dict(record.outputs), env=dict(record.env),
                  console=None if quiet else echo, notify=speaker("run"), **options)
    if record.outcome_file:
        from .cli._targets import write_status

        write_status(record.outcome_file, outcome)
    return outcome.exit_code if outcome.exit_code is not None else 1


def _submit(record: JobRecord, where: str) -> int:
    """``distcomp.submit(spec, target, **options)`` and wait, as ``distcomp submit`` does; the
    options are checked against the target's declared ones there, with its messages."""
    from .api import load, submit
    from .cli._common import deprecated, speaker
    from .cli._targets import wait_and_report

    if record.spec is None:
        raise RecordError(f"{where}: a submit record names no spec")
    if record.outputs or record.env:
        raise RecordError(f"{where}: a submit record gives outputs and env as its target's options")
    assert record.target is not None  # read_record checked it
    options = dict(record.options)
    layout = {key: options.pop(key, None) for key in ("nodes", "nproc_per_node")}
    if record.inputs:
        given = options.get("inputs") or {}
        if not isinstance(given, dict):
            raise RecordError(f"{where}: option 'inputs' must map names to values")
        options["inputs"] = {**given, **record.inputs}
    say = speaker("submit")
    handle = submit(load(record.spec, warn=deprecated), record.target, notify=say, **layout, **options)
    print(handle, flush=True)  # the job id, alone on stdout, as `distcomp submit` prints it
    return wait_and_report(handle, say, record.outcome_file)


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
    key = o.get("note_key") if isinstance(o.get("note_key"), str) else None  # signs the watchdog's note
    report = reap(Path(run_dir), grace, lock_fd=lock_fd, cookie=cookie, key=key)
    print(f"distcomp reap: {run_dir}: {report.message}", flush=True)
    return 0


def execute(record: JobRecord, where: str = "the job record") -> int:
    """Do what ``record`` says, in its folder; the exit code a process of it returns."""
    if record.cwd:
        try:
            os.chdir(record.cwd)
        except OSError as exc:
            raise RecordError(f"{where}: cannot work in {record.cwd}: {exc.strerror or exc}") from None
    actions = {"reap": _reap, "submit": _submit, "run": _run}
    return actions[record.action](record, where)


def main(argv: Sequence[str] | None = None) -> int:
    from .cli._console import guard
    from .errors import DistcompError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        print("usage: python -m distcomp.worker JOB.json [NAME=VALUE ...]  (a job record distcomp wrote, and the "
              "values of the parameters it declares)", file=sys.stderr)
        return 2
    action = "worker"
    with guard():  # a console that goes away ends what is shown, not what is done
        try:
            record = bind_params(read_record(args[0]), args[1:], args[0])
            action = record.action
            return execute(record, args[0])
        except DistcompError as exc:  # said as `distcomp run` says it: the console reads the same
            from .cli._common import error_text

            print(f"distcomp {action}: {error_text(exc)}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print("distcomp: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    raise SystemExit(main())
