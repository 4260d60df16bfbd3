"""The one supervision loop: start a node's processes, watch them, stop them all; the node agent
and the local target (``distcomp run``) both run their processes through it.

All processes share one process group, so a signal reaches each of them and anything they
started. The first process to fail ends the others: SIGTERM to the group, to each process and
to the job's other processes (``Scope.others``), ``grace`` seconds, then SIGKILL. One loop, no
threads: it waits on the processes' pipes and on a wake-up pipe that SIGCHLD, SIGINT and SIGTERM
write to, so an end or a signal is seen at once; a second signal cuts the grace. A process that
hosts ranks (mpirun) may have them watched (``rankwatch``): the first rank to fail by itself
ends the job at once. Service processes (TF parameter servers) are stopped once the others
ended well. A ``Notice`` makes its signals a preemption notice, not a stop: the notice is given
(a file the ranks look for, ``longjob``), the processes get its grace to save and leave by
themselves, then whatever still runs is stopped; the outcome is "preempted", never "failed".
What differs between the callers is passed in: each process's output sink, where
processes are forked and how the job's other processes are found (``Scope``). The result is
plain data (``Supervised``), which each caller turns into its own reports. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Literal, Mapping, Protocol, Sequence

from . import procs as _procs
from . import rankwatch

if TYPE_CHECKING:
    from .hang import Stall, Watch

Outcome = Literal["succeeded", "failed", "timed_out", "cancelled", "preempted"]


class Sink(Protocol):
    def feed(self, data: bytes) -> None:
        """Output as it comes from the pipe; ``b""`` once at its end."""


@dataclass(frozen=True)
class Start:
    """One process to start: its name, argv, full env and folder, and where its output goes."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str
    sink: Sink
    service: bool = False  # serves the others: stopped once they ended well


@dataclass
class Ended:
    """How one process ended. ``code``: its exit status (negative: the signal), None if it
    never started; ``stopped``: it still ran when the stop began."""

    name: str
    pid: int | None
    code: int | None = None
    ended: float | None = None  # time.time()
    stopped: bool = False
    error: OSError | None = None  # why it could not start
    report: dict[str, Any] | None = None  # its rank watcher's report of the first of its ranks that failed


@dataclass(frozen=True)
class Supervised:
    outcome: Outcome
    processes: tuple[Ended, ...]
    failed: int | None = None  # the index of the process whose failure ended the job
    after: float = 0.0  # seconds from the first start to that failure
    signals: tuple[int, ...] = ()  # the SIGINT/SIGTERM received, in order
    stall: "Stall | None" = None  # the job hung (``hang``): failed, with no process to blame by its exit


@dataclass(frozen=True)
class Notice:
    """Signals that mean "this attempt will be stopped": ``give`` is called once with the
    signal's name (it writes the notice the ranks see), then the processes have ``grace``
    seconds to end by themselves; a second signal stops them at once."""

    signals: tuple[int, ...]
    give: Callable[[str], None]
    grace: float


class NotStarted(Exception):
    """A process could not be started (exec failed): its index, and the OSError."""

    def __init__(self, index: int, error: OSError) -> None:
        super().__init__(str(error))
        self.index, self.error = index, error


class Scope:
    """Where the processes are forked and how the job's other processes are found; this one is
    the node agent's: forked here, the others are the processes' descendants (/proc)."""

    def fork(self) -> ContextManager[object]:
        """The context each process is forked in (the local job's cgroup)."""
        return contextlib.nullcontext()

    def others(self, started: set[int]) -> set[int]:
        """The job's live processes besides those started."""
        return _procs.descendants(started) - started

    def kill(self, started: set[int], others: set[int]) -> None:
        """At the end of the grace: SIGKILL what is left besides the processes and their group,
        before those are reaped (their orphans go to PID 1, where no descendant is found); a
        second look for what was forked meanwhile."""
        _procs.signal_all(others | self.others(started), signal.SIGKILL)
        _procs.signal_all(self.others(started), signal.SIGKILL)

    def end(self, started: set[int], settled: bool) -> None:
        """Once the processes were reaped; ``settled``: they had all ended and nothing else was found."""


@dataclass
class _Proc:
    start: Start
    ended: Ended
    popen: subprocess.Popen[bytes] | None = None
    rank_exits: str = ""  # where its rank watchers report (a wrapper of ranks: mpirun), if anywhere


@dataclass
class _Signals:
    """Route SIGCHLD/SIGINT/SIGTERM into a wake-up pipe while the processes run (main thread only)."""

    received: list[int] = field(default_factory=list)
    extra: tuple[int, ...] = ()  # a notice's own signals (SIGUSR1), routed as SIGINT/SIGTERM are
    _old: dict[int, object] = field(default_factory=dict)
    _old_fd: int = -1
    read_fd: int = -1
    write_fd: int = -1

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is not threading.main_thread():
            return self  # a library caller in a thread: plain polling, no signal handling
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)
        self._old_fd = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        for sig in dict.fromkeys((signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, *self.extra)):
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


def supervise(starts: Sequence[Start], grace: float, *, zero_or_greater: bool = False,
              deadline: float | None = None, scope: Scope | None = None,
              flush: Callable[[], None] | None = None,
              start_failed: Callable[[int, OSError], None] | None = None,
              services_may_stop: Callable[[], bool] | None = None, notice: Notice | None = None,
              hang: "Watch | None" = None) -> Supervised:
    """Start ``starts`` and watch them until every one that is no service has ended, one fails, a
    signal comes or ``deadline`` (time.monotonic) is passed; then stop whatever still runs.

    ``flush`` runs after each batch of output read; ``start_failed``: a process that cannot be
    started has failed with 127, after this is told (without it, the others are stopped and
    NotStarted is raised); ``services_may_stop``: whether the services may be stopped once the
    others here ended (other nodes' processes may still need them); ``notice``: the signals
    that preempt the attempt rather than cancel it; ``hang``: a stall ends the job as failed,
    with the ranks' stacks (``Supervised.stall``)."""
    loop = _Loop(grace, zero_or_greater, scope or Scope(), flush, services_may_stop, notice)
    loop.hang = hang
    return loop.run(starts, deadline, start_failed)


def _failed(code: int, zero_or_greater: bool) -> bool:
    return code < 0 if zero_or_greater else code != 0


class _Loop:
    def __init__(self, grace: float, zero_or_greater: bool, scope: Scope, flush: Callable[[], None] | None,
                 services_may_stop: Callable[[], bool] | None, notice: Notice | None = None) -> None:
        self.grace, self.zero_or_greater, self.scope = grace, zero_or_greater, scope
        self.flush = flush
        self.services_may_stop = services_may_stop
        self.selector = selectors.DefaultSelector()
        self.notice = notice
        self.noticed: float | None = None  # when the notice's grace ends (time.monotonic)
        self.signals = _Signals(extra=notice.signals if notice is not None else ())
        self.hang: Watch | None = None
        self.stall: Stall | None = None
        self.stalled = 0.0  # seconds from the first start to the stall's report

    def run(self, starts: Sequence[Start], deadline: float | None,
            start_failed: Callable[[int, OSError], None] | None) -> Supervised:
        with self.signals as signals:
            if signals.read_fd >= 0:  # a signal wakes the loop at once
                self.selector.register(signals.read_fd, selectors.EVENT_READ, None)
            t0 = time.monotonic()
            procs: list[_Proc] = []
            try:
                self._start(starts, procs, start_failed)
                outcome, failed = self._watch(procs, deadline, t0)
            finally:  # never leave a process behind, whatever went wrong here
                try:
                    self._stop(procs)
                finally:
                    self.selector.close()
            index = procs.index(failed[0]) if failed is not None else None
            return Supervised(outcome, tuple(p.ended for p in procs), index, failed[1] if failed else self.stalled,
                              tuple(signals.received), self.stall)

    # -- start ---------------------------------------------------------------------------
    def _start(self, starts: Sequence[Start], procs: list[_Proc],
               start_failed: Callable[[int, OSError], None] | None) -> None:
        pgid = 0
        for i, s in enumerate(starts):
            if self.signals.received:
                return  # stopped before all started: the rest never start
            proc = _Proc(s, Ended(s.name, None), rank_exits=s.env.get(rankwatch.ENV, ""))
            if proc.rank_exits:  # this attempt's reports only
                rankwatch.clear(proc.rank_exits)
            try:
                with self.scope.fork():
                    popen = subprocess.Popen(
                        list(s.argv), cwd=s.cwd, env=dict(s.env), stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, process_group=pgid)
            except OSError as exc:
                if start_failed is None:
                    raise NotStarted(i, exc) from exc
                start_failed(i, exc)  # a missing program: it failed as a shell would say (127)
                proc.ended.code, proc.ended.ended, proc.ended.error = 127, time.time(), exc
                procs.append(proc)
                continue
            pgid = pgid or popen.pid
            assert popen.stdout is not None
            os.set_blocking(popen.stdout.fileno(), False)
            proc.popen, proc.ended.pid = popen, popen.pid
            self.selector.register(popen.stdout, selectors.EVENT_READ, proc)
            procs.append(proc)

    # -- watch ---------------------------------------------------------------------------
    def _watch(self, procs: list[_Proc], deadline: float | None,
               t0: float) -> tuple[Outcome, tuple[_Proc, float] | None]:
        """Wait until every required process is done, one fails, a signal comes or time is up."""
        failed: tuple[_Proc, float] | None = None
        received = self.signals.received
        watched = [p for p in procs if p.rank_exits]
        for p in procs:
            if failed is None and p.ended.code is not None:  # could not start
                failed = (p, 0.0)
        while True:
            # a rank watcher's report comes as a file: looked for 10 times a second (a listdir)
            timeout = 0.05 if self.signals.read_fd < 0 else 0.1 if watched else 1.0
            if deadline is not None:
                timeout = max(0.0, min(timeout, deadline - time.monotonic()))
            if self.noticed is not None:
                timeout = max(0.0, min(timeout, self.noticed - time.monotonic()))
            if failed is None:  # else one could not start: nothing to wait for
                self._pump(timeout)
            now = time.monotonic()
            for p in procs:
                if p.ended.ended is None and p.popen is not None and p.popen.poll() is not None:
                    p.ended.code, p.ended.ended = p.popen.returncode, time.time()
                    if failed is None and _failed(p.popen.returncode, self.zero_or_greater):
                        failed = (p, now - t0)
                        if p.rank_exits:  # its watchers reported before it ended: the rank, not the wrapper
                            p.ended.report = rankwatch.first_failure(p.rank_exits, self.zero_or_greater)
            for p in watched:  # a rank that failed by itself, before its wrapper (mpirun) ends the job
                if failed is None and not received and p.ended.ended is None:
                    p.ended.report = rankwatch.first_failure(p.rank_exits, self.zero_or_greater)
                    if p.ended.report is not None:
                        failed = (p, now - t0)
            if received and self.notice is not None and received[0] in self.notice.signals:
                if self._preempted(procs, now):
                    return "preempted", None  # whatever ended meanwhile left on notice: no failure
                continue
            if received:
                return "cancelled", failed
            if failed is not None:
                return "failed", failed
            if all(p.ended.ended is not None for p in procs if not p.start.service) and (
                    self.services_may_stop is None or not any(p.start.service and p.ended.ended is None for p in procs)
                    or self.services_may_stop()):
                return "succeeded", failed
            if deadline is not None and now >= deadline:
                return "timed_out", failed
            if self.hang is not None and self.hang.due(lambda: self._job(procs)):  # no rank beat for the timeout
                self.stall = self.hang.dump(self.hang.job, self._pump)
                self.stalled = now - t0
                return "failed", None

    def _job(self, procs: list[_Proc]) -> set[int]:
        """The job's processes here: those started, and the others the scope finds."""
        started = {p.popen.pid for p in procs if p.popen is not None}
        return started | self.scope.others(started)

    def _preempted(self, procs: list[_Proc], now: float) -> bool:
        """Give the notice once; the attempt is over when every process left, the grace is
        spent, or a second signal came."""
        assert self.notice is not None
        if self.noticed is None:
            self.noticed = now + self.notice.grace
            self.notice.give(signal.Signals(self.signals.received[0]).name)
        left = all(p.ended.ended is not None for p in procs if not p.start.service)
        return left or now >= self.noticed or len(self.signals.received) > 1

    def _pump(self, timeout: float) -> None:
        """Move whatever output is ready into the sinks; wait at most ``timeout``."""
        if not self.selector.get_map():
            time.sleep(timeout)
            return
        read = False
        for key, _ in self.selector.select(timeout):
            if key.data is None:
                self.signals.drain()
                continue
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            read = True
            key.data.start.sink.feed(data)
            if not data:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
        if read and self.flush is not None:  # one flush per batch, not per line
            self.flush()

    # -- stop ----------------------------------------------------------------------------
    def _stop(self, procs: list[_Proc]) -> None:
        """SIGTERM to the group, each process and the job's other processes, SIGKILL after the
        grace period, then the output left in the pipes."""
        started = [p for p in procs if p.popen is not None]
        pids = {p.popen.pid for p in started if p.popen is not None}
        pgid = started[0].popen.pid if started and started[0].popen is not None else None
        others: set[int] = set()
        running = [p for p in started if p.popen is not None and p.popen.poll() is None]
        for p in running:
            p.ended.stopped = True

        def find() -> set[int]:
            found = self.scope.others(pids)
            others.update(found)
            return found

        def send(sig: int, everyone: bool = True) -> None:
            if pgid is not None:
                try:
                    os.killpg(pgid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            for p in running:
                if p.popen is not None and p.popen.poll() is None:
                    try:
                        p.popen.send_signal(sig)
                    except ProcessLookupError:
                        pass
            if everyone:
                _procs.signal_all(others, sig)

        settled = False  # every process had ended and nothing else of the job was left when looked for
        try:
            if started:
                settled = not find() and not running  # running before the look: none can fork after it
                send(signal.SIGTERM)
                end = time.monotonic() + self.grace
                while time.monotonic() < end and (any(p.popen is not None and p.popen.poll() is None for p in running)
                                                  or any(_procs.alive(pid) for pid in others)):
                    if len(self.signals.received) > 1:
                        break  # a second signal: do not wait for the grace period
                    self._pump(0.02)
                    _procs.reap(others)
        finally:  # whatever failed while draining (a log that cannot be written), nothing survives
            if started:
                send(signal.SIGKILL, everyone=False)  # the others as the scope finds them now: a pid may be reused
                if not settled:
                    self.scope.kill(pids, others)
            for p in started:
                assert p.popen is not None
                p.popen.wait()
                if p.ended.ended is None:
                    p.ended.code, p.ended.ended = p.popen.returncode, time.time()
            if started:
                self.scope.end(pids, settled)
        # the output still in the pipes; a grandchild that kept a pipe open gets a short while
        end = time.monotonic() + 0.5
        while any(key.data is not None for key in self.selector.get_map().values()) and time.monotonic() < end:
            self._pump(0.05)
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fileobj)
            if key.data is not None:
                key.data.start.sink.feed(b"")
                key.fileobj.close()  # type: ignore[union-attr]
        if self.flush is not None:
            self.flush()
