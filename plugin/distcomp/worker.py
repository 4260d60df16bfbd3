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
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .core.jobrecord import RUN_OPTIONS, JobRecord, RecordError, bind_params, read_record

if TYPE_CHECKING:
    from .records import JobOutcome
    from .spec import ComponentSpec

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
    submitted: dict[str, Any] = {k: options.pop(k) for k in ("job_env", "job_run", "job_record") if k in options}
    if submitted:  # `submit --target local`: the core made its run; this process runs the job and settles it
        outcome = _run_submitted(spec, record, options, submitted, None if quiet else echo, speaker("run"))
    else:
        outcome = run(spec, inputs=dict(record.inputs), outputs=dict(record.outputs), env=dict(record.env),
                  console=None if quiet else echo, notify=speaker("run"), **options)
    if record.outcome_file:
        from .cli._targets import write_status

        write_status(record.outcome_file, outcome)
    return outcome.exit_code if outcome.exit_code is not None else 1


def _run_submitted(spec: "ComponentSpec", record: JobRecord, options: dict[str, Any], given: dict[str, Any],
                   console: "Callable[[str], None] | None", say: "Callable[[str], None]") -> "JobOutcome":
    """A job the core submitted to the local target, run here to its end; then the core's
    ``settle`` ends its MLflow run (once, under its record's lock), so a detached job's run ends
    without anyone asking."""
    from .core.plan import make_plan
    from .core.submission import settle
    from .records import JobOutcome, JobState, TrackingRef
    from .targets.local import LocalRun, LocalTarget, job_id, run_here

    found = given.get("job_run") or {}
    ref = TrackingRef(str(found["run_id"]), str(found.get("tracking_uri") or ""),
                      str(found.get("experiment_id") or "")) if found.get("run_id") else None
    env = {str(k): str(v) for k, v in dict(given.get("job_env") or {}).items()}
    folder = Path(str(given["job_record"])) if given.get("job_record") else None
    layout = {"nodes": options.pop("nodes", None), "processes_per_node": options.pop("nproc_per_node", None)}
    request = LocalRun(inputs=dict(record.inputs), outputs=dict(record.outputs), env=dict(record.env),
                       echo=console is not None, **options)
    if not request.run_dir:
        raise RecordError("a submitted job's record names no run_dir")
    run_dir = Path(request.run_dir)
    plan = make_plan(spec.with_overrides(**layout), env={**os.environ, **request.env}, max_restarts=request.max_restarts,
                     system_metrics=request.system_metrics, system_metrics_interval=request.system_metrics_interval,
                     hang_timeout=request.hang_timeout)
    if ref is not None:  # who runs the job is this process, not the one that submitted it
        from .tracking import open_store

        try:
            open_store(ref.tracking_uri).log(ref.run_id, {"distcomp.supervisor.pid": str(os.getpid())})
        except Exception as exc:  # a store that stopped answering: the job runs on, its run says less
            say(f"warning: MLflow run {ref.run_id}: could not tag it with its supervisor: {exc}")
    try:
        outcome = run_here(plan, request, run_dir, env, ref, console, say)
    except BaseException as exc:  # the run ends with the reason (the submitter ends it too if it never started)
        state = JobState.CANCELLED if isinstance(exc, KeyboardInterrupt) else JobState.FAILED
        settle(job_id(run_dir), LocalTarget(), JobOutcome(job_id(run_dir), state, 1, message=f"distcomp stopped: {exc or type(exc).__name__}",
                                                          tracking=ref), folder, say)
        raise
    return settle(job_id(run_dir), LocalTarget(), outcome, folder, say)


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
