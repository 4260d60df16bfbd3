"""The slurm target on the target contract: a job is an sbatch script in a job folder on the
cluster's shared file system, its id Slurm's job id.

The job folder (``JOB_DIR/NAME-TIME-XXXX``) holds the spec and a snapshot of its code (the job
never runs from the user's working copy), the script, ``job.json`` (the Slurm id, the MLflow
run), the ranks' logs and exit records, and, once someone saw the end, ``outcome.json``.
``JOB_DIR/.ids/CLUSTER/ID`` names the folder of Slurm job ID of the cluster whose
``ClusterName`` is CLUSTER (an id is unique only within one cluster, and a cluster set up again
counts from 1 again), so status, logs and cancel find a job after Slurm has forgotten it
(MinJobAge); a found folder is used only when its record is of that cluster's job ID and, while
Slurm still knows the job, the job's ``WorkDir`` is that folder. The job's MLflow run is the
core's (``distcomp.core.target``): created before sbatch, its env handed to every rank through the
script, and ended by the job handle once it sees the end; ``outcome.json`` is made once,
exclusively, by whoever first sees it (``wait``, ``status``, ``cancel``), and names the run for a
process that did not submit.

The job's secrets (``distcomp.base.redact``) are in ``secrets.sh`` only (mode 600), which the script
reads: ``job.sbatch`` names them (and is mode 600 too when the job has any), and everything
distcomp shows or writes of the job (the console, ``outcome.json``, MLflow tags and params,
``logs``) masks them. The ranks' logs and Slurm's own output hold what the ranks print: they are
masked in place once the job has ended (before they become MLflow artifacts); while it runs,
``logs/`` of a job with secrets is readable by its owner only.

A job may run several attempts (``_attempts``, ``attempts.json``): a failed one started again in
its allocation, or the job requeued (by itself after a preemption notice, by ``scontrol
requeue``, after a lost node). Slurm's PENDING and REQUEUED are not its end: ``wait`` and
``status`` follow it back to RUNNING, and its one MLflow run ends once, with the last attempt's
state and each restart's cause (``core.restarts``). ``cancel`` ends it for good.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ...agent.progress import FOLDER as PROGRESS
from ...errors import JobError, UsageError
from ...records import JobOutcome, JobState, TrackingRef
from ...core.restarts import describe_restarts
from ...core.target import JOB_NAME, Compiled, Notify, Target
from .. import _secrets

if TYPE_CHECKING:
    from ...delivery.plan import Delivery
    from ...base.redact import Masker
    from ...core.target import JobContext
    from ...records import Plan
    from ...spec import ComponentSpec
    from ._slurm import SlurmJob

PREFIX = "slurm:"
RECORD, OUTCOME, SCRIPT, IDS = "job.json", "outcome.json", "job.sbatch", ".ids"
CANCEL_WAIT = 60.0
SKIP = {"__pycache__", ".git", ".venv", "runs", "mlruns", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def default_job_dir() -> Path:
    return Path(os.environ.get("DISTCOMP_SLURM_DIR") or Path.home() / "distcomp-slurm")


def _job_dir(options: Mapping[str, Any]) -> Path:
    return Path(options.get("job_dir") or default_job_dir()).expanduser().absolute()


class SlurmTarget(Target):
    def __init__(self) -> None:
        self._job_dir: Path | None = None
        self._timeout: float | None = None

    # -- compiling ---------------------------------------------------------------------------
    def has_gpu(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> bool | None:
        """The nodes are not this machine: no GPU advice from here."""
        return False

    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        """The sbatch script for the job folder ``JOB_DIR/{{job_name}}`` (nothing is written):
        what ``check`` tests with ``sbatch --test-only`` and ``submit`` writes and queues, with
        only the job's name and its MLflow run's env bound."""
        from ...base.redact import job_masker
        from ...spec import InputError, RenderError, check_inputs, unknown_outputs

        spec = plan.spec
        folder = _job_dir(options) / JOB_NAME
        given_out = dict(options.get("outputs") or {})
        try:
            values, problems = check_inputs(spec, dict(options.get("inputs") or {}), Path.cwd())
            problems = unknown_outputs(spec, given_out) + problems
            if problems:
                raise InputError("\n".join(problems))
            outputs = {n: given_out.get(n, str(folder / "outputs" / n)) for n in spec.outputs}
            argv = spec.render(values, outputs)
        except RenderError as exc:
            raise UsageError(str(exc)) from None
        masker = job_masker(spec, values)
        text = self._script(plan, options, argv, folder, dict(spec.environment_variables), masker)
        notes: tuple[str, ...] = (f"written for the job folder {folder}; `distcomp submit --target slurm` names it "
                                  "after the job and copies the spec and its code there before sbatch",)
        if options.get("code_store"):
            from ._delivery import note

            notes = (note(options, folder),)
        late: tuple[str, ...] = (
            f"the job's name: {JOB_NAME} in the job folder's path",
            "the job's MLflow run, made when it is submitted: its env (MLFLOW_RUN_ID, MLFLOW_TRACKING_URI, ...) in "
            "the record's env line")
        if masker:
            notes += (f"the job's secrets are not in the script: it reads them from {folder / _secrets.NAME} "
                      "(mode 600), which `distcomp submit --target slurm` writes",)
            late += (f"the job's secrets, in {folder / _secrets.NAME}: the record names each by its index",)
        return Compiled(kind=f"sbatch script of {spec.ref}", text=text, notes=notes, late=late, native=masker)

    @staticmethod
    def _script(plan: "Plan", options: Mapping[str, Any], argv: list[str], folder: Path,
                env: Mapping[str, str], masker: "Masker", code: "Delivery | None" = None) -> str:
        """``code``: the code's way through a store (``--code-store``), when the caller planned it."""
        import sys

        from ._delivery import plan as plan_code
        from ._script import folder_problem, resources_of, script

        why = folder_problem(folder)
        if why:
            raise UsageError(f"--job-dir {str(folder.parent)!r} {why}; give a job dir whose path has none")
        spec = plan.spec
        res = resources_of(spec, options, options.get("timeout"))
        # the nodes run the submitter's interpreter (a cluster's nodes share its install, as they
        # share the job folder): distcomp is there, and so is what the command's python needs
        code = code or plan_code(spec, options, os.environ)
        return script(plan, argv, folder, spec.name, res, env, masker, python=sys.executable, code=code,
                      node_dir=options.get("node_dir"))

    # -- submitting ------------------------------------------------------------------------
    def check(self, plan: "Plan", options: Mapping[str, Any], compiled: Compiled) -> None:
        """The options and sbatch's own judgement (partition, account, memory, time) of the
        script that will be submitted, before anything of the job exists: a refused job leaves
        no job folder, no code copy and no MLflow run."""
        from . import _slurm

        if shutil.which("sbatch") is None:
            _slurm.run(["sbatch"], "")  # the UsageError that says what is missing
        assert compiled.text is not None
        _slurm.test(compiled.text)
        _check_code(plan.spec)

    def tracking_uri(self, options: Mapping[str, Any], notify: Notify) -> str:
        """$MLFLOW_TRACKING_URI, else a SQLite file in the job dir (which the nodes share)."""
        job_dir = _job_dir(options)
        if not os.environ.get("MLFLOW_TRACKING_URI", "").strip():
            job_dir.mkdir(parents=True, exist_ok=True)  # the default store's folder
        return _tracking_env(job_dir)["MLFLOW_TRACKING_URI"]

    def submit(self, job: "JobContext", options: Mapping[str, Any], notify: Notify) -> str:
        """Write and queue the compiled script (``job.compiled``), its job folder named after the
        job (``job.name``) and the job's MLflow run env in its record."""
        from ...base.files import write_atomic
        from ...core.jobs import create_outputs, make_job
        from . import _delivery, _slurm
        from ._script import bind_env

        spec, compiled = job.plan.spec, job.compiled
        assert compiled.text is not None
        masker = job.masker
        if compiled.native is not None and tuple(compiled.native.needles) != tuple(masker.needles):
            raise JobError(f"{compiled.kind}: compiled with other secrets than the job has; compile it again")
        job_dir = _job_dir(options)
        folder = job_dir / job.name
        self._job_dir, self._timeout = job_dir, options.get("timeout")
        cwd = Path.cwd()
        made = make_job(spec, dict(options.get("inputs") or {}), dict(options.get("outputs") or {}), folder, cwd)
        text = bind_env(compiled.bind(job.name), job.env, masker)  # the job's MLflow run, from the core
        code = _delivery.plan(spec, options, os.environ)  # nodes that do not see the code: through a store
        if code is not None and code.digest not in text:
            raise JobError(f"{compiled.kind}: the code folder {spec.code} changed since it was compiled; compile it "
                           "again")
        _make_folder(spec, folder, masker, copy_code=code is None)
        if masker:
            _secrets.write(folder / _secrets.NAME, masker)
        if code is not None:
            try:
                _delivery.ship(code, folder, os.environ, notify)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
        create_outputs(made)
        write_atomic(folder / SCRIPT, text, mode=0o600 if masker else None)
        record: dict[str, Any] = {"component": spec.ref, "launcher": spec.distribution.launcher,
                                  "nodes": spec.distribution.nodes,
                                  "processes_per_node": spec.distribution.processes_per_node or 1,
                                  "folder": str(folder), "outputs": dict(made.outputs),
                                  "submitted": time.time(), "slurm_conf": os.environ.get("SLURM_CONF", ""),
                                  "timeout": options.get("timeout")}
        if job.tracking is not None:  # so status from another machine names the run
            record["mlflow"] = {"run_id": job.tracking.run_id, "tracking_uri": job.tracking.tracking_uri,
                                "experiment_id": job.tracking.experiment_id}
        try:
            job_id = _slurm.submit(str(folder / SCRIPT))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # no job: no folder that status or reap would find
            raise
        record["slurm_job_id"] = job_id
        record["cluster"] = _slurm.cluster_name()
        _write_json(folder / RECORD, record)
        index = _index(job_dir, record["cluster"], job_id)
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text(str(folder) + "\n", encoding="utf-8")
        notify(f"submitted Slurm job {job_id} ({spec.ref}); job folder: {folder}")
        return job_id

    def save_logs(self, job_id: str, into: Path) -> None:
        """The ranks' logs (masked once the job ended), for the job's MLflow run."""
        for path in sorted((self._folder(job_id) / "logs").glob("*.log")):
            shutil.copyfile(path, into / path.name)

    # -- a submitted job -------------------------------------------------------------------
    def place(self, job_id: str) -> str:
        """The cluster's name: a Slurm job id names one job only within one cluster."""
        from . import _slurm

        return _slurm.cluster_name()

    def _folder(self, job_id: str) -> Path:
        from . import _slurm

        job_id = job_id.removeprefix(PREFIX)
        if not job_id.isdigit():
            raise UsageError(f"{job_id!r} is not a Slurm job id (a number, as `distcomp submit --target slurm` "
                             "printed it)")
        cluster = _slurm.cluster_name()
        unasked: JobError | UsageError | None = None
        try:
            live = _slurm.show(job_id)
        except (JobError, UsageError) as exc:  # no Slurm to ask here, or it does not answer: the record alone says
            live, unasked = None, exc
        others = []
        for base in dict.fromkeys(p for p in (self._job_dir, default_job_dir()) if p is not None):
            try:
                folder = Path(_index(base, cluster, job_id).read_text(encoding="utf-8").strip())
            except OSError:
                continue
            why = _not_the_job(folder, job_id, cluster, live)
            if why is None:
                return folder
            others.append(f"{folder}: {why}")
        work = Path(live.fields.get("WorkDir", "")) if live is not None else None
        if work is not None and _not_the_job(work, job_id, cluster, live) is None:
            return work
        if unasked is not None and not others:  # no record here and no Slurm to ask: what is wrong is Slurm's
            raise unasked
        on = f" on cluster {cluster!r}" if cluster else ""
        if others:  # never another job's logs or outcome: that id named another job once
            raise UsageError(f"Slurm job {job_id} is not a distcomp job this machine knows{on}: the job dir's record "
                             f"of id {job_id} is of another job ({'; '.join(others)})")
        raise UsageError(f"Slurm job {job_id} is not a distcomp job this machine knows{on} (no index under "
                         f"{_index(default_job_dir(), cluster, job_id).parent}; set DISTCOMP_SLURM_DIR to the job dir "
                         "it was submitted with)")

    def wait(self, job_id: str, timeout: float | None, notify: Notify) -> JobOutcome:
        from . import _slurm
        from ._pace import Pace

        folder = self._folder(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        # the job's own deadline (--timeout), kept here to the second: Slurm's limit is in
        # whole minutes and its timer checks it only every half minute or so
        record = _read_json(folder / RECORD)
        limit = record.get("timeout")
        limit = float(limit) if isinstance(limit, (int, float)) else None
        due = record["submitted"] + limit if limit is not None and record.get("submitted") else None
        seen: str | None = None
        restarts = len(_causes(folder))
        pace = Pace(folder)  # Slurm is asked often while the end is near (_pace)
        while True:
            if (folder / OUTCOME).is_file():
                return self.status(job_id)
            job = _slurm.show(job_id)
            if job is None or job.state.terminal:
                return self._end(folder, job_id, job)
            causes = _causes(folder)
            for n, cause in enumerate(causes[restarts:], restarts + 1):  # a waiting submit says each restart
                notify(f"Slurm job {job_id}: restart {n}: {_masker(folder).text(cause)}")
            restarts = len(causes)
            if due is not None and time.time() >= due:
                notify(f"Slurm job {job_id}: past its deadline of {limit:g} s (--timeout): cancelling it")
                return self.cancel(job_id, timed_out=limit)
            if job.slurm_state != seen:
                notify(f"Slurm job {job_id}: {job.slurm_state.lower()}"
                       + (f" ({job.reason})" if job.reason not in ("", "None") else ""))
                seen = job.slurm_state
            if deadline is not None and time.monotonic() >= deadline:
                return self._running(folder, job_id, job)
            left = [t - now for t, now in ((due, time.time()), (deadline, time.monotonic())) if t is not None]
            pace.pause(min(left, default=None))  # no later than a deadline

    def status(self, job_id: str) -> JobOutcome:
        from .._progress import with_progress
        from . import _slurm

        folder = self._folder(job_id)
        if (folder / OUTCOME).is_file():
            outcome = _outcome_from(_read_json(folder / OUTCOME), folder).masked(_masker(folder))
        elif (job := _slurm.show(job_id.removeprefix(PREFIX))) is None or job.state.terminal:
            outcome = self._end(folder, job_id, job)
        else:
            outcome = self._running(folder, job_id, job)
        return with_progress(outcome, folder / PROGRESS)  # each rank's last beat (the ranks' progress/)

    def progress_folder(self, job_id: str) -> Path | None:
        """Where the job's ranks beat: its job folder's progress/ (a waiting submit's live line)."""
        return self._folder(job_id) / PROGRESS

    def _running(self, folder: Path, job_id: str, job: "SlurmJob") -> JobOutcome:
        record = _read_json(folder / RECORD)
        reason = job.reason if job.reason not in ("", "None") else ""
        causes = _causes(folder)
        attempt = f", attempt {len(causes) + 1}" if causes else ""
        return JobOutcome(PREFIX + job_id.removeprefix(PREFIX), job.state,
                          message=f"Slurm: {job.slurm_state}" + (f" ({reason})" if reason else "") + attempt,
                          outputs=record.get("outputs") or {}, started=record.get("submitted"),
                          tracking=_tracking_ref(record),
                          details={"folder": str(folder), **job.fields}, restarts=tuple(causes)).masked(_masker(folder))

    def logs(self, job_id: str, rank: int | None, follow: bool) -> Iterator[str]:
        """One rank's log (``rank``), or every rank's with its ``[rankN]`` prefix and Slurm's own
        output as ``[slurm]``; ``follow``: until the job has ended and its logs are read."""
        from .._logs import new_lines
        from . import _slurm

        folder = self._folder(job_id)
        sid = job_id.removeprefix(PREFIX)
        logs = folder / "logs"
        if rank is not None and not (logs / f"rank{rank}.log").exists() and not follow:
            have = sorted(p.stem for p in logs.glob("*.log"))
            raise UsageError(f"Slurm job {sid}: no log of rank {rank} (logs: {', '.join(have) or 'none yet'})")
        offsets: dict[Path, int] = {}
        partial: dict[Path, str] = {}
        masker = _masker(folder)  # the ranks' logs hold what they printed: masked as shown
        while True:
            ended = not follow or (folder / OUTCOME).is_file()
            if not ended:
                job = _slurm.show(sid)
                ended = job is None or job.state.terminal
            if rank is not None:
                files = [(logs / f"rank{rank}.log", "")]
            else:
                files = [(p, f"[{p.stem}] ") for p in sorted(logs.glob("*.log"), key=_rank_order)]
                files.append((folder / f"slurm-{sid}.out", "[slurm] "))
            for path, prefix in files:
                for line in new_lines(path, offsets, partial, final=ended):
                    yield prefix + masker.text(line)
            if ended:
                return
            time.sleep(0.3)

    def cancel(self, job_id: str, timed_out: float | None = None) -> JobOutcome:
        """scancel, then wait until Slurm says the job has ended (its tasks are gone), and end its
        run; ``timed_out``: the deadline (seconds) it ran past, which makes it TIMED_OUT."""
        from . import _slurm

        folder = self._folder(job_id)
        sid = job_id.removeprefix(PREFIX)
        job = _slurm.show(sid)
        if (folder / OUTCOME).is_file() or job is None or job.state.terminal:
            return self.status(job_id)
        _slurm.cancel(sid)
        deadline = time.monotonic() + CANCEL_WAIT
        while time.monotonic() < deadline:
            job = _slurm.show(sid)
            if job is None or job.state.terminal:
                break
            time.sleep(0.2)
        return self._end(folder, job_id, job, cancelled=True, timed_out=timed_out)

    # -- the end -----------------------------------------------------------------------------
    def _end(self, folder: Path, job_id: str, job: "SlurmJob | None", cancelled: bool = False,
             timed_out: float | None = None) -> JobOutcome:
        """The job's outcome, written once to outcome.json with its MLflow run ended; a second
        caller (another process) reads what the first wrote."""
        sid = job_id.removeprefix(PREFIX)
        record = _read_json(folder / RECORD)
        masker = _masker(folder)
        if job is None:
            state, message = (JobState.CANCELLED, "cancelled") if cancelled else (
                JobState.UNKNOWN, f"Slurm no longer knows job {sid} and nobody recorded its end")
        else:
            state = JobState.CANCELLED if cancelled and not job.state.terminal else job.state
            message = f"Slurm: {job.slurm_state}" + (f", exit code {job.exit_code}" if job.exit_code else "")
            if job.reason not in ("", "None"):
                message += f" ({job.reason})"
        if timed_out is not None:
            state = JobState.TIMED_OUT
            message = f"timed out: ran past its deadline of {timed_out:g} s (--timeout) and was cancelled"
        elif state is JobState.TIMED_OUT and job is not None:
            message = f"timed out: ran past its Slurm time limit ({job.fields.get('TimeLimit', '?')}); {message}"
        cause = "" if state in (JobState.SUCCEEDED, JobState.UNKNOWN) else root_cause(folder, sid, state)
        causes = _causes(folder)
        if causes:
            message += f"; {len(causes)} restart(s): " + "; ".join(describe_restarts(causes))
        outcome = JobOutcome(PREFIX + sid, state, None if state is JobState.UNKNOWN else state.exit_code(),
                             root_cause=cause, message=message, outputs=record.get("outputs") or {},
                             started=record.get("submitted"), ended=time.time(),
                             wall_s=_wall(job), tracking=_tracking_ref(record),
                             details={"folder": str(folder), **(job.fields if job else {})},
                             restarts=tuple(causes)).masked(masker)
        if state is JobState.UNKNOWN:
            return outcome
        try:
            fd = os.open(folder / (OUTCOME + ".lock"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:  # another process is ending it: its record stands
            for _ in range(300):
                if (folder / OUTCOME).is_file():
                    return _outcome_from(_read_json(folder / OUTCOME), folder)
                time.sleep(0.1)
            return outcome
        os.close(fd)
        for path in [*(folder / "logs").glob("*.log"), *(folder / "errors").glob("*"), *folder.glob("rank*.error.json"),
                     folder / f"slurm-{sid}.out"]:
            _mask_file(path, masker)  # before the logs become MLflow artifacts (the job handle attaches them)
        _write_json(folder / OUTCOME, outcome.to_json())
        # Slurm says the job ended (it requeues it no more): its secrets go, the logs being masked
        (folder / _secrets.NAME).unlink(missing_ok=True)
        return outcome


def _index(job_dir: Path, cluster: str, job_id: str) -> Path:
    """``JOB_DIR/.ids/CLUSTER/ID``: a folder per cluster name (made safe as a file name)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cluster)
    return job_dir / IDS / (safe if safe[:1].isalpha() else f"_{safe}") / job_id


def _not_the_job(folder: Path, job_id: str, cluster: str, live: "SlurmJob | None") -> str | None:
    """Why ``folder`` is not the folder of Slurm job ``job_id`` of cluster ``cluster`` (Slurm's
    ``live`` view of that job, None once it forgot it), or None when it is."""
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no readable job.json"
    if not isinstance(record, dict) or str(record.get("slurm_job_id", "")) != job_id:
        return f"its job.json is not of Slurm job {job_id}"
    if cluster and record.get("cluster") and record["cluster"] != cluster:
        return f"it ran on cluster {record.get('cluster')!r}"
    work = live.fields.get("WorkDir", "") if live is not None else ""
    if work and os.path.realpath(work) != os.path.realpath(folder):
        return f"Slurm's job {job_id} works in {work}"
    return None


def _masker(folder: Path) -> "Masker":
    """The job's masker, from the secrets file its script reads (none: a job without secrets)."""
    return _secrets.read(folder / _secrets.NAME)


def _mask_file(path: Path, masker: "Masker") -> None:
    """``path`` rewritten with the job's secrets masked, line by line (the same lines, its mode
    kept), when it holds any; the new version replaces the old whole."""
    if not masker or not path.is_file():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.masking")
    changed = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, path.stat().st_mode & 0o777)
        with open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
            for line in src:
                masked = masker.raw(line)
                changed = changed or masked != line
                dst.write(masked)
        if changed:
            os.replace(tmp, path)
    except OSError:  # a file that cannot be rewritten: what distcomp shows of it is masked still
        pass
    finally:
        tmp.unlink(missing_ok=True)


def root_cause(folder: Path, sid: str, state: JobState) -> str:
    """The first replica that failed by itself (the node agents' ``exits/NAME.json``: its node,
    exit code or signal, last log lines), else Slurm's own output's last lines."""
    failures = []
    for path in (folder / "exits").glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("failed") and not data.get("stopped"):
            failures.append((float(data.get("ended") or 0), path.stem, data))
    if failures and state is JobState.FAILED:
        _t, name, data = min(failures, key=lambda f: (f[0], f[1]))
        how = (f"was killed by signal {data['signal']}" if data.get("signal")
               else f"exited with code {data.get('exit_code')}")
        log = folder / "logs" / f"{name}.log"
        tail = _tail(log, 15) if log.is_file() else "\n".join(f"    {line}" for line in data.get("tail") or ())
        if data.get("hang"):  # the node agent found the job stalled (--hang-timeout): where each rank is
            how = "hung\n  " + str(data["hang"]).replace("\n", "\n  ")
        return f"{name} (node {data.get('host', data.get('node'))}) {how}\n" + tail
    if state is JobState.FAILED:
        return f"Slurm job {sid} failed; its output:\n" + _tail(folder / f"slurm-{sid}.out", 15)
    return ""


def _tail(path: Path, n: int) -> str:
    from .._logs import tail

    return tail(path, n, "    ", "(no log)", "(empty log)")


def _wall(job: "SlurmJob | None") -> float | None:
    if job is None:
        return None
    text = job.fields.get("RunTime", "")  # [D-]HH:MM:SS
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    h, m, s = (int(p) for p in parts)
    return (int(days) if days.isdigit() else 0) * 86400 + h * 3600 + m * 60 + s


def _rank_order(path: Path) -> tuple[int, str]:
    digits = path.stem.removeprefix("rank")
    return (int(digits) if digits.isdigit() else 1 << 30, path.stem)


def _tracking_ref(record: Mapping[str, Any]) -> TrackingRef | None:
    m = record.get("mlflow") or {}
    return TrackingRef(m["run_id"], m.get("tracking_uri", ""), m.get("experiment_id", "")) if m.get("run_id") else None


def _outcome_from(data: Mapping[str, Any], folder: Path) -> JobOutcome:
    """The recorded outcome; its restarts from the job folder, as when it was made."""
    tracking = data.get("tracking")
    return JobOutcome(data["job_id"], JobState.parse(data["state"]), data.get("exit_code"),
                      root_cause=data.get("root_cause") or "", message=data.get("message") or "",
                      outputs=data.get("outputs") or {}, started=data.get("started"), ended=data.get("ended"),
                      wall_s=data.get("wall_s"), tracking=TrackingRef(**tracking) if tracking else None,
                      details=data.get("details") or {}, restarts=tuple(_causes(folder)))


def _causes(folder: Path) -> list[str]:
    """Why each of the job's attempts after the first started (``_attempts``)."""
    from ._attempts import causes

    return causes(folder)


def _tracking_env(job_dir: Path) -> dict[str, str]:
    """The env the job's run is made with: $MLFLOW_TRACKING_URI, else a SQLite file in the job dir."""
    environ = dict(os.environ)
    environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{job_dir}/mlflow.db")
    return environ


def _make_folder(spec: "ComponentSpec", folder: Path, masker: "Masker", copy_code: bool = True) -> None:
    """The job folder with its code snapshot (``copy_code``; else the spec alone: the code goes
    through a store) and the ranks' subfolders; removed again if any of it fails (a FIFO in the
    code folder, a full disk), so a refused job leaves no folder. With secrets, logs/ (what ranks
    print, secrets too until the end masks them) is the owner's only."""
    new_job_dir = not folder.parent.exists()
    folder.mkdir(parents=True, mode=0o775)  # never writable by all, whatever the umask: the agents refuse that
    try:
        if copy_code:
            _copy_code(spec, folder / "code")
        elif spec.source is not None and spec.source.is_file():
            shutil.copy2(spec.source, folder / spec.source.name)
        for sub in ("logs", "exits"):
            (folder / sub).mkdir(mode=0o700 if masker and sub == "logs" else 0o777)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        if new_job_dir:
            shutil.rmtree(folder.parent, ignore_errors=True)
        raise


def _check_code(spec: "ComponentSpec") -> None:
    """What ``_copy_code`` would refuse (a FIFO, a socket), found before the job's run exists."""
    from ...base.files import code_file_problem
    from ...base.ignore import copy_filter

    if not spec.code.is_dir():
        raise UsageError(f"{spec.ref}: its code folder {spec.code} does not exist")
    left_out = copy_filter(spec.code, SKIP)
    for root, dirs, files in os.walk(spec.code):
        gone = left_out(root, dirs + files)
        dirs[:] = [d for d in dirs if d not in gone]
        for name in files:
            path = os.path.join(root, name)
            why = None if name in gone or os.path.islink(path) else code_file_problem(path)  # links are copied as links
            if why:
                raise UsageError(why)


def _copy_code(spec: "ComponentSpec", dst: Path) -> None:
    """A snapshot of the code folder (less caches, run leftovers and what .gitignore and
    .distcompignore leave out), and the spec file beside it."""
    from ...base.files import checked_copy
    from ...base.ignore import copy_filter

    if not spec.code.is_dir():
        raise UsageError(f"{spec.ref}: its code folder {spec.code} does not exist")
    shutil.copytree(spec.code, dst, ignore=copy_filter(spec.code, SKIP), symlinks=True,
                    copy_function=checked_copy(UsageError))
    if spec.source is not None and spec.source.is_file():
        shutil.copy2(spec.source, dst.parent / spec.source.name)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JobError(f"cannot read {path}: {exc}") from None
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
