"""A submitted job in the core: its one MLflow run, for every target (``distcomp.core.target``).

``submit`` takes the job's plan from what was compiled (made once, by the core's compile),
binds its inputs, builds its masker, creates its MLflow run before the target's ``submit``
(which gets all of it as a ``JobContext``) and keeps a small record per job:
``$XDG_STATE_HOME/distcomp/jobs/NAME/job.json`` (mode 600: it holds the masker's needles), found again from ``TARGET:ID`` through ``jobs/.ids/HASH``, the hash of ``TARGET:ID`` and
the place where the id is unique (the target's optional ``place(job_id)``: the Slurm cluster's
name, the Ray Jobs API's address), since a scheduler's id names one job only there. A record
found is used only if it names that job at that place and, when the target's outcome names the
job's run, that run: never another job's run, secrets or logs. ``settle`` is what the job
handle does with every outcome a target reports: the job's secrets masked, its run named, and,
once the job has ended, the run ended (once, under the record's lock: whichever process sees
the end first, the one that waits, or ``distcomp status|cancel`` later from another shell).

Where the record is not (another machine), the run the target reports (``JobOutcome.tracking``:
the Slurm job folder's job.json, a Kubeflow job's annotations) is ended, unless its
``distcomp.state`` tag says someone did.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ..errors import UsageError
from ..records import JobOutcome, TrackingRef

if TYPE_CHECKING:
    from .plan import Plan
    from .plugins import TargetPlugin
    from ..base.redact import Masker
    from ..spec import ComponentSpec
    from .target import Compiled, Notify, Target

__all__ = ["given_env", "jobs_dir", "masker_of", "record_of", "settle", "submit"]

RECORD, LOCK, LOGS, IDS = "job.json", "job.lock", "logs", ".ids"
VERSION = 1
JOB_TAG = "distcomp.job"  # TARGET:ID on the run: which job of which target it is
# the submit key of a resumed job (``distcomp run --resume``): the TrackingRef of the run it goes on in
RESUME = "resume_run"
Call = Callable[..., Any]  # (method, *args) -> the target's answer, its errors named (api._call)


def jobs_dir() -> Path:
    """``$XDG_STATE_HOME/distcomp/jobs`` (default ``~/.local/state/distcomp/jobs``)."""
    state = os.environ.get("XDG_STATE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(os.path.abspath(state)) / "distcomp" / "jobs"


def _index(job: str, place: str = "") -> Path:
    import hashlib  # here: an untracked `distcomp run` never looks a job up by its id

    key = f"{job}@{place}" if place else job
    return jobs_dir() / IDS / hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


def place_of(instance: "Target | None", job: str) -> str:
    """Where job ``TARGET:ID``'s id names one job (the target's ``place``), "" when it says none."""
    if instance is None:
        return ""
    try:
        return str(instance.place(job.partition(":")[2]) or "")
    except Exception:  # a cluster that does not answer now: the bare id, and the record checked
        return ""


def record_of(job: str, instance: "Target | None" = None) -> Path | None:
    """The record folder of job ``TARGET:ID``, if this machine submitted it (at the place the
    target ``instance`` says the id names it)."""
    place = place_of(instance, job)
    try:
        folder = jobs_dir() / _index(job, place).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    data = _read(folder)
    return folder if data.get("job") == job and str(data.get("place") or "") == place else None


def masker_of(job: str, folder: Path | None = None, instance: "Target | None" = None) -> "Masker":
    """The masker of job ``TARGET:ID`` from its record (none: a job submitted elsewhere)."""
    folder = folder if folder is not None and (folder / RECORD).is_file() else record_of(job, instance)
    return _masker(_read(folder) if folder is not None else {})


def _read(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(folder: Path, data: Mapping[str, Any]) -> None:
    from ..base.files import write_atomic

    write_atomic(folder / RECORD, json.dumps(data, indent=2) + "\n", mode=0o600)


def _masker(data: Mapping[str, Any]) -> "Masker":
    from ..base.redact import Masker

    return Masker(tuple(str(n) for n in data.get("needles") or ()))


# -- submitting ------------------------------------------------------------------------------

def submit(found: "TargetPlugin", instance: "Target", compiled: "Compiled", options: Mapping[str, Any],
           notify: "Notify", call: Call) -> tuple[str, Path | None]:
    """Submit ``compiled`` (what the target's compile made of the core's plan, ``compiled.plan``)
    with ``instance``; returns the target's job id and the job's record folder. The record is
    written before the target's ``submit`` (a job that ends meanwhile is settled with it), its
    id added after."""
    from ..base.redact import job_masker
    from ..spec import bind_inputs
    from .target import JobContext

    plan = compiled.plan
    assert plan is not None
    spec = plan.spec
    values = bind_inputs(spec, dict(options.get("inputs") or {}), Path.cwd())  # InputError: a UsageError
    masker = job_masker(spec, values, given_env(options))
    _check_places(found, spec, options)
    call("check", plan, options, compiled)  # the target's refusals, before anything of the job exists
    here = call("job_folder", plan, options)  # where the ranks and the run's end share files, if anywhere
    name = f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}"
    folder = jobs_dir() / name
    run = None
    folder.mkdir(parents=True, mode=0o700)
    try:
        if options.get("tracking", True):
            run = _start_run(found, plan, values, masker, options, name, here or folder, notify, call)
            if run is not None:  # said once the run exists: a notify that fails ends it FAILED below
                from ..tracking import describe

                notify(describe(run))
        env = _rank_env(run, found.type.shares_files)
        ref = TrackingRef(run.run.run_id, run.uri, run.run.experiment_id) if run is not None else None
        record = {"version": VERSION, "job": "", "place": "", "name": name, "needles": list(masker.needles),
                  "run_id": ref.run_id if ref else "", "tracking_uri": ref.tracking_uri if ref else "",
                  "experiment_id": ref.experiment_id if ref else "",
                  # where its artifacts go: the end needs no look-up of a store that may be away by then
                  "artifact_uri": run.run.artifact_uri if run is not None else "",
                  "started_ms": run.started_ms if run is not None else 0, "ended": None}
        _write(folder, record)
        job = JobContext(plan, compiled, MappingProxyType(dict(values)), MappingProxyType(env), masker, name, ref,
                         here, folder)
        job_id = str(call("submit", job, options, notify))
    except BaseException as exc:  # no job: its run ends with the reason, never left RUNNING (Ctrl-C: KILLED)
        if isinstance(exc, Exception) and masker and masker.text(str(exc)) != str(exc):
            exc.args = (masker.text(str(exc)),)  # the reason as the console shows it: the job's secrets masked
        if run is not None and not _read(folder).get("ended"):  # (a job the target ran to its end and settled)
            from ..records import JobState

            reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{exc}" or type(exc).__name__
            state = JobState.CANCELLED if isinstance(exc, KeyboardInterrupt) else JobState.FAILED
            status, problems = run.finish(None, folder / LOGS, masker.text(f"not submitted: {reason}"), state)
            for problem in problems:
                notify(f"warning: {problem}")
        import shutil  # here: shutil (with bz2, lzma) is nothing else a run needs before its ranks start

        shutil.rmtree(folder, ignore_errors=True)
        raise
    key = f"{found.type.name}:{job_id}"
    place = place_of(instance, key)
    with _locked(folder):  # the job may have ended and been settled meanwhile (its "ended" stays)
        ended = _read(folder).get("ended")
        _write(folder, {**record, "job": key, "place": place, "ended": ended})
    _index(key, place).parent.mkdir(parents=True, exist_ok=True)
    _index(key, place).write_text(name + "\n", encoding="utf-8")
    # which job of which target the run is; a job in a folder shared with this machine (the local
    # target's, which may have ended by now: a store gone meanwhile would cost MLflow's minutes
    # of retries here) is told by its end, as every ended one is
    if run is not None and not ended and here is None:
        try:  # shown by the MLflow UI beside its name
            run.store.log(run.run.run_id, {JOB_TAG: key})
        except Exception as exc:  # a store that stopped answering: the job runs on, its run says less
            notify(f"warning: MLflow run {run.run.run_id}: could not tag it with its job {key}: {exc}")
    return job_id, folder


def given_env(options: Mapping[str, Any]) -> dict[str, str]:
    """The variables the user gave every rank (the ``env`` option of a target that has one)."""
    given = options.get("env")
    return {str(k): str(v) for k, v in given.items()} if isinstance(given, Mapping) else {}


def _check_places(found: "TargetPlugin", spec: "ComponentSpec", options: Mapping[str, Any]) -> None:
    """The one output-path rule, for every target alike (``jobs.written_place_problems``): where
    its options say the job writes (``TargetOption.writes``), no system folder, registry or code
    folder, refused before anything of the job exists (its job folder, its MLflow run)."""
    from .jobs import written_place_problems
    from ..spec import InputError

    outputs: dict[str, str] = {}
    folders: dict[str, str] = {}
    here = True
    for option in found.type.options:
        value = options.get(option.name)
        if not option.writes or value is None or value == "":
            continue
        if option.kind == "pairs" and isinstance(value, Mapping):
            outputs.update({str(k): str(v) for k, v in value.items()})
            here = here and option.path != "there"
        elif isinstance(value, (str, os.PathLike)):
            folders[option.cli_flag] = os.path.expanduser(os.fspath(value))
    problems = written_place_problems(spec, outputs, folders, Path.cwd(), outputs_here=here)
    if problems:
        raise InputError("\n".join(problems))


def _start_run(found: "TargetPlugin", plan: "Plan", values: Mapping[str, Any], masker: "Masker",
               options: Mapping[str, Any], name: str, folder: Path, notify: "Notify", call: Call) -> Any:
    """The job's run, in the store the target's ranks reach (its ``tracking_uri``: "" the
    default, relative to ``jobs.job_base``); None when there is none. ``folder``: the job's
    folder (the target's ``job_folder``, else the record's)."""
    from .jobs import Job, job_base
    from ..tracking import TrackingError, start_run

    environ = dict(os.environ)
    resumed = options.get(RESUME)
    uri = resumed.tracking_uri if isinstance(resumed, TrackingRef) else call("tracking_uri", options, notify)
    if uri is None:
        return None
    if uri:
        environ["MLFLOW_TRACKING_URI"] = str(uri)
    if isinstance(resumed, TrackingRef):  # the job goes on in its run: one run across every attempt
        environ["MLFLOW_RUN_ID"] = resumed.run_id
    job = Job(plan.spec, MappingProxyType(dict(values)), MappingProxyType({}), folder,
              name if folder.parent == jobs_dir() else folder.name)
    here = Path.cwd()
    base = job_base(here)  # the current folder, unless it lies in a registry: then a folder of our own,
    if base != here:  # where a relative store (sqlite:///mlflow.db) and a new experiment's ./mlruns go
        base.mkdir(parents=True, exist_ok=True)
        os.chdir(base)
    try:
        run = start_run(job, plan.topology, environ, base, options.get("experiment"), notify,
                        local_ranks=found.type.shares_files, given=given_env(options), masker=masker)
        if run is not None and isinstance(resumed, TrackingRef):
            run.store.reopen(resumed.run_id)
    except TrackingError as exc:
        raise UsageError(f"MLflow tracking: {exc}") from None
    finally:
        if base != here:
            os.chdir(here)
    return run


def _rank_env(run: Any, shares_files: bool) -> dict[str, str]:
    """What every rank gets: the run's env; the job folder only where the ranks see it."""
    if run is None:  # untracked: nothing of MLflow's side is imported (distcomp run's start)
        return {}
    from ..tracking import REPORTS_ENV

    return {k: v for k, v in run.env().items() if shares_files or k != REPORTS_ENV}


# -- a job's end -------------------------------------------------------------------------------

def settle(job: str, instance: "Target", outcome: JobOutcome, folder: Path | None,
           notify: "Notify | None") -> JobOutcome:
    """``outcome`` as the user sees it: masked, naming the job's run; once the job ended, its run
    ended too (``notify``, else stderr, hears what could not be done)."""
    folder = folder if folder is not None and (folder / RECORD).is_file() else record_of(job, instance)
    data = _read(folder) if folder is not None else {}
    if outcome.tracking is not None and data.get("run_id") and data["run_id"] != outcome.tracking.run_id:
        folder, data = None, {}  # the record of another job the id named once: not this one's
    outcome = outcome.masked(_masker(data))
    if outcome.tracking is None and data.get("run_id"):
        outcome = replace(outcome, tracking=TrackingRef(data["run_id"], data.get("tracking_uri", ""),
                                                        data.get("experiment_id", "")))
    if outcome.done and outcome.tracking is not None:
        say = notify or _stderr
        held, problems = _end(job, instance, outcome, folder)
        if held and notify is not None:  # the status the store holds now (RUNNING: it did not take the end)
            notify(f"MLflow run {outcome.tracking.run_id}: "
                   + ("left RUNNING, not ended" if held == "RUNNING" else held))
        for problem in problems:
            say(f"warning: {problem}")
    return outcome


def _end(job: str, instance: "Target", outcome: JobOutcome, folder: Path | None) -> tuple[str, list[str]]:
    """End the job's run once; (the status the store now holds, "" when this call did not end
    it; the problems)."""
    assert outcome.tracking is not None
    ref = outcome.tracking
    if folder is None:  # not submitted here: the run the target names, unless someone ended it
        import tempfile

        with tempfile.TemporaryDirectory(prefix="distcomp-end-") as tmp:
            return _end_run(job, instance, outcome, Path(tmp), {}, check=True)[1:]
    with _locked(folder):
        data = _read(folder)
        if data.get("ended"):
            return "", []
        same = data.get("run_id") == ref.run_id
        ended, held, problems = _end_run(job, instance, outcome, folder, data if same else {}, check=not same)
        if ended:
            _write(folder, {**data, "ended": {"state": outcome.state.value, "at": time.time(), "pid": os.getpid()}})
        import shutil

        shutil.rmtree(folder / LOGS, ignore_errors=True)  # in the run now; the record stays small
        return held, problems


def _ended_folder(instance: "Target", job: str) -> Path | None:
    """The folder the target says its ended job's logs and reports are in (``ended_folder``)."""
    try:
        found = instance.ended_folder(job.partition(":")[2])
    except Exception:  # no folder to read: the logs come from save_logs
        return None
    return Path(found) if found is not None and Path(found).is_dir() else None


def _end_run(job: str, instance: "Target", outcome: JobOutcome, folder: Path, data: Mapping[str, Any],
             check: bool) -> tuple[bool, str, list[str]]:
    """(whether the run now holds the job's end, the status it holds ("" when someone else
    ended it), the problems); ``check``: first ask the run whether someone ended it already."""
    from ..mlstore._store import within
    from ..tracking import RunRef, TrackingError, end_run, ended_state, open_store
    from ..tracking._handover import end_wait

    assert outcome.tracking is not None
    ref = outcome.tracking
    masker = _masker(data)
    left = (f"MLflow run {ref.run_id} at {ref.tracking_uri} is left as it was; `distcomp status {job}` ends it "
            "once the store is back")
    shared = _ended_folder(instance, job)
    try:  # asked for seconds, not MLflow's minutes of retries
        if check and ended_state(within(open_store(ref.tracking_uri), end_wait()), ref.run_id):
            return True, "", []
    except Exception as exc:  # any store error: MLflow raises its own and requests' kinds
        if shared is None:  # (with a shared folder, the end waits there for the store: ``tracking._handover``)
            return False, "", [f"{left} ({_first_line(exc)})"]
    logs = shared / LOGS if shared is not None else folder / LOGS  # a shared folder's logs are masked as written
    problems = _save_logs(instance, job, logs, masker) if shared is None else []
    extra = {**outcome.end_tags, JOB_TAG: job}
    if outcome.restarts is not None:  # the target told them: one tag per restart, and their count
        from .restarts import restart_tags

        extra.update(restart_tags(outcome.restarts))
    if outcome.exit_code is not None:
        extra["distcomp.exit_code"] = str(outcome.exit_code)
    if outcome.wall_s is not None:
        extra["distcomp.wall_s"] = f"{outcome.wall_s:.3f}"
    extra.update({f"distcomp.output.{k}": v for k, v in outcome.outputs.items()})
    try:
        status, more = end_run(ref.tracking_uri, ref.run_id, outcome.state, message=outcome.message,
                               cause=outcome.root_cause, log_dir=logs, masker=masker,
                               started_ms=int(data.get("started_ms") or 0), more_tags=extra,
                               known=RunRef(ref.run_id, ref.experiment_id, str(data["artifact_uri"]))
                               if data.get("artifact_uri") else None)
    except (TrackingError, OSError) as exc:
        return False, "", [*problems, f"{left} ({_first_line(exc)})"]
    ended = status == outcome.state.mlflow_status
    if shared is not None and not ended:  # its end waits in the shared folder: the target's status delivers it
        return True, status, problems + more
    return ended, status, problems + more + ([] if ended else [left])


def _save_logs(instance: "Target", job: str, logs: Path, masker: "Masker") -> list[str]:
    """The job's logs in ``logs`` (the target's ``save_logs``), masked."""
    logs.mkdir(parents=True, exist_ok=True)
    try:
        instance.save_logs(job.partition(":")[2], logs)
    except Exception as exc:  # the run still ends; it lacks the logs
        return [f"could not gather the logs of {job} for its MLflow run: {type(exc).__name__}: {_first_line(exc)}"]
    for path in logs.iterdir():
        _mask_file(path, masker)
    return []


def _mask_file(path: Path, masker: "Masker") -> None:
    """``path`` with the job's secrets masked, line by line, where it holds any."""
    if not masker or not path.is_file():
        return
    data = path.read_bytes()
    masked = b"".join(masker.raw(line) for line in data.splitlines(keepends=True))
    if masked != data:
        path.write_bytes(masked)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The record's lock: one process at a time ends the job's run (released if it dies)."""
    import fcntl

    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
