"""The one supervision loop (``distcomp.agent.supervise``) with real processes, called as the node
agent and the local target call it: the first failure ends the others at once, a process that
cannot start either stops the others (NotStarted) or fails with 127 (``start_failed``), a
service is stopped once the others ended well, a deadline stops what runs, and the caller's
``Scope`` forks each process and ends what is left after the stop."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from distcomp.agent import procs, supervise

PY = sys.executable


class _Collect:
    """A sink that keeps what it was fed, and whether it saw the end (b"")."""

    def __init__(self) -> None:
        self.data, self.closed = b"", False

    def feed(self, data: bytes) -> None:
        if data:
            self.data += data
        else:
            self.closed = True


def _start(name: str, code: str, tmp_path: Path, service: bool = False) -> supervise.Start:
    return supervise.Start(name, [PY, "-c", code], dict(os.environ), str(tmp_path), _Collect(), service)


def test_the_first_failure_ends_the_others_at_once_and_every_output_is_drained(tmp_path: Path) -> None:
    starts = [_start("a", "import time; print('a up', flush=True); time.sleep(60)", tmp_path),
              _start("b", "import time; time.sleep(0.3); print('b fails'); raise SystemExit(3)", tmp_path)]
    t0 = time.monotonic()
    done = supervise.supervise(starts, grace=5.0)
    assert time.monotonic() - t0 < 3  # not a's 60 s, nor the grace: a ends on SIGTERM
    assert done.outcome == "failed" and done.failed == 1 and 0.3 <= done.after < 3
    a, b = done.processes
    assert (b.code, b.stopped) == (3, False)
    assert (a.code, a.stopped) == (-signal.SIGTERM, True)
    assert not procs.alive(a.pid or 0)
    assert [s.sink.data for s in starts] == [b"a up\n", b"b fails\n"]  # type: ignore[attr-defined]
    assert all(s.sink.closed for s in starts)  # type: ignore[attr-defined]


def test_a_process_that_cannot_start_stops_the_others_or_fails_with_127(tmp_path: Path) -> None:
    first = _start("a", "import time; time.sleep(60)", tmp_path)
    missing = supervise.Start("b", [str(tmp_path / "no-such-program")], dict(os.environ), str(tmp_path), _Collect())
    with pytest.raises(supervise.NotStarted) as info:
        supervise.supervise([first, missing], grace=5.0)
    assert info.value.index == 1 and isinstance(info.value.error, FileNotFoundError)
    told: list[tuple[int, str]] = []
    done = supervise.supervise([first, missing], grace=5.0,
                               start_failed=lambda i, exc: told.append((i, type(exc).__name__)))
    assert told == [(1, "FileNotFoundError")]
    assert done.outcome == "failed" and done.failed == 1
    assert (done.processes[1].code, done.processes[1].pid) == (127, None)
    assert done.processes[0].stopped and done.processes[0].code == -signal.SIGTERM


def test_a_service_is_stopped_once_the_others_ended_well_when_the_caller_lets_it(tmp_path: Path) -> None:
    starts = [_start("ps", "import time; time.sleep(60)", tmp_path, service=True),
              _start("worker", "print('done')", tmp_path)]
    asked: list[float] = []

    def may_stop() -> bool:  # as the agent's: another node's worker has not reported for 0.5 s
        asked.append(time.monotonic())
        return asked[-1] - asked[0] >= 0.5

    done = supervise.supervise(starts, grace=5.0, services_may_stop=may_stop)
    assert done.outcome == "succeeded" and len(asked) >= 2
    ps, worker = done.processes
    assert (worker.code, worker.stopped) == (0, False) and ps.stopped


def test_a_deadline_stops_what_still_runs(tmp_path: Path) -> None:
    done = supervise.supervise([_start("a", "import time; time.sleep(60)", tmp_path)], grace=5.0,
                               deadline=time.monotonic() + 0.5)
    assert done.outcome == "timed_out" and done.failed is None
    assert done.processes[0].stopped


class _Recording(supervise.Scope):
    """A caller's scope: counts the forks made in its context, and says what the stop left it."""

    def __init__(self) -> None:
        self.forks = 0
        self.ended: list[tuple[set[int], bool]] = []

    @contextlib.contextmanager
    def fork(self) -> Iterator[None]:
        self.forks += 1
        yield

    def end(self, started: set[int], settled: bool) -> None:
        self.ended.append((started, settled))


def test_the_scope_forks_each_process_and_finds_what_a_process_left_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # a process that leaves a child of its own running (in a new session: out of the group)
    leaver = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
              f" start_new_session=True); open({str(pidfile)!r}, 'w').write(str(p.pid)); import time; time.sleep(60)")
    scope = _Recording()
    starts = [_start("a", leaver, tmp_path), _start("b", "import time; time.sleep(0.5); raise SystemExit(1)", tmp_path)]
    done = supervise.supervise(starts, grace=5.0, scope=scope)
    assert scope.forks == 2
    assert scope.ended == [({p.pid for p in done.processes}, False)]
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while procs.alive(child) and time.monotonic() < deadline:  # a descendant: SIGTERMed with the rest
        time.sleep(0.05)
    assert not procs.alive(child)


# -- a preemption notice (issue 36) ------------------------------------------------------------
def _notice(tmp_path: Path, grace: float) -> tuple[supervise.Notice, Path, list[str]]:
    from distcomp.agent.longjob import give_notice

    path, given = tmp_path / "notice", []

    def give(why: str) -> None:
        given.append(why)
        give_notice(str(path), why)
    return supervise.Notice((signal.SIGUSR1, signal.SIGTERM), give, grace), path, given


def _signal_soon(sig: int, after: float, times: int = 1) -> None:
    """``sig`` to this process (the supervisor) ``after`` s from now, ``times`` times 0.5 s apart."""
    import threading

    def send() -> None:
        for n in range(times):
            time.sleep(after if n == 0 else 0.5)
            os.kill(os.getpid(), sig)
    threading.Thread(target=send, daemon=True).start()


def test_notice_lets_the_processes_save_and_leave_and_is_no_failure(tmp_path: Path) -> None:
    notice, path, given = _notice(tmp_path, grace=30.0)
    # each process saves and leaves (exit 0 or 143) once the notice file exists: what a rank's
    # runtime.preempted() sees; none is signalled while it has the grace
    leave = ("import os, sys, time\nwhile not os.path.exists({p!r}): time.sleep(0.05)\n"
             "open({p!r} + '.{n}', 'w').write('saved'); sys.exit({code})")
    starts = [_start("a", leave.format(p=str(path), n="a", code=0), tmp_path),
              _start("b", leave.format(p=str(path), n="b", code=143), tmp_path)]
    _signal_soon(signal.SIGUSR1, 0.5)
    t0 = time.monotonic()
    done = supervise.supervise(starts, grace=5.0, notice=notice)
    assert time.monotonic() - t0 < 10  # they left on notice: not the 30 s grace
    assert done.outcome == "preempted" and done.failed is None and given == ["SIGUSR1"]
    assert [p.code for p in done.processes] == [0, 143] and not any(p.stopped for p in done.processes)
    assert (tmp_path / "notice.a").read_text() == (tmp_path / "notice.b").read_text() == "saved"
    assert path.read_text().split()[1] == "SIGUSR1"


@pytest.mark.slow
def test_a_process_that_ignores_the_notice_is_stopped_after_its_grace_or_at_a_second_signal(tmp_path: Path) -> None:
    for times, bound in ((1, (1.5, 8.0)), (2, (0.0, 1.4))):
        notice, _, given = _notice(tmp_path, grace=1.5 if times == 1 else 30.0)
        starts = [_start("a", "import time; time.sleep(60)", tmp_path)]
        _signal_soon(signal.SIGTERM, 0.3, times)
        t0 = time.monotonic()
        done = supervise.supervise(starts, grace=5.0, notice=notice)
        took = time.monotonic() - t0 - 0.3
        assert bound[0] <= took < bound[1], (times, took)
        assert done.outcome == "preempted" and given == ["SIGTERM"]
        a = done.processes[0]
        assert a.stopped and a.code == -signal.SIGTERM and not procs.alive(a.pid or 0)


def test_without_a_notice_sigterm_still_cancels_and_sigint_always_does(tmp_path: Path) -> None:
    notice, path, given = _notice(tmp_path, grace=30.0)
    for sig, kw in ((signal.SIGTERM, {}), (signal.SIGINT, {"notice": notice})):
        _signal_soon(sig, 0.3)
        done = supervise.supervise([_start("a", "import time; time.sleep(60)", tmp_path)], grace=5.0, **kw)
        assert done.outcome == "cancelled" and done.signals == (sig,)
    assert given == [] and not path.exists()
