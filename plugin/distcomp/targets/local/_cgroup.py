"""A cgroup (v2) per job, where the kernel lets this process make one: no fork escapes it.

A process cannot leave its cgroup by itself: ``setsid``, a cleared environment, a double fork
all stay inside, so ``cgroup.kill`` ends every process of the job at once, whoever asks (the
supervisor at the end of an attempt, its watchdog or ``distcomp reap`` after it died). The
job's cgroup is made under the supervisor's own (a delegated one, or any it may write, as root
in a container); each rank is forked inside it: the supervisor steps in for the fork and back
out at once, so the child starts there before it runs a line of its own. Where that is not
allowed (cgroup v1 only, a cgroup owned by someone else) ``create`` returns None and the job's
cookie and the supervisor's subreaper are what there is (``_procs``). ``DISTCOMP_CGROUP=off``
asks for that on purpose.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from . import _procs

SWITCH = "DISTCOMP_CGROUP"


@dataclass(frozen=True)
class Cgroup:
    """The job's cgroup (``path``) and the one the supervisor lives in (``home``)."""

    path: str
    home: str


def _v2_mount() -> str | None:
    try:
        with open(f"{_procs.PROC}/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    return left.split(" ")[4]
    except OSError:
        pass
    return None


def _own() -> str | None:
    try:
        with open(f"{_procs.PROC}/self/cgroup", encoding="utf-8") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def _move(cgroup: str, pid: int = 0) -> None:
    with open(os.path.join(cgroup, "cgroup.procs"), "w", encoding="ascii") as f:
        f.write(str(pid))


def create(cookie: str) -> Cgroup | None:
    """The job's cgroup, made and proven usable (this process moved in and back out), or None."""
    if os.environ.get(SWITCH, "").lower() in ("0", "off", "no", "false"):
        return None
    mount, own = _v2_mount(), _own()
    if mount is None or own is None or own.endswith(" (deleted)"):
        return None
    home = os.path.join(mount, own.lstrip("/"))
    path = os.path.join(home, f"distcomp-{cookie[:16]}")
    try:
        os.mkdir(path)
    except OSError:
        return None
    try:
        _move(path)
        _move(home)
    except OSError:
        try:
            _move(home)
        except OSError:
            pass
        remove(path)
        return None
    return Cgroup(path, home)


@contextmanager
def inside(cgroup: Cgroup | None) -> Iterator[None]:
    """This process in the job's cgroup for the block: what it forks there starts there."""
    if cgroup is None:
        yield
        return
    _move(cgroup.path)
    try:
        yield
    finally:
        _move(cgroup.home)


def members(path: str | None) -> set[int]:
    """Every process in the cgroup ``path`` and the cgroups under it (not this one)."""
    return _all(path) - {os.getpid()}


def _all(path: str | None) -> set[int]:
    found: set[int] = set()
    if not path:
        return found
    for folder, _dirs, _files in os.walk(path):
        try:
            with open(os.path.join(folder, "cgroup.procs"), encoding="ascii") as f:
                found.update(int(pid) for pid in f.read().split())
        except (OSError, ValueError):
            pass
    return found


def populated(path: str) -> bool:
    """Any live process left in the cgroup (False once it is gone)."""
    try:
        with open(os.path.join(path, "cgroup.events"), encoding="ascii") as f:
            return "populated 1" in f.read()
    except OSError:
        return False


def kill(path: str | None, wait: float = 5.0) -> set[int]:
    """SIGKILL everything in the cgroup, at once where the kernel has ``cgroup.kill`` (5.14),
    round by round otherwise; returns what was still there (empty: the cgroup is empty)."""
    if not path or not os.path.isdir(path):
        return set()
    if os.getpid() in _all(path):  # never the caller: it steps out after each fork
        raise RuntimeError(f"distcomp itself is in {path}: it would kill itself")
    try:
        with open(os.path.join(path, "cgroup.kill"), "w", encoding="ascii") as f:
            f.write("1")
    except OSError:
        _procs.kill_all(lambda: members(path))
    end = time.monotonic() + wait
    while populated(path) and time.monotonic() < end:
        _procs.reap(members(path))  # those that are this process's children
        time.sleep(0.01)
    return members(path)


def remove(path: str | None) -> None:
    """Remove the (emptied) cgroup and any a rank made under it."""
    if not path:
        return
    for folder, _dirs, _files in sorted(os.walk(path), key=lambda w: -len(w[0])):
        try:
            os.rmdir(folder)
        except OSError:
            pass
