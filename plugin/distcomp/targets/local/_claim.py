"""One job per run folder, and a watchdog that outlives a killed supervisor.

``claim`` takes an exclusive ``flock`` on ``RUN_DIR/.distcomp.lock`` before anything else of
the job exists (its MLflow run, its logs); a second job on that folder is refused, naming the
first. The lock is close-on-exec: no rank holds it, so a rank cannot keep a folder busy after
its job. The one process that shares it is the watchdog: a tiny stdlib-only Python in its own
session (so a Ctrl-C or a kill of the job's group does not take it down first), holding the
read end of a pipe whose write end only the supervisor has. When the supervisor ends, it
writes ``done``; when it dies (SIGKILL, a crash), the pipe closes without it and the watchdog
becomes ``distcomp reap`` for this job: it stops every process carrying the job's cookie, in
the job's cgroup, or noted in ``ADOPTED`` (see ``_WATCHDOG``), marks status.json and the MLflow
run failed, and only then lets the folder go.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import UsageError

LOCK_NAME = ".distcomp.lock"
REAP_RECORD = ".distcomp.reap.json"  # the watchdog's job record (distcomp.worker), if the supervisor dies
ADOPTED = ".distcomp.adopted"  # the watchdog's note of the supervisor's children: "PID START" lines
# Waits for the pipe; "done" ends it, anything else makes it `distcomp reap` for the job.
# Meanwhile, every 0.2 s, it notes the supervisor's new children without the job's cookie (the
# orphans the subreaper adopted: a double-forked daemon with a cleared environment) in ADOPTED,
# "new" meaning started after the watchdog itself (not after its Python came up: on a loaded
# machine a rank may have started and left a daemon by then),
# with their start times: without a cgroup, that is how such a process is found after the
# supervisor died (one adopted in the last 0.2 s before a SIGKILL can escape). Each line is
# signed ("PID START MAC", HMAC-SHA256 with the job's note key, which only its reap record holds,
# mode 600): a note anyone else wrote names no process to stop (``_reap.adopted``).
_WATCHDOG = (
    "import os, select, sys\n"
    "fd, note, sup = int(sys.argv[1]), sys.argv[2], os.getppid()\n"
    "try:\n"
    "    import json\n"
    "    with open(sys.argv[-1], 'rb') as f: key = json.load(f)['options']['note_key'].encode()\n"
    "except (OSError, ValueError, KeyError, TypeError, AttributeError): key = None\n"
    "def sign(pid, start):\n"
    "    import hmac\n"
    "    return hmac.new(key, f'{pid} {start}'.encode(), 'sha256').hexdigest()\n"
    "mark = b'\\0DISTCOMP_JOB_COOKIE=' + sys.argv[3].encode() + b'\\0'\n"
    "def kids():\n"
    "    out = set()\n"
    "    try:\n"
    "        for t in os.listdir(f'/proc/{sup}/task'):\n"
    "            with open(f'/proc/{sup}/task/{t}/children') as f: out.update(f.read().split())\n"
    "    except OSError: pass\n"
    "    return out\n"
    "def started(pid):\n"
    "    try:\n"
    "        with open(f'/proc/{pid}/stat', 'rb') as f: return f.read().rsplit(b')', 1)[1].split()[19].decode()\n"
    "    except (OSError, IndexError): return None\n"
    "def marked(pid):\n"
    "    try:\n"
    "        with open(f'/proc/{pid}/environ', 'rb') as f: return mark in b'\\0' + f.read()\n"
    "    except OSError: return True\n"
    "me = started(os.getpid()) or '0'\n"
    "old = {p for p in kids() if p == str(os.getpid()) or int(started(p) or 0) < int(me)}\n"
    "seen, got = {}, b''\n"
    "while True:\n"
    "    if select.select([fd], [], [], 0.2)[0]:\n"
    "        chunk = os.read(fd, 16)\n"
    "        if not chunk: break\n"
    "        got += chunk\n"
    "        continue\n"
    "    now = {p: t for p, t in seen.items() if started(p) == t}\n"
    "    now.update((p, started(p)) for p in kids() - old - seen.keys() if not marked(p))\n"
    "    now = {p: t for p, t in now.items() if t}\n"
    "    if now != seen and key and os.path.isdir(os.path.dirname(note)):\n"
    "        try:\n"
    "            with open(note + '.tmp', 'w') as f: f.write(''.join(f'{p} {t} {sign(p, t)}\\n' for p, t in now.items()))\n"
    "            os.replace(note + '.tmp', note)\n"
    "        except OSError: pass\n"
    "    seen = now\n"
    "if got != b'done': os.execv(sys.argv[4], sys.argv[4:])\n"
    "for path in (note, sys.argv[-1]):\n"
    "    try: os.unlink(path)\n"
    "    except OSError: pass\n"
    "os._exit(0)\n")  # nothing to flush or finalize: the supervisor waits for this exit


class RunDirBusy(UsageError):
    """The run folder is another job's (or cannot be made): what, whose, and what to do."""


@dataclass
class Claim:
    """A run folder held by this job: its lock, its cookie and its watchdog."""

    run_dir: Path
    job_id: str
    cookie: str
    lock_fd: int
    note_key: str = ""  # signs the watchdog's ADOPTED note; kept in its reap record only (mode 600)
    created: list[Path] = field(default_factory=list)  # what claiming made, removed if the job never starts
    watchdog: subprocess.Popen[bytes] | None = None
    started: bool = False  # set once the job's status.json is written: from then on everything stays
    _pipe: int = -1

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Tell the watchdog all is well, let the folder go; undo the claim if nothing ran."""
        if self._pipe >= 0:
            try:
                os.write(self._pipe, b"done")
            except OSError:  # the watchdog is gone (killed): nothing to tell
                pass
            os.close(self._pipe)
            self._pipe = -1
        if self.watchdog is not None:
            try:
                self.watchdog.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.lock_fd >= 0:
            if not self.started:
                for path in self.created:
                    try:
                        path.unlink() if path.name == LOCK_NAME else path.rmdir()
                    except OSError:
                        pass
            os.close(self.lock_fd)
            self.lock_fd = -1


def holder(text: str) -> dict[str, Any]:
    """Who holds a lock, as its holder wrote it (empty if it has not yet)."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(info: dict[str, Any]) -> str:
    """``in use by job J (pid N on host H, since T)`` from a lock file's text."""
    since = info.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return (f"in use by job {info.get('job_id', '?')} (pid {info.get('pid', '?')} on host {info.get('host', '?')}, "
            f"since {when})")


def lock(path: Path, create: bool) -> tuple[int, bool]:
    """An fd of ``path`` and whether this process now holds its exclusive lock (never blocks)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return fd, False
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd, True
        except FileNotFoundError:
            pass
        os.close(fd)  # the file was replaced while we waited: lock the one that is there now


def claim(run_dir: Path, job_id: str, grace: float, watchdog: bool = True) -> Claim:
    """Hold ``run_dir`` for one job; raises RunDirBusy naming the job that has it."""
    created: list[Path] = []
    missing = [p for p in (run_dir, *run_dir.parents) if not p.exists()]
    try:
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o775)  # never writable by all: its reap record is trusted
        path = run_dir / LOCK_NAME
        if not path.exists():
            created.append(path)
        fd, held = lock(path, create=True)
    except OSError as exc:
        raise RunDirBusy(f"cannot use run folder {run_dir}: {exc.strerror or exc}; pick another --run-dir") from None
    created += missing  # deepest first, so each folder is empty when its turn comes
    if not held:
        with os.fdopen(fd, encoding="utf-8") as f:
            info = holder(f.read())
        raise RunDirBusy(f"run folder {run_dir} is {describe_holder(info)}; pick another --run-dir")
    me = {"job_id": job_id, "pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(me).encode(), 0)
    # the cookie: secrets.token_hex(16), without importing secrets (hmac's OpenSSL load, at every start)
    held_claim = Claim(run_dir, job_id, os.urandom(16).hex(), fd, os.urandom(16).hex(), created)
    if watchdog:
        _start_watchdog(held_claim, grace)
    return held_claim


def _start_watchdog(c: Claim, grace: float) -> None:
    read, write = os.pipe()  # both close-on-exec: only the watchdog gets the read end, by pass_fds
    from ...core.jobrecord import JobRecord, write_record

    # what it runs if the supervisor dies: a record, never flags (``distcomp.worker``); single-use,
    # removed by the reap that reads it, or by the watchdog when the job ended well
    record = c.run_dir.absolute() / REAP_RECORD
    try:
        write_record(record, JobRecord("reap", options={"run_dir": str(c.run_dir.absolute()), "lock_fd": c.lock_fd,
                                                        "cookie": c.cookie, "grace": grace, "note_key": c.note_key}))
    except OSError:
        return  # no watchdog: the job still runs, `distcomp reap` can close it later
    reap = [sys.executable, "-m", "distcomp.worker", str(record)]
    try:
        err = sys.stderr.fileno()  # its report goes where distcomp's own messages go
    except (AttributeError, OSError, ValueError):
        err = subprocess.DEVNULL
    try:
        note = str(c.run_dir.absolute() / ADOPTED)
        c.watchdog = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHDOG, str(read), note, c.cookie, *reap],
                                      pass_fds=(read, c.lock_fd), stdin=subprocess.DEVNULL, stdout=err,
                                      stderr=err, start_new_session=True, cwd="/")  # no folder of the job's
    except OSError:
        os.close(write)  # no watchdog: the job still runs, `distcomp reap` can close it later
    else:
        c._pipe = write
    finally:
        os.close(read)
