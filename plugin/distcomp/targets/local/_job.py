"""One local job from start to end: what ``distcomp.run`` and ``distcomp run`` do.

The spec's job is checked whole (inputs, outputs, run folder), its run folder claimed, its
MLflow run created before any rank starts, the ranks run and supervised, the run ended with the
job's state. Problems a user can fix raise UsageError before anything exists; a job that ran
comes back as a JobOutcome, whatever its end.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

from ...errors import UsageError
from ...records import JobOutcome, JobState, TrackingRef

if TYPE_CHECKING:
    from ...core.jobs import Job
    from ...records import Plan, Topology
    from ...base.redact import Masker
    from ...spec import ComponentSpec
    from ...tracking import JobRun
    from ...tracking._monitors import Monitors
    from ._codewrites import CodeWatch
    from ._records import RunResult

Say = Callable[[str], None]
PREFIX = "local:"


@dataclass(frozen=True)
class LocalRun:
    """What a local job is asked to do (``distcomp.run``'s keywords, ``distcomp run``'s flags)."""

    inputs: Mapping[str, str] = field(default_factory=dict)  # as given: text, typed by the spec
    outputs: Mapping[str, str] = field(default_factory=dict)  # output name -> path
    run_dir: str | None = None
    timeout: float | None = None
    max_restarts: int = 0
    grace: float = 5.0
    tracking: bool = True
    experiment: str | None = None
    system_metrics: bool = False
    echo: bool = False  # rank output to ``console`` too (it is always in the logs)
    env: Mapping[str, str] = field(default_factory=dict)  # for every rank, over the spec's own variables


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def job_id(run_dir: Path) -> str:
    return PREFIX + str(run_dir)


def run_local(plan: "Plan", request: LocalRun, console: Callable[[str], None] | None = None,
              say: Say | None = None, cwd: Path | None = None) -> JobOutcome:
    """Run ``plan`` (the core's, made by ``distcomp.run`` with the env its ranks get) here;
    ``console`` gets rank output (when ``request.echo``), ``say`` progress."""
    from ...core.jobs import create_outputs, default_run_dir, job_base, make_job
    from ...base.redact import job_masker
    from ...spec import InputError, RenderError, utf8_problem
    from ._claim import RunDirBusy, claim
    from ._records import RunOptions
    from ._runner import LaunchError, run_topology

    notify = say or (lambda _m: None)
    if not request.tracking and (request.system_metrics or request.experiment):
        raise UsageError("tracking is off; an experiment and system metrics need it on")
    not_text = utf8_problem(request.experiment) if request.experiment else None
    if not_text:  # the MLflow store could not take it: refused before anything exists
        raise UsageError(f"--experiment {request.experiment!r} {not_text}; give the experiment's name as UTF-8 text")
    bad = [n for n in request.env if not _ENV_NAME.match(n)]
    if bad:
        raise UsageError(f"--env {bad[0]!r}: not a variable name (letters, digits and '_', not first a digit)")
    cwd = cwd or Path.cwd()
    if request.tracking:
        check_tracking_uri(cwd)
    spec, topology = plan.spec, plan.topology
    run_dir = Path(request.run_dir) if request.run_dir else default_run_dir(spec, cwd)
    base = job_base(cwd)  # cwd, unless it lies in a registry: defaults must not be written there
    if base != cwd:
        notify(f"the current folder is inside a component registry, which no job may change: the run folder, a "
               f"relative MLflow store and its artifacts default to {base}")
    try:
        job = make_job(spec, dict(request.inputs), dict(request.outputs), run_dir, cwd)
        RunOptions(job.run_dir, request.timeout, request.max_restarts, request.grace)  # checks the numbers
    except InputError:  # one problem a line: the CLI indents the lines after the first
        raise
    except UsageError as exc:  # a bug (any other ValueError) is not the user's: it shows its traceback
        raise UsageError(str(exc).replace("\n", "\n  ")) from None
    masker = job_masker(spec, job.values, request.env)  # once for the job: every path masks by it
    notify = _masking(notify, masker)  # the console: what distcomp says of the job is masked too
    for note in plan.warnings:  # the user's launcher against the spec, a framework that would misbehave
        notify(f"warning: {note}")
    try:  # one job per run folder, held before anything of the job exists (its MLflow run, its logs)
        held = claim(job.run_dir, job.job_id, request.grace)
    except RunDirBusy as exc:
        raise UsageError(str(exc)) from None
    # released at the end; undone if the job never started (a tracking store out of reach)
    with held, _working_folder(base, cwd):
        notify(plan.summary())
        tracking = _start_tracking(job, topology, base, request, notify, masker) if request.tracking else None
        monitors: "Monitors | None" = None
        try:  # the run exists: whatever stops distcomp before the ranks start ends it FAILED, not RUNNING
            if tracking is not None:
                from ...tracking import describe

                notify(describe(tracking))
            ref = TrackingRef(tracking.run.run_id, tracking.uri, tracking.run.experiment_id) if tracking else None
            record = {"mlflow": {"run_id": ref.run_id, "experiment_id": ref.experiment_id,
                                 "tracking_uri": ref.tracking_uri}} if ref else {}
            options = RunOptions(job.run_dir, request.timeout, request.max_restarts, request.grace,
                                 request.echo and console is not None, job.job_id,
                                 env={**request.env, **(tracking.env() if tracking else {"DISTCOMP_TRACKING": "off"})},
                                 record=record, masker=masker)
            notify(f"run folder {rel(job.run_dir, cwd)} (logs in {rel(job.run_dir / 'logs', cwd)})")
            create_outputs(job)
            monitors = _start_monitors(tracking, topology, job.run_dir / "logs") if request.system_metrics else None
        except BaseException as exc:
            try:
                _end_tracking(tracking, monitors, None, job.run_dir, notify,
                              masker.text(f"distcomp stopped before the job started: {type(exc).__name__}: {exc}"))
            except Exception:  # the notice itself failed: the run is ended, the first error is the one to raise
                pass
            raise
        watch = _watch_code(spec, job, base, tracking)  # before any rank starts
        try:
            result = run_topology(spec, topology, job.values, job.outputs, options,
                                  console=console or (lambda _t: None), notify=notify, claim=held)
        except (LaunchError, RenderError) as exc:
            message = masker.text(str(exc))
            notify(f"failed: {message}")
            _end_tracking(tracking, monitors, None, job.run_dir, notify, message)
            return JobOutcome(job_id(job.run_dir), JobState.FAILED, 1, message=message, tracking=ref)
        except BaseException:  # distcomp itself was stopped outside the supervisor: end the run, then go
            _end_tracking(tracking, monitors, None, job.run_dir, notify, "distcomp was stopped before the job ended",
                          JobState.CANCELLED)
            raise
        _report(result, cwd, notify)
        wrote = watch.note(rel(spec.code, cwd))
        if wrote:
            notify(wrote)
        _end_tracking(tracking, monitors, result, job.run_dir, notify)
    return outcome_of(result, ref).masked(masker)


def _watch_code(spec: "ComponentSpec", job: "Job", base: Path, tracking: "JobRun | None") -> "CodeWatch":
    """The code folder's files now, leaving out what distcomp writes there itself: the run
    folder, the outputs, the default store and runs folders, a local MLflow store's files."""
    from ._codewrites import CodeWatch

    skip = [job.run_dir, *map(Path, job.outputs.values()),
            *(base / name for name in ("runs", "mlruns", "mlflow.db", "mlflow.db.lock"))]
    uri = tracking.uri if tracking is not None else ""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):].partition("?")[0])
        skip += [db, *(db.with_name(db.name + end) for end in ("-journal", "-wal", "-shm", ".lock"))]
    elif uri.startswith("file:") or (uri and "://" not in uri):
        skip.append(Path(uri.removeprefix("file://").removeprefix("file:")))
    return CodeWatch.start(spec, skip)


def _masking(say: Say, masker: "Masker") -> Say:
    return lambda message: say(masker.text(message))


@contextmanager
def _working_folder(base: Path, cwd: Path) -> Iterator[None]:
    """This process works from ``base`` while the job runs when the current folder lies in a
    registry: what MLflow resolves from the current folder (a new experiment's ``./mlruns``,
    where the job's logs are stored as artifacts) must not be written there either."""
    if base == cwd:
        yield
        return
    base.mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    os.chdir(base)
    try:
        yield
    finally:
        try:
            os.chdir(here)
        except OSError:  # the folder went away meanwhile: stay where we are
            pass


def _report(result: "RunResult", cwd: Path, notify: Say) -> None:
    if result.state is JobState.SUCCEEDED:
        outs = ", ".join(f"{n}={rel(Path(p), cwd)}" for n, p in result.outputs.items())
        notify(f"succeeded in {result.wall_s:.1f} s" + (f" after {result.attempts - 1} restart(s)"
                                                         if result.attempts > 1 else "")
               + (f"; outputs: {outs}" if outs else ""))
    elif result.state is JobState.FAILED and result.root_cause is not None:
        notify(f"job failed: {result.root_cause.describe()}\nthe other processes were stopped; logs in "
               f"{rel(result.run_dir / 'logs', cwd)}")
    else:
        notify(result.message)


def outcome_of(result: "RunResult", tracking: TrackingRef | None) -> JobOutcome:
    """A local run's result in the vocabulary every target shares."""
    data = result.to_json()
    return JobOutcome(job_id(result.run_dir), result.state, result.exit_code,
                      root_cause=result.root_cause.describe() if result.root_cause else "",
                      message=result.message, outputs=result.outputs, wall_s=result.wall_s,
                      started=data.get("started"), ended=data.get("ended"), tracking=tracking, details=data)


def rel(path: Path, cwd: Path) -> str:
    """A path as printed: usable from the user's folder, which need not be ``cwd`` (the MLflow
    backend runs the job in the project's folder): ``distcomp.base.files.shown_path``."""
    from ...base.files import shown_path

    return shown_path(path)


def _start_tracking(job: "Job", topology: "Topology", cwd: Path, request: LocalRun,
                    notify: Say, masker: "Masker") -> "JobRun | None":
    """The job's MLflow run, before any rank starts; a store that cannot be used stops here."""
    from ...tracking import TrackingError, start_run

    try:
        return start_run(job, topology, os.environ, cwd, request.experiment, notify=notify, local_ranks=True,
                         given=request.env, masker=masker)
    except TrackingError as exc:
        raise UsageError(f"MLflow tracking: {exc}") from None


def check_tracking_uri(cwd: Path) -> None:
    """A store that cannot be used (a SQLite path that is a folder, ...) is refused before anything
    of the job exists, not after MLflow's retries."""
    from ...tracking import TrackingError, usable_uri

    try:
        usable_uri(os.environ, cwd)
    except TrackingError as exc:
        raise UsageError(f"MLflow tracking: {exc}") from None


def _start_monitors(tracking: "JobRun | None", topology: "Topology", log_dir: Path) -> "Monitors | None":
    """One MLflow system-metrics monitor per node, named as MLflow's node id (node0, node1, ...)."""
    if tracking is None:
        return None
    from ...tracking._monitors import start_monitors

    log_dir.mkdir(parents=True, exist_ok=True)
    return start_monitors(tracking.run.run_id, tracking.uri, [f"node{n}" for n in range(topology.nodes)], log_dir)


def _end_tracking(tracking: "JobRun | None", monitors: "Monitors | None", result: "RunResult | None",
                  run_dir: Path, notify: Say, error: str = "", state: JobState = JobState.FAILED) -> None:
    problems = monitors.stop() if monitors is not None else []
    if tracking is not None:
        status, more = tracking.finish(result, run_dir / "logs", error, state)
        problems += more
        # the status the store holds: RUNNING when it did not take the job's end (the warnings say why)
        notify(f"MLflow run {tracking.run.run_id}: " + ("left RUNNING, not ended" if status == "RUNNING" else status))
    for problem in problems:
        notify(f"warning: {problem}")
