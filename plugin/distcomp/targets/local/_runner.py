"""Run a ComponentSpec's Topology on this machine: claim the run folder, prepare, supervise,
restart, report.

status.json says ``running`` (with the supervisor's pid, host and start time) from before the
first rank starts, and the outcome after the last one ended; every output carries a marker
until the job has succeeded (``_partial``).
"""

from __future__ import annotations

import re
import signal
import time
from typing import Any, Callable, Mapping

from ...agent import longjob
from ...agent.progress import FOLDER as PROGRESS, PROGRESS_ENV, announce, clear as clear_beats
from ...agent.supervise import Notice
from ...errors import JobError
from ...records import JobState
from ...records import Topology
from ...base.redact import job_masker
from ...spec import ComponentSpec, RenderError
from . import _cgroup, _hang, _partial, _status
from ._claim import Claim, claim as claim_run_dir
from ._output import Logs
from ._ports import release_ports
from ._prepare import prepare
from ._procs import COOKIE, set_subreaper
from ._records import Failure, FoundOutput, RunOptions, RunResult, describe_signal
from ._stored import stored_code_copy
from ._attempt import Attempt, Attempts, StartError

Notify = Callable[[str], None]
_ADDR_IN_USE = re.compile(r"address already in use|EADDRINUSE", re.IGNORECASE)
PORT_RETRIES = 3  # attempts started again on fresh ports, on top of --max-restarts
PORT_RETRY_WINDOW = 60.0  # seconds: a rank binds its port as it starts, not later
CHECKPOINT = "checkpoint"  # in the run folder: runtime.checkpoint_dir() of every rank, kept across attempts


class LaunchError(JobError):
    """A process could not be started at all (its program is missing or not executable)."""


def run_topology(spec: ComponentSpec, topology: Topology, values: Mapping[str, Any], outputs: Mapping[str, str],
                 options: RunOptions, console: Notify | None = None, notify: Notify | None = None,
                 claim: Claim | None = None) -> RunResult:
    """Run every attempt of the job; the result records each failure that caused a restart.

    ``claim`` is the run folder already held (``distcomp run`` takes it before creating the
    MLflow run); without one the folder is claimed here, which raises RunDirBusy if another
    job has it."""
    masker = options.masker if options.masker is not None else job_masker(spec, values, options.env)

    def say(message: str) -> None:
        if notify is not None:
            notify(masker.text(message))

    held = claim or claim_run_dir(options.run_dir, options.job_id, options.grace)
    try:
        with stored_code_copy(spec, options.run_dir, say) as ran:  # a registry job: its ranks run in a copy
            return _Job(ran, topology, values, outputs, options, console, notify, held).run()
    finally:
        release_ports()
        if claim is None:
            held.release()


class _Job:
    def __init__(self, spec: ComponentSpec, topology: Topology, values: Mapping[str, Any],
                 outputs: Mapping[str, str], options: RunOptions, console: Notify | None, notify: Notify | None,
                 claim: Claim) -> None:
        self.spec, self.topology, self.values, self.outputs = spec, topology, values, dict(outputs)
        self.options, self.claim = options, claim
        self.masker = options.masker if options.masker is not None else job_masker(spec, values, options.env)
        self._notify = notify
        self.console = console if options.echo else None
        self.status = options.run_dir / _status.NAME
        self.markers = {name: str(_partial.marker(path)) for name, path in outputs.items()}
        watchdog = claim.watchdog.pid if claim.watchdog is not None else None
        self.cgroup: _cgroup.Cgroup | None = None
        self.base = {"job_id": options.job_id, "started_at": _status.now(),
                     "supervisor": _status.supervisor(watchdog), "cookie": claim.cookie, **options.record}

    def say(self, message: str) -> None:
        if self._notify is not None:
            self._notify(self.masker.text(message))

    def _write(self, result: RunResult) -> None:
        try:
            _status.write(self.status, {**result.to_json(), **self.base}, self.masker)
        except OSError:  # a full disk: the console report still says what happened
            pass

    def run(self) -> RunResult:
        self.cgroup = _cgroup.create(self.claim.cookie)  # None where the kernel does not let us
        self.base["cgroup"] = self.cgroup.path if self.cgroup else None  # reap and cancel use it too
        try:
            return self._run()
        finally:
            if self.cgroup is not None:  # emptied by the last stop
                _cgroup.remove(self.cgroup.path)

    def _run(self) -> RunResult:
        options, run_dir = self.options, self.options.run_dir
        _partial.mark(self.markers, f"incomplete: job {options.job_id} is running (run folder {run_dir}), or "
                                    f"died; {self.status} says which. Removed when a job writing here succeeds.\n")
        self._write(RunResult(JobState.RUNNING, run_dir, 0, 0.0, outputs=self.outputs, incomplete_outputs=self.markers))
        self.claim.started = True
        previous = set_subreaper(True)  # a rank's orphans come back to us, not to PID 1
        logs = Logs(run_dir / "logs", self.console, self.masker)
        attempts = Attempts(logs, options.grace, self.spec.successful_return_code == "ZeroOrGreater",
                                self.topology.processes_per_node, self.claim.cookie, self.cgroup)
        t0 = time.monotonic()
        failures: list[Failure] = []
        found: list[FoundOutput] = []
        try:
            return self._attempts(attempts, logs, t0, failures, found)
        except (LaunchError, RenderError) as exc:  # still leave the final record behind, then report
            self._finish(RunResult(JobState.FAILED, run_dir, len(failures) + 1, time.monotonic() - t0,
                                   failures=tuple(failures), message=str(exc)), found)
            raise
        except BaseException as exc:  # stopped outside the supervisor's watch: the record says so
            interrupted = isinstance(exc, KeyboardInterrupt)
            why = (f"interrupted by {describe_signal(signal.SIGINT)} before the job ended" if interrupted
                   else f"distcomp failed: {type(exc).__name__}: {exc}")
            self._finish(RunResult(JobState.CANCELLED if interrupted else JobState.FAILED, run_dir, len(failures) + 1,
                                   time.monotonic() - t0, failures=tuple(failures),
                                   signal=signal.SIGINT if interrupted else None, message=why), found)
            raise
        finally:
            try:
                logs.close()
            except OSError:  # the disk is full: reported above, or by the job's own result
                pass
            if previous is False:
                set_subreaper(False)

    def _attempts(self, attempts: Attempts, logs: Logs, t0: float, failures: list[Failure],
                  found: list[FoundOutput]) -> RunResult:
        options, spec, run_dir = self.options, self.spec, self.options.run_dir
        deadline = t0 + options.timeout if options.timeout is not None else None
        rule = longjob.RestartRule(options.max_restarts, options.first_attempt, options.failures_used,
                                   list(options.restarts))
        retries = 0
        note = ""
        checkpoint = str(run_dir / CHECKPOINT)
        while True:
            attempt = rule.attempt
            if not note:  # what the outputs hold as this attempt starts: kept, and said
                for f in _partial.survey(self.outputs, attempt + 1):
                    found.append(f)
                    self.say(_partial.describe(f))
            long_job = {**longjob.long_job_env(checkpoint, str(run_dir), attempt, options.max_restarts),
                        PROGRESS_ENV: str(run_dir / PROGRESS)}
            clear_beats(str(run_dir / PROGRESS))  # this attempt's beats only
            announce(str(run_dir / PROGRESS), attempt)  # distcomp run's live line reads them
            try:
                launches = prepare(spec, self.topology, self.values, self.outputs, run_dir, options.job_id, attempt,
                                   options.max_restarts, extra={**options.env, COOKIE: self.claim.cookie, **long_job})
            except OSError as exc:  # no free ports, or the launcher's files cannot be written
                raise LaunchError(f"cannot prepare the job in {run_dir}: {exc.strerror or exc}") from None
            try:
                launches, hung = _hang.watch(options.hang_timeout, run_dir, run_dir / PROGRESS, launches)
                result = attempts.run(launches, attempt, deadline, note, self._notice(long_job[longjob.NOTICE_ENV]),
                                      hung)
            except StartError as exc:  # the program is missing, not executable, or the folder is gone
                program = exc.error.filename or exc.launch.argv[0]
                raise LaunchError(f"cannot start {program!r}: {exc.error.strerror or exc.error} (command run in "
                                  f"{spec.code}; is it installed and on PATH?)") from None
            except OSError as exc:  # a log could not be written (disk full, ...); the ranks were stopped
                raise LaunchError(f"cannot write the logs in {logs.log_dir}: {exc.strerror or exc}; "
                                  "every rank was stopped") from None
            left = deadline is None or time.monotonic() < deadline
            if left and retries < PORT_RETRIES and self._port_taken(result):
                assert result.failure is not None
                retries += 1
                note = f" (port retry {retries})"
                self.say(f"attempt {attempt + 1}: {result.failure.name} found a port taken (Address already in "
                         f"use): another program bound it after distcomp picked it; starting the attempt again "
                         f"on fresh ports (not counted as a restart)")
                continue
            note = ""
            if result.outcome == "failed" and left and rule.again(result.failure.describe() if result.failure else ""):
                assert result.failure is not None
                failures.append(result.failure)
                self.say(f"attempt {attempt + 1} failed: {result.failure.describe()}\n"
                         f"restarting every rank (restart {rule.failures} of {options.max_restarts})")
                continue
            break
        return self._finish(self._result(result, attempt, t0, failures, retries, rule.causes, rule.failures), found)

    def _notice(self, path: str) -> Notice:
        """SIGTERM to ``distcomp run`` is a preemption: the ranks get notice (``runtime.preempted()``)
        and the grace to save and leave, and the job stays resumable; Ctrl-C still cancels."""
        return Notice((signal.SIGTERM,), lambda why: longjob.give_notice(path, f"{why} to distcomp run"),
                      self.options.grace)

    def _port_taken(self, result: Attempt) -> bool:
        """Failed early on a port another program took between the pick and the rank's bind."""
        f = result.failure
        return (result.outcome == "failed" and f is not None and bool(self.topology.ports)
                and f.after < PORT_RETRY_WINDOW and any(_ADDR_IN_USE.search(line) for line in f.tail))

    def _result(self, result: Attempt, attempt: int, t0: float, failures: list[Failure], retries: int,
                causes: list[str], used: int) -> RunResult:
        state, message = result.outcome, ""
        if state == "timed_out":
            message = (f"job timed out after {self.options.timeout:g} s (--timeout); stopped what was still running: "
                       f"{', '.join(result.still_running) or 'nothing'}")
        elif state == "cancelled":
            message = f"interrupted by {describe_signal(result.signal)}; every rank was stopped"
        elif state == "preempted":
            run_dir = self.options.run_dir
            message = (f"preempted by {describe_signal(result.signal)}: the ranks had notice (runtime.preempted()) and "
                       f"{self.options.grace:g} s (--grace) to save and leave; what they saved is in "
                       f"{run_dir / CHECKPOINT}. Go on with `distcomp run --resume {run_dir}`")
        return RunResult(JobState(state), self.options.run_dir, attempt + 1, time.monotonic() - t0, result.processes,
                         result.failure, tuple(failures), result.signal, message, self.outputs, port_retries=retries,
                         restarts=tuple(causes), failures_used=used)

    def _finish(self, result: RunResult, found: list[FoundOutput]) -> RunResult:
        """Markers off after a success, rewritten with the outcome otherwise; the final record."""
        if result.state == "succeeded":
            _partial.unmark(self.markers)
            incomplete: dict[str, str] = {}
        else:
            why = result.message or (result.root_cause.describe().splitlines()[0] if result.root_cause else "")
            _partial.mark(self.markers, self.masker.text(f"incomplete: job {self.options.job_id} {result.state}: "
                                                         f"{why}\nsee {self.status}. Removed when a job writing "
                                                         "here succeeds.\n"))
            incomplete = self.markers
        final = RunResult(result.state, result.run_dir, result.attempts, result.wall_s, result.processes,
                          result.root_cause, result.failures, result.signal, result.message, self.outputs,
                          incomplete, tuple(found), result.port_retries, result.restarts, result.failures_used)
        self._write(final)
        return final
