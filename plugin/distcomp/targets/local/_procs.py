"""Find every process of a job, even one that left the job's process group, through Linux's /proc.

Every process a job starts carries ``DISTCOMP_JOB_COOKIE=<random>`` in its environment (the
way Jenkins' ProcessTreeKiller finds a build's processes by BUILD_ID), so it can be found by
anyone, even after the supervisor is gone; the supervisor is also a child subreaper, so a
rank's orphaned descendants come back to it instead of going to PID 1. Without /proc (not
Linux) the cookie cannot be read: the process group is then all there is.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Iterable

from .._cookie import COOKIE as COOKIE  # re-exported: the runner puts it in every rank's env
PROC = "/proc"
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def set_subreaper(on: bool) -> bool | None:
    """Make this process a child subreaper (or stop being one); returns the previous setting,
    None where the kernel has no such thing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        old = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(old), 0, 0, 0) != 0:
            return None
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return None
        return bool(old.value)
    except (OSError, AttributeError):
        return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time in clock ticks after boot) of ``pid``, or None if it is gone."""
    try:  # os.read: a look at every process reads this file of each, a buffered file costs a third more
        fd = os.open(f"{PROC}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)  # one line of well under 1 KiB
        finally:
            os.close(fd)
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()  # the name may hold spaces and parentheses
    return fields[0].decode(), int(fields[1]), int(fields[19])


def start_time(pid: int) -> int | None:
    """When ``pid`` started (ticks after boot): with the boot id, tells a pid reused by another program."""
    st = _stat(pid)
    return st[2] if st else None


def boot_id() -> str | None:
    try:
        with open(f"{PROC}/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """Running (a zombie is dead: only its exit status is left to collect)."""
    st = _stat(pid)
    if st is not None:
        return st[0] not in ("Z", "X")
    if os.path.isdir(PROC):
        return False
    try:  # no /proc: ask the kernel
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _has_cookie(pid: int, needle: bytes) -> bool:
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:  # gone, or another user's
        return False


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(PROC) if name.isdigit()]
    except OSError:
        return []


def job_processes(cookie: str, roots: Iterable[int] = (), exclude: Iterable[int] = (),
                  since: int | None = None) -> set[int]:
    """Live processes carrying ``cookie``, plus every descendant of them and of ``roots``
    (one that cleared its environment is still found through its parent). ``since``: a start
    time (``start_time``) no process of the job can precede, such as its supervisor's: older
    processes are not read further (their environments are most of the cost of a look)."""
    needle = f"\0{COOKIE}={cookie}\0".encode()
    children: dict[int, list[int]] = {}
    found: set[int] = set()
    for pid in _pids():
        st = _stat(pid)
        if st is None or st[0] in ("Z", "X") or (since is not None and st[2] < since):
            continue
        children.setdefault(st[1], []).append(pid)
        if cookie and _has_cookie(pid, needle):
            found.add(pid)
    todo = [*found, *roots]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found - set(exclude) - {os.getpid()}


def children() -> set[int]:
    """This process's children (zombies too): the ones to leave alone are those it had before."""
    out: set[int] = set()
    me = os.getpid()
    try:  # the kernel's list per thread (CONFIG_PROC_CHILDREN); else scan every process
        for tid in os.listdir(f"{PROC}/{me}/task"):
            with open(f"{PROC}/{me}/task/{tid}/children", encoding="ascii") as f:
                out.update(int(pid) for pid in f.read().split())
        return out
    except OSError:
        pass
    for pid in _pids():
        st = _stat(pid)
        if st is not None and st[1] == me:
            out.add(pid)
    return out


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of ``pids`` that are this process's children and have
    ended (an orphan re-parented to the subreaper); the others are someone else's to reap."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def kill_all(find: Callable[[], set[int]]) -> set[int]:
    """SIGKILL whatever ``find`` returns until nothing it finds is left (looking again each
    round, for anything forked meanwhile); returns every pid it saw."""
    seen: set[int] = set()
    for _ in range(50):  # SIGKILL lands at once; a process forking in a loop needs a few rounds
        more = find()
        seen |= more
        signal_all(more, signal.SIGKILL)
        reap(seen)
        if not any(alive(pid) for pid in seen):
            break
        time.sleep(0.02)
    return seen


def stop(find: Callable[[], set[int]], grace: float) -> int:
    """SIGTERM whatever ``find`` returns, up to ``grace`` seconds for it to end, then SIGKILL;
    returns how many processes there were."""
    seen = find()
    signal_all(seen, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and any(alive(pid) for pid in seen):
        reap(seen)
        time.sleep(0.02)
    return len(seen | kill_all(find))
