"""The local target on the target contract: compile shows each process's command, submit
starts the job in the background (a worker process) or, for ``distcomp.run``, runs it here to
its end, and a job is its run folder (status.json, logs/). The core makes and ends the job's
MLflow run: the run folder is the folder the ranks and the run's end share (``job_folder``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ...errors import JobError, UsageError
from ...records import JobOutcome, JobState, TrackingRef
from ...core.target import Compiled, Notify, Target
from .._logs import new_lines as _new_lines
from .._logs import tail
from ._job import HERE, PREFIX, job_id, watched

if TYPE_CHECKING:
    from ...core.target import JobContext
    from ...records import Plan

STARTED_WAIT = 60.0  # seconds a background job gets to write its first status.json
CANCEL_WAIT = 60.0  # ... and to end after SIGTERM (its grace, then its MLflow run)
JOB_RECORD = "job.json"  # a background job's record (distcomp.worker): what its process runs
CONSOLE = "console.log"  # a background job's own console: distcomp's progress and the ranks' lines


def run_folder(job: str) -> Path:
    """The run folder a local job id (``local:PATH`` or ``PATH``) names; it must hold status.json."""
    path = Path(job[len(PREFIX):] if job.startswith(PREFIX) else job).absolute()
    if not (path / "status.json").is_file():
        raise UsageError(f"{path}: not a run folder (no status.json in it); give a folder that `distcomp run` "
                         "or `distcomp submit --target local` made")
    return path


class LocalTarget(Target):
    def __init__(self) -> None:
        self._ran: dict[str, JobOutcome] = {}  # the outcome of each job this object ran here, for wait

    def check(self, plan: "Plan", options: Mapping[str, Any], compiled: Compiled) -> None:
        """Inputs, outputs, the run folder (a busy one too), the tracking store: refused before
        the job's MLflow run exists; a job in the background needs its spec in a file."""
        from ._job import check_free, check_local, request_of

        if options.get(HERE) is None and plan.spec.source is None:
            raise UsageError(f"{plan.spec.ref}: a spec that is not in a file cannot run in the background; save it "
                             "as component.yaml beside its code")
        request = request_of(options)
        job = check_local(plan, request, Path.cwd())
        if request.run_dir:  # a new default folder is free
            check_free(job.run_dir, request.grace)

    def job_folder(self, plan: "Plan", options: Mapping[str, Any]) -> Path:
        """The run folder: the ranks report into it, the run's end reads its logs."""
        from ._job import request_of, run_folder_of

        return run_folder_of(plan.spec, request_of(options), Path.cwd())

    def ended_folder(self, job_id: str) -> Path | None:
        return run_folder(job_id)

    def progress_folder(self, job_id: str) -> Path | None:
        """Where the job's ranks beat (a waiting submit's live line reads it)."""
        from ...agent.progress import FOLDER as PROGRESS

        return run_folder(job_id) / PROGRESS

    def wait(self, job_id: str, timeout: float | None, notify: Notify) -> JobOutcome | None:
        """A job this object ran here has its outcome already; any other's status is polled."""
        return self._ran.pop(job_id, None)

    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        """Each process of the job as it will start: its rank, node, argv and the launcher's env.
        Addresses and ports stay placeholders (``{{port:master}}``): they are picked at start."""
        import yaml

        from ...records import COMMAND
        from ...base.redact import job_masker
        from ...spec import InputError, RenderError, check_inputs, unknown_outputs

        spec = plan.spec
        given_out = dict(options.get("outputs") or {})
        try:
            values, problems = check_inputs(spec, dict(options.get("inputs") or {}), Path.cwd())
            problems = unknown_outputs(spec, given_out) + problems
            if problems:
                raise InputError("\n".join(problems))
            outputs = {n: given_out.get(n, f"RUN_DIR/outputs/{n}") for n in spec.outputs}
            command = spec.render(values, outputs)
            line = spec.shell_line(values, outputs)
        except RenderError as exc:
            raise UsageError(str(exc)) from None
        topology = plan.topology
        masker = job_masker(spec, values)
        processes = []
        for r in topology.replicas:
            argv = [a for item in r.argv for a in (command if item == COMMAND else [item])]
            processes.append({"name": r.name, "role": r.role, "node": r.node, "rank": r.rank,
                              "argv": masker.argv(argv), "env": dict(r.env)})
        shown = {"component": spec.ref, "launcher": topology.launcher, "nodes": topology.nodes,
                 "processes_per_node": topology.processes_per_node, "world_size": topology.world_size,
                 "command": masker.text(line), "processes": processes}
        return Compiled(kind=f"local plan of {spec.ref}", text=yaml.safe_dump(shown, sort_keys=False), data=shown)

    def submit(self, job: "JobContext", options: Mapping[str, Any], notify: Notify) -> str:
        """With ``options[HERE]`` (``distcomp.run``): the job here, to its end. Else a worker
        process in its own session, writing RUN_DIR/console.log, that runs the job and then
        settles it (its run ended by the core's ``settle``); returns once the job is started
        (its status.json says running) or has failed to start (its console tells why)."""
        from ._job import request_of, run_folder_of, run_here

        here = options.get(HERE)
        cwd = Path.cwd()
        run_dir = job.folder or run_folder_of(job.plan.spec, request_of(options), cwd)
        if here is not None:
            request = request_of(options, echo=here.console is not None)
            outcome = run_here(job.plan, request, run_dir, job.env, job.tracking, here.console, notify, cwd,
                               here.resume)
            self._ran[str(run_dir)] = outcome
            return str(run_dir)
        return self._start_worker(job, options, run_dir, notify)

    def _start_worker(self, job: "JobContext", options: Mapping[str, Any], run_dir: Path, notify: Notify) -> str:
        from ...core.jobrecord import JobRecord, write_record

        spec = job.plan.spec
        assert spec.source is not None  # check refused it
        d = spec.distribution
        keep = ("timeout", "experiment")  # given only when set
        ref = job.tracking
        run_options = {"run_dir": str(run_dir), "nodes": d.nodes, "nproc_per_node": d.processes_per_node,
                       "max_restarts": job.plan.max_restarts, "grace": float(options.get("grace", 5.0)),
                       "tracking": bool(options.get("tracking", True)),
                       **watched(job.plan, bool(options.get("tracking", True))),
                       # the core's run (none: untracked) and its record: the worker settles the job with it
                       "job_env": dict(job.env), "job_record": str(job.record or ""),
                       "job_run": {"run_id": ref.run_id, "tracking_uri": ref.tracking_uri,
                                   "experiment_id": ref.experiment_id} if ref else {},
                       **{k: options[k] for k in keep if options.get(k)}}
        record = JobRecord("run", str(spec.source), str(Path.cwd()), dict(options.get("inputs") or {}),
                           dict(options.get("outputs") or {}), dict(options.get("env") or {}),
                           {k: v for k, v in run_options.items() if v is not None})
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o775)  # never writable by all: the worker refuses that
        # what the background process does is a record it reads, never flags: mode 600, it holds the inputs
        job_file = write_record(run_dir / JOB_RECORD, record)
        argv = [sys.executable, "-m", "distcomp.worker", str(job_file)]
        with open(run_dir / CONSOLE, "ab") as console:  # appended: a busy folder's own console stays
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=Path.cwd())
        deadline = time.monotonic() + STARTED_WAIT
        while time.monotonic() < deadline:
            code = proc.poll()
            if (_read(run_dir).get("supervisor") or {}).get("pid") == proc.pid:  # this job's record, not an old one
                break
            if code is not None:
                tail = _tail(run_dir / CONSOLE, 15)
                error = UsageError if code == 2 else JobError
                raise error(f"the job did not start (distcomp run exited with code {code}):\n{tail}")
            time.sleep(0.05)
        notify(f"started {spec.ref} in the background (pid {proc.pid}); its console: {run_dir / CONSOLE}")
        return str(run_dir)

    def status(self, job: str) -> JobOutcome:
        run_dir = run_folder(job)
        data = _checked(run_dir)
        state = JobState.parse(str(data.get("state", "unknown")))
        if state.terminal:  # its MLflow run's end may wait in the folder for the store: delivered now
            from ._reap import deliver_waiting

            later = deliver_waiting(run_dir)
            if later is not None:
                held, problems = later
                said = "still waits: the store did not take it" if held == "RUNNING" else \
                    f"delivered with what waited in {run_dir / 'tracking'}: {held}"
                for line in [f"the end of MLflow run {(data.get('mlflow') or {}).get('run_id')} {said}", *problems]:
                    print(f"distcomp status: {line}", file=sys.stderr, flush=True)
                data = _checked(run_dir)
        message = str(data.get("message") or "")
        if state is JobState.RUNNING and not _alive(data):
            state, message = JobState.UNKNOWN, (f"status.json says running, but its `distcomp run` is gone; "
                                                f"`distcomp cancel` or `distcomp reap {run_dir}` closes it")
        mlflow = data.get("mlflow") or {}
        tracking = TrackingRef(mlflow["run_id"], str(mlflow.get("tracking_uri", "")),
                               str(mlflow.get("experiment_id", ""))) if mlflow.get("run_id") else None
        cause = data.get("root_cause") or {}
        from ...agent.progress import FOLDER as PROGRESS, read as beats
        from ._job import end_tags, restarts_of

        progress = beats(str(run_dir / PROGRESS))
        if progress:  # each rank's last step and when it came (runtime.progress, metric calls)
            data = {**data, "progress": progress}
        return JobOutcome(job_id(run_dir), state, data.get("exit_code"),
                          root_cause=_describe_cause(cause) if cause else "", message=message,
                          outputs=data.get("outputs") or {}, started=data.get("started_at"),
                          wall_s=data.get("wall_s") if state.terminal else None, tracking=tracking, details=data,
                          end_tags=end_tags(data) if state.terminal else {}, restarts=restarts_of(data))

    def logs(self, job: str, rank: int | None, follow: bool) -> Iterator[str]:
        """The lines of one rank's log (``rank``), or of every log with its ``[name]`` prefix;
        ``follow``: go on until the job has ended and its logs are read to the end (a job whose
        ``distcomp run`` died has ended once no process of it is left)."""
        run_dir = run_folder(job)
        logs = run_dir / "logs"
        if rank is not None:
            chosen = [logs / f"rank{rank}.log"]
            if not chosen[0].exists() and not follow:
                have = sorted(p.stem for p in logs.glob("*.log")) if logs.is_dir() else []
                raise UsageError(f"{run_dir}: no log of rank {rank} (logs: {', '.join(have) or 'none yet'})")
        offsets: dict[Path, int] = {}
        partial: dict[Path, str] = {}
        while True:
            data = _checked(run_dir)
            ended = JobState.parse(str(data.get("state", "running"))).terminal or (
                not _alive(data) and not _left(data, run_dir))
            files = chosen if rank is not None else sorted(logs.glob("*.log")) if logs.is_dir() else []
            for path in files:
                for line in _new_lines(path, offsets, partial, final=ended or not follow):
                    yield line if rank is not None else f"[{path.stem}] {line}"
            if not follow or ended:
                return
            time.sleep(0.2)

    def cancel(self, job: str) -> JobOutcome:
        """SIGINT to the job's ``distcomp run`` (as Ctrl-C: SIGTERM would be a preemption, which
        gives the ranks notice and leaves the job resumable), which stops every rank and ends its MLflow run;
        an ended job is left as it is. A job whose ``distcomp run`` and watchdog both died is
        cancelled here: what it left is stopped (by its cookie and cgroup, as ``distcomp reap``
        does), its MLflow run ended KILLED; what could not be done is a JobError."""
        run_dir = run_folder(job)
        data = _checked(run_dir)
        if data.get("state") != "running":
            return self.status(job)
        if not _alive(data):
            return self._cancel_orphaned(job, run_dir)
        pid = int(data["supervisor"]["pid"])
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return self._cancel_orphaned(job, run_dir)
        deadline = time.monotonic() + CANCEL_WAIT
        while time.monotonic() < deadline and _read(run_dir).get("state") == "running" and _alive(_read(run_dir)):
            time.sleep(0.1)
        return self.status(job)

    def _cancel_orphaned(self, job: str, run_dir: Path) -> JobOutcome:
        from ._reap import reap

        deadline = time.monotonic() + CANCEL_WAIT
        while True:  # a live watchdog holds the folder while it closes the job itself: wait for it
            report = reap(run_dir, cancel=True)
            if report.outcome != "running" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if report.outcome in ("running", "elsewhere") or report.problems:
            raise JobError(f"cannot cancel {job_id(run_dir)}: " + "; ".join((report.message, *report.problems)))
        return self.status(job)


def _read(run_dir: Path) -> dict[str, Any]:
    from ._status import NAME, read

    return read(run_dir / NAME) or {}


def _checked(run_dir: Path) -> dict[str, Any]:
    """status.json for a command that acts on it: a field of the wrong type is a UsageError."""
    from ._status import NAME, checked

    return checked(run_dir / NAME)


def _alive(data: Mapping[str, Any]) -> bool:
    """Whether the job's ``distcomp run`` still runs (the pid, with the start time it had)."""
    from ._reap import supervisor_alive

    sup = data.get("supervisor")
    return isinstance(sup, dict) and supervisor_alive(sup)


def _left(data: Mapping[str, Any], run_dir: Path) -> bool:
    """Whether a process of the job still runs (its ranks, after their ``distcomp run`` died)."""
    from ._reap import job_left

    return job_left(dict(data), run_dir)


def _describe_cause(cause: Mapping[str, Any]) -> str:
    from ._records import describe_exit

    lines = [f"{cause.get('name')} ({cause.get('role')}, node {cause.get('node')}) "
             f"{describe_exit(int(cause.get('returncode') or 0))}"]
    if cause.get("detail"):
        lines.append(f"  {cause['detail']}")
    lines += [f"    {line}" for line in cause.get("tail") or ()]
    return "\n".join(lines)


def _tail(path: Path, n: int) -> str:
    return tail(path, n, "  ", "(no console output)", "(no console output)")
