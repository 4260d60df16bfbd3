"""Start one attempt of a job and watch it, the way TorchX's local scheduler and torchrun do.

All processes of a job share one process group, so a signal reaches every rank and anything
a rank started. The first process to fail ends the attempt: the group gets SIGTERM, then
SIGKILL after the grace period. One loop, no threads: it waits on the processes' pipes and
on a wake-up pipe that SIGCHLD, SIGINT and SIGTERM write to, so a failure is seen at once.

A process can leave the group (``setsid``, ``start_new_session=True``); it still carries the
job's cookie and, orphaned, is re-parented to this process (a child subreaper, see
``_procs``), so the stop at the end of every attempt finds it and ends it with the ranks.
Where the job has a cgroup (``_cgroup``), each rank is forked into it and nothing it starts
can leave: the stop ends with ``cgroup.kill``.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...agent import rankwatch
from ...errors import JobError
from ...records import RankFailure
from . import _cgroup, _procs
from ._output import Logs, Stream
from ._prepare import Launch
from ._records import Failure, ProcessResult

Outcome = Literal["succeeded", "failed", "timed_out", "cancelled"]


class StartError(JobError):
    """A process could not be started (exec failed): which one, and the OSError."""

    def __init__(self, launch: Launch, error: OSError) -> None:
        super().__init__(str(error))
        self.launch, self.error = launch, error


@dataclass
class _Proc:
    launch: Launch
    popen: subprocess.Popen[bytes]
    stream: Stream
    started: float
    log_offset: int
    ended: float | None = None
    rank_exits: str = ""  # where its rank watchers report (a wrapper of ranks: mpirun), if anywhere
    report: dict[str, Any] | None = None  # the first rank it hosts that failed by itself


@dataclass
class Attempt:
    outcome: Outcome
    processes: tuple[ProcessResult, ...]
    failure: Failure | None = None
    signal: int | None = None
    still_running: tuple[str, ...] = ()  # names of what the timeout or signal had to stop


@dataclass
class _Signals:
    """Route SIGCHLD/SIGINT/SIGTERM into a wake-up pipe while an attempt runs (main thread only)."""

    received: list[int] = field(default_factory=list)
    _old: dict[int, object] = field(default_factory=dict)
    _old_fd: int = -1
    read_fd: int = -1
    write_fd: int = -1

    def __enter__(self) -> "_Signals":
        import threading
        if threading.current_thread() is not threading.main_thread():
            return self  # a library caller in a thread: plain polling, no signal handling
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)
        self._old_fd = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if signum != signal.SIGCHLD:
            self.received.append(signum)

    def drain(self) -> None:
        if self.read_fd >= 0:
            try:
                while os.read(self.read_fd, 512):
                    pass
            except BlockingIOError:
                pass

    def __exit__(self, *exc: object) -> None:
        if self.read_fd < 0:
            return
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]
        signal.set_wakeup_fd(self._old_fd)
        os.close(self.read_fd)
        os.close(self.write_fd)


def _failed(returncode: int, zero_or_greater: bool) -> bool:
    return returncode < 0 if zero_or_greater else returncode != 0


class Supervisor:
    """Runs attempts of one job; ``logs`` collects output across attempts."""

    def __init__(self, logs: Logs, grace: float, zero_or_greater: bool = False, processes_per_node: int = 1,
                 cookie: str = "", cgroup: _cgroup.Cgroup | None = None) -> None:
        self.logs = logs
        self.processes_per_node = processes_per_node
        self.grace = grace
        self.zero_or_greater = zero_or_greater
        self.cookie = cookie  # every process of the job has it in its env (see _procs)
        self.cgroup = cgroup  # every process of the job is in it, where there is one
        self._selector = selectors.DefaultSelector()
        self._before: set[int] = set()  # children this process had before the attempt: not the job's
        self._since = _procs.start_time(os.getpid())  # no process of the job started before this one

    # -- start ---------------------------------------------------------------------------
    def _start(self, launches: tuple[Launch, ...], attempt: int, note: str = "") -> list[_Proc]:
        procs: list[_Proc] = []
        pgid = 0
        try:
            for launch in launches:
                r = launch.replica
                names = [r.name] if r.output is None else [f"rank{i}" for i in range(r.ranks)] + [r.name]
                for name in names:  # the header is masked by Logs: an input value may be secret
                    self.logs.open(name, f"=== attempt {attempt + 1}{note}: {r.role} {r.index} on node {r.node}: "
                                         f"{' '.join(launch.argv)}")
                offset = self.logs.path(r.name).stat().st_size
                if launch.env.get(rankwatch.ENV):  # this attempt's reports only
                    rankwatch.clear(launch.env[rankwatch.ENV])
                try:
                    with _cgroup.inside(self.cgroup):
                        popen = subprocess.Popen(
                            list(launch.argv), cwd=launch.cwd, env=dict(launch.env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, process_group=pgid)
                except OSError as exc:
                    raise StartError(launch, exc) from exc
                pgid = pgid or popen.pid
                assert popen.stdout is not None
                os.set_blocking(popen.stdout.fileno(), False)
                proc = _Proc(launch, popen, Stream(r, self.logs), time.monotonic(), offset,
                             rank_exits=launch.env.get(rankwatch.ENV, ""))
                self._selector.register(popen.stdout, selectors.EVENT_READ, proc)
                procs.append(proc)
        except BaseException:
            self._stop(procs)
            raise
        return procs

    # -- watch ---------------------------------------------------------------------------
    def run(self, launches: tuple[Launch, ...], attempt: int, deadline: float | None, note: str = "") -> Attempt:
        """One attempt; ``note`` goes into the log headers (`` (port retry 1)``)."""
        with _Signals() as signals:
            if signals.read_fd >= 0:  # a signal wakes the loop at once
                self._selector.register(signals.read_fd, selectors.EVENT_READ, None)
            self._before = _procs.children()
            t0 = time.monotonic()
            procs = self._start(launches, attempt, note)
            try:
                outcome, failed = self._watch(procs, signals, deadline, t0)
            except BaseException:  # never leave ranks behind, whatever went wrong here
                self._stop(procs, signals)
                raise
            still = tuple(p.launch.replica.name for p in procs
                          if p.ended is None and not (outcome == "succeeded" and p.launch.replica.service))
            ended = [p.ended is not None for p in procs]  # before the stop: the others were stopped
            self._stop(procs, signals)
            # built after the stop, so the tail holds the last output drained from its pipe
            failure = self._failure(*failed) if failed is not None and outcome == "failed" else None
            results = tuple(ProcessResult(p.launch.replica.name, p.launch.replica.role, p.launch.replica.node,
                                          p.popen.pid, p.popen.returncode if done else None,
                                          self.logs.path(p.launch.replica.name)) for p, done in zip(procs, ended))
            return Attempt(outcome, results, failure,
                           signals.received[0] if signals.received else None, still)

    def _watch(self, procs: list[_Proc], signals: _Signals, deadline: float | None,
               t0: float) -> tuple[Outcome, tuple[_Proc, int, float] | None]:
        """Wait until every required process is done, one fails, a signal comes or time is up."""
        failed: tuple[_Proc, int, float] | None = None
        watched = [p for p in procs if p.rank_exits]
        while True:
            # a rank watcher's report comes as a file: looked for 10 times a second (a listdir)
            timeout = 0.05 if signals.read_fd < 0 else 0.1 if watched else 1.0
            if deadline is not None:
                timeout = max(0.0, min(timeout, deadline - time.monotonic()))
            self._pump(timeout, signals)
            now = time.monotonic()
            for p in procs:
                if p.ended is None and p.popen.poll() is not None:
                    p.ended = now
                    if failed is None and _failed(p.popen.returncode, self.zero_or_greater):
                        failed = (p, p.popen.returncode, now - t0)
                        if p.rank_exits:  # its watchers reported before it ended: the rank, not the wrapper
                            p.report = rankwatch.first_failure(p.rank_exits, self.zero_or_greater)
            for p in watched:  # a rank that failed by itself, before its wrapper (mpirun) ends the job
                if failed is None and p.ended is None:
                    p.report = rankwatch.first_failure(p.rank_exits, self.zero_or_greater)
                    if p.report is not None:
                        failed = (p, 1, now - t0)
            if signals.received:
                return "cancelled", failed
            if failed is not None:
                return "failed", failed
            if all(p.ended is not None for p in procs if not p.launch.replica.service):
                return "succeeded", failed
            if deadline is not None and now >= deadline:
                return "timed_out", failed

    def _pump(self, timeout: float, signals: _Signals) -> None:
        """Move whatever output is ready into the logs; wait at most ``timeout``."""
        if not self._selector.get_map():
            time.sleep(timeout)
            return
        read = False
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                signals.drain()
                continue
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            read = True
            key.data.stream.feed(data)
            if not data:
                self._selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
        if read:  # what the console shows is on disk: one flush per batch, not per line
            self.logs.flush()

    # -- stop ----------------------------------------------------------------------------
    def _stop(self, procs: list[_Proc], signals: _Signals | None = None) -> None:
        """SIGTERM to the group, each process and every other process of the job (escaped from
        the group or re-parented here), SIGKILL after the grace period, then drain."""
        pgid = procs[0].popen.pid if procs else None
        ranks = {p.popen.pid for p in procs}
        others: set[int] = set()

        def find() -> set[int]:
            """The job's processes besides the ranks: by cookie, by descent, orphans that came
            back to this subreaper (new children that are no rank), and its cgroup's."""
            orphans = _procs.children() - self._before - ranks
            held = _cgroup.members(self.cgroup.path) - ranks if self.cgroup else set()
            found = _procs.job_processes(self.cookie, ranks | orphans | held, self._before | ranks,
                                         self._since) | orphans | held
            others.update(found)
            return found

        def send(sig: int, everyone: bool = True) -> None:
            if pgid is not None:
                try:
                    os.killpg(pgid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            for p in procs:
                if p.popen.poll() is None:
                    try:
                        p.popen.send_signal(sig)
                    except ProcessLookupError:
                        pass
            if everyone:
                _procs.signal_all(others, sig)

        sigs = signals or _Signals()
        settled = False  # every rank had ended and nothing else of the job was left when looked for
        try:
            ended = all(p.popen.poll() is not None for p in procs)  # before the look: none can fork after it
            settled = not find() and ended
            send(signal.SIGTERM)
            end = time.monotonic() + self.grace
            while time.monotonic() < end and (any(p.popen.poll() is None for p in procs)
                                              or any(_procs.alive(pid) for pid in others)):
                if len(sigs.received) > 1:
                    break  # a second Ctrl-C: do not wait for the grace period
                self._pump(0.02, sigs)
                _procs.reap(others)
        finally:  # whatever failed while draining (a log that cannot be written), nothing survives
            send(signal.SIGKILL, everyone=False)  # the others are looked up afresh: a pid may be reused by now
            for p in procs:
                p.popen.wait()
                if p.ended is None:
                    p.ended = time.monotonic()
            if not settled:  # settled: no process of the job was there to fork another since the look
                _procs.kill_all(find)  # and what was forked meanwhile
            if self.cgroup is not None:  # at once, whatever is still there
                _cgroup.kill(self.cgroup.path)
            _procs.reap(_procs.children() - self._before)  # orphans that came back only as they died
        # the output still in the pipes; a grandchild that kept a pipe open gets a short while
        end = time.monotonic() + 0.5
        while any(key.data is not None for key in self._selector.get_map().values()) and time.monotonic() < end:
            self._pump(0.05, sigs)
        for key in list(self._selector.get_map().values()):
            self._selector.unregister(key.fileobj)
            if key.data is not None:
                key.data.stream.feed(b"")
                key.fileobj.close()  # type: ignore[union-attr]
        self.logs.flush()

    # -- report --------------------------------------------------------------------------
    def _failure(self, p: _Proc, rc: int, after: float) -> Failure:
        r = p.launch.replica
        name, detail, pid = r.name, "", p.popen.pid
        # a process hosting several ranks (mpirun) says which of them ended the job: its launcher parses it
        blamed = r.failure(" ".join(self._log_text(p).split())) if r.failure is not None else None
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
        error = _error_file(p.launch.env.get("TORCHELASTIC_ERROR_FILE", ""))
        if error:  # the rank's own report (torch's @record), as torchrun shows it
            detail = error[0] if not detail else f"{detail}; {error[0]}"
            tail = tail or error[1]
        role, node = r.role, r.node
        if name != r.name:  # a rank the wrapper started: ranks fill the nodes in order
            role, node = "rank", int(name[4:]) // self.processes_per_node
        return Failure(name, role, node, rc, log, tail, pid, after, detail)

    def _log_text(self, p: _Proc) -> str:
        self.logs.flush()
        with open(self.logs.path(p.launch.replica.name), "rb") as f:
            f.seek(p.log_offset)
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
