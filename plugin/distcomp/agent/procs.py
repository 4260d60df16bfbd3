"""What a supervisor learns of processes through Linux's /proc: whether one still runs, when it
started, the descendants of some; and how it signals and reaps a set of them. Standard library
only (the node agent's supervisor uses it; the local target's adds its job cookie on top)."""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Iterable

PROC = "/proc"


def stat(pid: int) -> tuple[str, int, int] | None:
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
    st = stat(pid)
    return st[2] if st else None


def alive(pid: int) -> bool:
    """Running (a zombie is dead: only its exit status is left to collect)."""
    st = stat(pid)
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


def pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(PROC) if name.isdigit()]
    except OSError:
        return []


def tree(since: int | None = None) -> dict[int, list[int]]:
    """Each live process's children, by parent pid; ``since``: leave out processes older than
    this start time (``start_time``), and with them the cost of reading more of them."""
    children: dict[int, list[int]] = {}
    for pid in pids():
        st = stat(pid)
        if st is None or st[0] in ("Z", "X") or (since is not None and st[2] < since):
            continue
        children.setdefault(st[1], []).append(pid)
    return children


def below(children: dict[int, list[int]], roots: Iterable[int]) -> set[int]:
    """Every descendant of ``roots`` in ``children`` (``tree``)."""
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def descendants(roots: Iterable[int]) -> set[int]:
    """Every live descendant of ``roots`` (Linux /proc; elsewhere none: the group is all there is)."""
    return below(tree(), roots)


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of ``pids`` that are this process's children and have
    ended (an orphan re-parented to a subreaper); the others are someone else's to reap."""
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
