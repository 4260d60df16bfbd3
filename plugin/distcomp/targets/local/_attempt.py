"""One attempt of a local job, run by the node agent's supervision loop (``distcomp.agent.supervise``)
with what only a local run has: each process forked into the job's cgroup (``_cgroup``), the
job's other processes found by its cookie, as this subreaper's orphans and in its cgroup
(``_procs``), the output masked into per-rank logs and the console (``_output``), and the root
cause told as ``distcomp.records.Failure``.

A process can leave the group (``setsid``, ``start_new_session=True``); it still carries the
job's cookie and, orphaned, is re-parented to this process (a child subreaper), so the stop at
the end of every attempt finds it and ends it with the ranks. Where the job has a cgroup, nothing
a rank starts can leave it: the stop ends with ``cgroup.kill``.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from ...agent import rankwatch, supervise
from ...errors import JobError
from ...records import RankFailure
from . import _cgroup, _hang, _procs
from ._output import Logs, Stream
from ._prepare import Launch
from ._records import Failure, ProcessResult


class StartError(JobError):
    """A process could not be started (exec failed): which one, and the OSError."""

    def __init__(self, launch: Launch, error: OSError) -> None:
        super().__init__(str(error))
        self.launch, self.error = launch, error


@dataclass(frozen=True)
class Attempt:
    outcome: supervise.Outcome
    processes: tuple[ProcessResult, ...]
    failure: Failure | None = None
    signal: int | None = None
    still_running: tuple[str, ...] = ()  # names of what the timeout or signal had to stop


class _Scope(supervise.Scope):
    """The job's processes besides the ranks: by cookie, by descent, orphans that came back to
    this subreaper (new children that are no rank), and its cgroup's."""

    def __init__(self, cookie: str, cgroup: _cgroup.Cgroup | None, since: int | None) -> None:
        self.cookie, self.cgroup, self.since = cookie, cgroup, since
        self.before = _procs.children()  # children this process had before the attempt: not the job's

    def fork(self) -> AbstractContextManager[object]:
        return _cgroup.inside(self.cgroup)

    def others(self, started: set[int]) -> set[int]:
        orphans = _procs.children() - self.before - started
        held = _cgroup.members(self.cgroup.path) - started if self.cgroup else set()
        return _procs.job_processes(self.cookie, started | orphans | held, self.before | started,
                                    self.since) | orphans | held

    def kill(self, started: set[int], others: set[int]) -> None:
        pass  # looked up afresh once the ranks are reaped (``end``): a pid may be reused by now

    def end(self, started: set[int], settled: bool) -> None:
        if not settled:  # settled: no process of the job was there to fork another since the look
            _procs.kill_all(lambda: self.others(started))  # and what was forked meanwhile
        if self.cgroup is not None:  # at once, whatever is still there
            _cgroup.kill(self.cgroup.path)
        _procs.reap(_procs.children() - self.before)  # orphans that came back only as they died


class Attempts:
    """Runs attempts of one job; ``logs`` collects output across attempts."""

    def __init__(self, logs: Logs, grace: float, zero_or_greater: bool = False, processes_per_node: int = 1,
                 cookie: str = "", cgroup: _cgroup.Cgroup | None = None) -> None:
        self.logs = logs
        self.processes_per_node = processes_per_node
        self.grace = grace
        self.zero_or_greater = zero_or_greater
        self.cookie = cookie  # every process of the job has it in its env (see _procs)
        self.cgroup = cgroup  # every process of the job is in it, where there is one
        self._since = _procs.start_time(os.getpid())  # no process of the job started before this one

    def run(self, launches: tuple[Launch, ...], attempt: int, deadline: float | None, note: str = "",
            notice: supervise.Notice | None = None, hang: _hang.Watch | None = None) -> Attempt:
        """One attempt; ``note`` goes into the log headers (`` (port retry 1)``), ``notice``: the
        signals that preempt it (the ranks get notice and the grace) rather than cancel it."""
        offsets = []
        for launch in launches:
            r = launch.replica
            names = [r.name] if r.output is None else [f"rank{i}" for i in range(r.ranks)] + [r.name]
            for name in names:  # the header is masked by Logs: an input value may be secret
                self.logs.open(name, f"=== attempt {attempt + 1}{note}: {r.role} {r.index} on node {r.node}: "
                                     f"{' '.join(launch.argv)}")
            offsets.append(self.logs.path(r.name).stat().st_size)
        starts = [supervise.Start(launch.replica.name, launch.argv, launch.env, str(launch.cwd),
                                  Stream(launch.replica, self.logs), launch.replica.service) for launch in launches]
        try:
            done = supervise.supervise(starts, self.grace, zero_or_greater=self.zero_or_greater, deadline=deadline,
                                       scope=_Scope(self.cookie, self.cgroup, self._since), flush=self.logs.flush,
                                       notice=notice, hang=hang)
        except supervise.NotStarted as exc:  # the others were stopped
            raise StartError(launches[exc.index], exc.error) from exc
        failure = None
        if done.failed is not None and done.outcome == "failed":
            i = done.failed
            failure = self._failure(launches[i], done.processes[i], offsets[i], done.after)
        elif done.stall is not None:  # no rank made progress: the rank not in a collective is to blame
            failure = _hang.failure(done.stall, self.logs, self.processes_per_node, done.after)
        results = tuple(ProcessResult(launch.replica.name, launch.replica.role, launch.replica.node, p.pid or 0,
                                      None if p.stopped else p.code, self.logs.path(launch.replica.name))
                        for launch, p in zip(launches, done.processes))
        still = tuple(p.name for launch, p in zip(launches, done.processes)
                      if p.stopped and not (done.outcome == "succeeded" and launch.replica.service))
        return Attempt(done.outcome, results, failure, done.signals[0] if done.signals else None, still)

    # -- report --------------------------------------------------------------------------
    def _failure(self, launch: Launch, p: supervise.Ended, offset: int, after: float) -> Failure:
        r = launch.replica
        rc = 1 if p.stopped or p.code is None else p.code  # stopped: its rank watcher's report ended the job
        name, detail, pid = r.name, "", p.pid or 0
        # a process hosting several ranks (mpirun) says which of them ended the job: its launcher parses it
        blamed = r.failure(" ".join(self._log_text(r.name, offset).split())) if r.failure is not None else None
        if p.report is not None:  # its rank watcher saw the rank fail: the job was stopped at once
            blamed = RankFailure(*rankwatch.blame(p.report))
        if blamed is not None:
            name, detail = f"rank{blamed.rank}", blamed.detail
            rc = blamed.exit_code if blamed.exit_code is not None else rc
            pid = blamed.pid if blamed.pid is not None else pid
        tail = tuple(self.logs.tails.get(name) or ())
        log = self.logs.path(name)
        if name != r.name and not tail:  # a wrapper that does not tag its ranks' lines: its own log
            tail = tuple(self.logs.tails.get(r.name) or ())
            log = self.logs.path(r.name)
        if not tail and r.output is not None:  # a silent wrapper (mpirun): its ranks' logs hold the error
            tail = tuple(f"[{rank}] {line}" for rank, lines in sorted(self.logs.tails.items())
                         if rank.startswith("rank") for line in list(lines)[-8:])
            log = log.parent
        error = _error_file(launch.env.get("TORCHELASTIC_ERROR_FILE", ""))
        if error:  # the rank's own report (torch's @record), as torchrun shows it
            detail = error[0] if not detail else f"{detail}; {error[0]}"
            tail = tail or error[1]
        role, node = r.role, r.node
        if name != r.name:  # a rank the wrapper started: ranks fill the nodes in order
            role, node = "rank", int(name[4:]) // self.processes_per_node
        return Failure(name, role, node, rc, log, tail, pid, after, detail)

    def _log_text(self, name: str, offset: int) -> str:
        self.logs.flush()
        with open(self.logs.path(name), "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")


def _error_file(path: str) -> tuple[str, tuple[str, ...]] | None:
    """The exception a rank's ``@record`` wrote to its TORCHELASTIC_ERROR_FILE: its message and
    the last lines of its traceback; None when there is none (most scripts do not use @record)."""
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        message = data["message"]
        if isinstance(message, dict):
            text, stack = str(message.get("message", "")), str((message.get("extraInfo") or {}).get("py_callstack", ""))
        else:
            text, stack = str(message), ""
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return f"error file {path}: {text}", tuple(stack.rstrip().splitlines()[-12:])
