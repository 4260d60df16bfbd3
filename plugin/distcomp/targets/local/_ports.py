"""Free localhost ports, so two jobs on one machine never share a rendezvous port.

A port the kernel says is free is free only until someone binds it, and a rank binds its
port seconds after it was picked (torch is imported first). So each port handed out is also
reserved, for ``RESERVE_S`` seconds, by a file in a per-user folder that every distcomp
process consults under a lock: two distcomp jobs never get the same port, however many start
at once. Another program can still take a port in that window; the runner then starts the
attempt again on fresh ports (see ``_runner``).
"""

from __future__ import annotations

import fcntl
import os
import socket
import stat
import sys
import time
from pathlib import Path

RESERVE_S = 60.0


def reservations() -> Path:
    return Path(_temp_dir()) / f"distcomp-{os.getuid()}" / "ports"


def _temp_dir() -> str:
    """``tempfile.gettempdir()``: the first of $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp that
    is a folder this process may write, without importing tempfile where nothing did (it and
    its ``random`` cost ~4 ms of every `distcomp run`'s start); tempfile decides the rest."""
    if "tempfile" not in sys.modules:  # else its answer, with a ``tempfile.tempdir`` set in-process
        names = [os.environ.get(n, "") for n in ("TMPDIR", "TEMP", "TMP")]
        for folder in [n for n in names if n] + ["/tmp", "/var/tmp", "/usr/tmp"]:
            if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
                return os.path.abspath(folder)
    import tempfile

    return tempfile.gettempdir()


def _reserve(folder: Path, port: int, now: float) -> bool:
    """Take ``port`` unless another process reserved it less than RESERVE_S ago (lock held)."""
    path = folder / str(port)
    try:
        if now - path.stat().st_mtime < RESERVE_S:
            return False
    except FileNotFoundError:
        pass
    path.write_text(f"{os.getpid()}\n", encoding="ascii")
    return True


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports free right now and reserved for this process (see above)."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    folder = reservations()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        mine = os.lstat(folder.parent)  # not a folder (or link) someone else made for us in /tmp
        if not stat.S_ISDIR(mine.st_mode) or mine.st_uid != os.getuid():
            raise PermissionError(f"{folder.parent} is not this user's folder")
        lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:  # no folder of our own: plain free ports, the retry still covers a clash
        lock = -1
    try:
        if lock >= 0:
            fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        for _ in range(count * 50):
            if len(ports) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)  # held open until the end: the kernel gives no port twice meanwhile
            port = s.getsockname()[1]
            try:
                if lock < 0 or _reserve(folder, port, now):
                    ports.append(port)
            except OSError:
                ports.append(port)
        if len(ports) < count:
            raise OSError(f"could not find {count} free ports on {host} not reserved by another distcomp job")
        return ports
    finally:
        for s in socks:
            s.close()
        if lock >= 0:
            os.close(lock)


def release_ports() -> None:
    """Drop this process's reservations (its ranks have bound or given up their ports), and
    any left by a process that died RESERVE_S ago or more."""
    folder, me = reservations(), f"{os.getpid()}\n"
    try:
        lock = os.open(folder / ".lock", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        for name in os.listdir(folder):
            path = folder / name
            try:
                if name.isdigit() and (now - path.stat().st_mtime >= RESERVE_S or path.read_text("ascii") == me):
                    path.unlink()
            except OSError:
                pass
    finally:
        os.close(lock)
