"""One local job from start to end, in this process: what ``distcomp.run``, ``distcomp run``
and a background job's worker do once the core has made the job's MLflow run.

``check_local`` refuses what a user can fix before anything of the job exists (inputs,
outputs, the run folder, a tracking store that cannot be used): the target's ``check``.
``run_here`` claims the run folder, runs and supervises the ranks with the run's env the core
gave (``JobContext.env``) and returns the job's outcome, whatever its end; the core's job
handle ends the MLflow run (``distcomp.core.submission.settle``): nothing here starts or ends
one. System-metrics monitors log into the run while the job runs.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ...errors import UsageError
from ...records import JobOutcome, JobState, TrackingRef

if TYPE_CHECKING:
    from ...core.jobs import Job
    from ...records import Plan, Topology
    from ...base.redact import Masker
    from ...spec import ComponentSpec
    from ...tracking._monitors import Monitors
    from ._codewrites import CodeWatch
    from ._records import RunResult
    from ._resume import Resume

Say = Callable[[str], None]
PREFIX = "local:"
HERE = "here"  # the submit-only key of ``distcomp.run``'s submit: a ``Here``, the job runs in this process


@dataclass(frozen=True)
class LocalRun:
    """What a local job is asked to do (``distcomp.run``'s keywords, ``distcomp run``'s flags)."""

    inputs: Mapping[str, Any] = field(default_factory=dict)  # as given: text, typed by the spec
    outputs: Mapping[str, str] = field(default_factory=dict)  # output name -> path
    run_dir: str | None = None
    timeout: float | None = None
    max_restarts: int | None = None  # None: the spec's (the plan's ``max_restarts``)
    grace: float = 5.0
    tracking: bool = True
    experiment: str | None = None
    system_metrics: bool | None = None  # None: the spec's, else on (the plan's ``system_metrics_interval``)
    system_metrics_interval: float | None = None
    hang_timeout: float | None = None  # None: the spec's, else off (the plan's ``hang_timeout``)
    echo: bool = False  # rank output to ``console`` too (it is always in the logs)
    env: Mapping[str, str] = field(default_factory=dict)  # for every rank, over the spec's own variables


@dataclass(frozen=True)
class Here:
    """``distcomp.run``: the local target's submit runs the job here to its end; ``console``
    gets the ranks' output (None: the logs only); ``resume``: where a resumed job goes on."""

    console: Callable[[str], None] | None = None
    resume: "Resume | None" = None


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def job_id(run_dir: Path) -> str:
    return PREFIX + str(run_dir)


def request_of(options: Mapping[str, Any], echo: bool = False) -> LocalRun:
    """The local target's options (bound) as the run they ask for."""
    run_dir = options.get("run_dir")
    return LocalRun(inputs=dict(options.get("inputs") or {}), outputs=dict(options.get("outputs") or {}),
                    run_dir=os.fspath(run_dir) if run_dir else None, timeout=options.get("timeout"),
                    max_restarts=options.get("max_restarts"), grace=float(options.get("grace", 5.0)),
                    tracking=bool(options.get("tracking", True)), experiment=options.get("experiment") or None,
                    system_metrics=options.get("system_metrics"),
                    system_metrics_interval=options.get("system_metrics_interval"),
                    hang_timeout=options.get("hang_timeout"), echo=echo,
                    env={str(k): str(v) for k, v in dict(options.get("env") or {}).items()})


def run_folder_of(spec: "ComponentSpec", request: LocalRun, cwd: Path) -> Path:
    """The job's run folder: ``run_dir``, else a new one under ``jobs.job_base``; absolute."""
    from ...core.jobs import default_run_dir

    run_dir = Path(request.run_dir) if request.run_dir else default_run_dir(spec, cwd)
    return run_dir if run_dir.is_absolute() else cwd / run_dir


def check_local(plan: "Plan", request: LocalRun, cwd: Path, run_dir: Path | None = None) -> "Job":
    """The job as its ranks will see it; what a user can fix is a UsageError, raised before
    anything of the job exists. Creates nothing."""
    from ...core.jobs import make_job
    from ...spec import InputError, utf8_problem
    from ._records import RunOptions

    if not request.tracking and (request.system_metrics is True or request.experiment):
        raise UsageError("tracking is off; an experiment and system metrics need it on")
    not_text = utf8_problem(request.experiment) if request.experiment else None
    if not_text:  # the MLflow store could not take it: refused before anything exists
        raise UsageError(f"--experiment {request.experiment!r} {not_text}; give the experiment's name as UTF-8 text")
    bad = [n for n in request.env if not _ENV_NAME.match(n)]
    if bad:
        raise UsageError(f"--env {bad[0]!r}: not a variable name (letters, digits and '_', not first a digit)")
    if request.tracking:
        check_tracking_uri(cwd)
    try:
        job = make_job(plan.spec, dict(request.inputs), dict(request.outputs),
                       run_dir or run_folder_of(plan.spec, request, cwd), cwd)
        RunOptions(job.run_dir, request.timeout, request.max_restarts or 0, request.grace)  # checks the numbers
    except InputError:  # one problem a line: the CLI indents the lines after the first
        raise
    except UsageError as exc:  # a bug (any other ValueError) is not the user's: it shows its traceback
        raise UsageError(str(exc).replace("\n", "\n  ")) from None
    return job


def check_free(run_dir: Path, grace: float) -> None:
    """A run folder another job holds (or one that cannot be made) is refused now; what
    checking made is undone."""
    from ._claim import RunDirBusy, claim

    try:
        claim(run_dir, "check", grace, watchdog=False).release()
    except RunDirBusy as exc:
        raise UsageError(str(exc)) from None


def run_here(plan: "Plan", request: LocalRun, run_dir: Path, env: Mapping[str, str], tracking: TrackingRef | None,
             console: Callable[[str], None] | None = None, say: Say | None = None,
             cwd: Path | None = None, resume: "Resume | None" = None) -> JobOutcome:
    """Run ``plan`` (the core's) here in ``run_dir`` to its end; ``env``: the job's MLflow run
    as the core gave it (``tracking`` names the run; None: untracked). ``console`` gets rank
    output (when ``request.echo``), ``say`` progress. The run is not ended here."""
    from ...core.jobs import create_outputs, job_base
    from ...base.redact import job_masker
    from ...spec import RenderError
    from ._claim import RunDirBusy, claim
    from ._records import RunOptions
    from ._resume import write_resume_record
    from ._runner import LaunchError, run_topology

    notify = say or (lambda _m: None)
    cwd = cwd or Path.cwd()
    spec, topology = plan.spec, plan.topology
    job = check_local(plan, replace(request, tracking=False, experiment=None, system_metrics=False), cwd, run_dir)
    base = job_base(cwd)  # cwd, unless it lies in a registry: defaults must not be written there
    if base != cwd:
        notify(f"the current folder is inside a component registry, which no job may change: the run folder, a "
               f"relative MLflow store and its artifacts default to {base}")
    masker = job_masker(spec, job.values, request.env)  # once for the job: every path masks by it
    notify = _masking(notify, masker)  # the console: what distcomp says of the job is masked too
    for note in plan.warnings:  # the user's launcher against the spec, a framework that would misbehave
        notify(f"warning: {note}")
    try:  # one job per run folder, held before anything of the job runs
        held = claim(job.run_dir, job.job_id, request.grace)
    except RunDirBusy as exc:
        raise UsageError(str(exc)) from None
    # released at the end; undone if the job never started
    with held, _working_folder(base, cwd):
        notify(plan.summary())
        record = {"mlflow": {"run_id": tracking.run_id, "experiment_id": tracking.experiment_id,
                             "tracking_uri": tracking.tracking_uri}} if tracking else {}
        options = RunOptions(job.run_dir, request.timeout, plan.max_restarts, request.grace,
                             request.echo and console is not None, job.job_id,
                             env={**request.env, **(env if tracking else {"DISTCOMP_TRACKING": "off"})},
                             record=record, masker=masker, first_attempt=resume.first_attempt if resume else 0,
                             failures_used=resume.failures_used if resume else 0,
                             restarts=resume.restarts if resume else (), hang_timeout=plan.hang_timeout)
        if resume is not None:
            notify(f"resuming: attempt {resume.first_attempt + 1} (restart_count() {resume.first_attempt}), "
                   f"checkpoint folder {rel(job.run_dir / 'checkpoint', cwd)}")
        write_resume_record(plan, job.run_dir, request.inputs, job.outputs, request.env,
                            {"timeout": request.timeout, "grace": request.grace, "tracking": request.tracking,
                             "experiment": request.experiment, **watched(plan, request.tracking)}, cwd)
        notify(f"run folder {rel(job.run_dir, cwd)} (logs in {rel(job.run_dir / 'logs', cwd)})")
        create_outputs(job)
        monitors = (_start_monitors(tracking, topology, job.run_dir / "logs", plan.system_metrics_interval)
                    if plan.system_metrics_interval is not None else None)
        watch = _watch_code(spec, job, base, tracking.tracking_uri if tracking else "")  # before any rank starts
        try:
            result = run_topology(spec, topology, job.values, job.outputs, options,
                                  console=console or (lambda _t: None), notify=notify, claim=held)
        except (LaunchError, RenderError) as exc:
            message = masker.text(str(exc))
            notify(f"failed: {message}")
            _stop_monitors(monitors, notify)
            return JobOutcome(job_id(job.run_dir), JobState.FAILED, 1, message=message, tracking=tracking,
                              end_tags={"distcomp.exit_code": "1"})
        except BaseException:  # distcomp itself was stopped outside the supervisor: the core ends the run
            _stop_monitors(monitors, notify)
            raise
        _report(result, cwd, notify)
        wrote = watch.note(rel(spec.code, cwd))
        if wrote:
            notify(wrote)
        _stop_monitors(monitors, notify)
    return outcome_of(result, tracking).masked(masker)


def _watch_code(spec: "ComponentSpec", job: "Job", base: Path, uri: str) -> "CodeWatch":
    """The code folder's files now, leaving out what distcomp writes there itself: the run
    folder, the outputs, the default store and runs folders, a local MLflow store's files."""
    from ._codewrites import CodeWatch

    skip = [job.run_dir, *map(Path, job.outputs.values()),
            *(base / name for name in ("runs", "mlruns", "mlflow.db", "mlflow.db.lock"))]
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
                      started=data.get("started"), ended=data.get("ended"), tracking=tracking, details=data,
                      end_tags=end_tags(data), restarts=restarts_of(data))


def end_tags(data: Mapping[str, Any]) -> dict[str, str]:
    """What the run's end is tagged with that only this target knows, from a result's record
    (``RunResult.to_json``, the final status.json): exit code, attempts, wall time, and the
    failing process, its node and exit code."""
    tags = {}
    for key, value in (("exit_code", data.get("exit_code")), ("attempts", data.get("attempts"))):
        if isinstance(value, int) and not isinstance(value, bool):
            tags[f"distcomp.{key}"] = str(value)
    wall = data.get("wall_s")
    if isinstance(wall, (int, float)) and not isinstance(wall, bool):
        tags["distcomp.wall_s"] = f"{wall:.3f}"
    cause = data.get("root_cause")
    if isinstance(cause, Mapping) and cause.get("name"):
        from ...mlstore._records import FAILURE_TAG  # here: a job that succeeded imports no MLflow side

        tags.update({f"{FAILURE_TAG}.process": str(cause["name"]), f"{FAILURE_TAG}.node": str(cause.get("node")),
                     f"{FAILURE_TAG}.exit_code": str(cause.get("returncode"))})
    return tags


def restarts_of(data: Mapping[str, Any]) -> tuple[str, ...]:
    """Each restart's cause, from a result's record (status.json's ``restarts``)."""
    causes = data.get("restarts")
    return tuple(str(c) for c in causes) if isinstance(causes, list) else ()


def rel(path: Path, cwd: Path) -> str:
    """A path as printed: usable from the user's folder, which need not be ``cwd`` (the MLflow
    backend runs the job in the project's folder): ``distcomp.base.files.shown_path``."""
    from ...base.files import shown_path

    return shown_path(path)


def check_tracking_uri(cwd: Path) -> None:
    """A store that cannot be used (a SQLite path that is a folder, ...) is refused before anything
    of the job exists, not after MLflow's retries."""
    from ...tracking import TrackingError, usable_uri

    try:
        usable_uri(os.environ, cwd)
    except TrackingError as exc:
        raise UsageError(f"MLflow tracking: {exc}") from None


def watched(plan: "Plan", tracked: bool) -> dict[str, Any]:
    """The plan's watch as options a later run of the job (--resume, a background worker) takes
    again; an untracked job samples nothing (and must not ask for it: tracking off refuses that)."""
    return {"system_metrics": tracked and plan.system_metrics_interval is not None,
            "system_metrics_interval": plan.system_metrics_interval, "hang_timeout": plan.hang_timeout}


def _start_monitors(tracking: TrackingRef | None, topology: "Topology", log_dir: Path,
                    interval: float | None = None) -> "Monitors | None":
    """One MLflow system-metrics monitor per node (``tracking.nodes.local_node_ids``: this host's
    name for one node, node-0, node-1, ... for simulated ones), sampling every ``interval`` s:
    they log into the job's run while it runs (they neither start nor end it)."""
    if tracking is None:
        return None
    from ...tracking._monitors import start_monitors
    from ...tracking.nodes import local_node_ids

    log_dir.mkdir(parents=True, exist_ok=True)
    return start_monitors(tracking.run_id, tracking.tracking_uri, local_node_ids(topology.nodes), log_dir, interval)


def _stop_monitors(monitors: "Monitors | None", notify: Say) -> None:
    for problem in monitors.stop() if monitors is not None else []:
        notify(f"warning: {problem}")
