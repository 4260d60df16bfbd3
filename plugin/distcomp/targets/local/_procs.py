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

from ...agent.procs import (  # noqa: F401  (re-exported: the local target's process helpers)
    PROC as PROC, alive as alive, below, kill_all as kill_all, pids as _pids, reap as reap,
    signal_all as signal_all, start_time as start_time, stat as _stat,
)
from .._cookie import COOKIE as COOKIE  # re-exported: the runner puts it in every rank's env
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


def boot_id() -> str | None:
    try:
        with open(f"{PROC}/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _has_cookie(pid: int, needle: bytes) -> bool:
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:  # gone, or another user's
        return False


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
    found |= below(children, [*found, *roots])
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
