"""Staging folders that name their owner, so a publish killed mid-way is cleaned up safely.

A staging folder is called ``HOST,PID,START,NAME@VERSION.RANDOM``: HOST is this machine
(hostname, plus a digest of its boot id and PID namespace, so a rebooted machine or two
containers sharing a hostname are told apart), PID the publisher, START its start time in
clock ticks since boot (``/proc/PID/stat``), so a reused PID is not taken for the owner.
A folder of this host whose owner is gone is left over; one of another host (whose
processes cannot be seen from here) only when it has not changed for ``STALE_S``; a live
publisher's, never. Without ``/proc`` the check falls back to ``kill(PID, 0)``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import socket
import time
from dataclasses import dataclass

__all__ = ["STALE_S", "Leftover", "leftover", "owner_prefix"]

STALE_S = 24 * 3600.0  # another host's staging folder unchanged this long is a crashed publish's
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot); '' without /proc; None when it is gone
    (a zombie is gone: it runs nothing)."""
    if not os.path.isdir("/proc/self"):
        return ""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat[stat.rfind(")") + 2:].split() if stat else []  # the name in (...) may hold spaces
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


@functools.lru_cache(maxsize=1)
def _host() -> str:
    name = _UNSAFE.sub("_", socket.gethostname())[:40] or "host"
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    machine = _read("/proc/sys/kernel/random/boot_id") + namespace
    return f"{name}-{hashlib.sha256(machine.encode()).hexdigest()[:8]}" if machine else name


def owner_prefix(label: str) -> str:
    """The start of a staging folder's name for this process publishing ``label`` (NAME@VERSION)."""
    pid = os.getpid()
    return f"{_host()},{pid},{_start_ticks(pid) or ''},{label[:120]}."


def _alive(pid: int, start: str) -> bool:
    now = _start_ticks(pid)
    if now is None:
        return False
    if now and start:
        return now == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's live process
        pass
    return True


@dataclass(frozen=True)
class Leftover:
    """A staging folder no live publisher owns: what it was for, and why it is judged dead."""

    label: str  # NAME@VERSION, as far as the folder's name tells
    reason: str


def leftover(name: str, mtime: float, now: float | None = None) -> Leftover | None:
    """Whether the staging folder called ``name`` (last changed at ``mtime``) is left over."""
    parts = name.split(",", 3)
    age = (time.time() if now is None else now) - mtime
    if len(parts) == 4 and parts[1].isdigit():
        host, pid, start, rest = parts
        label = rest.rsplit(".", 1)[0]
        if host == _host():
            return None if _alive(int(pid), start) else Leftover(label, f"its publisher (pid {pid}) is gone")
        if age > STALE_S:
            return Leftover(label, f"unchanged for {age / 3600:.0f} h (publisher pid {pid} on {host.rsplit('-', 1)[0]})")
        return None
    if age > STALE_S:  # named before owners were recorded
        return Leftover(name.rsplit(".", 1)[0], f"unchanged for {age / 3600:.0f} h")
    return None
