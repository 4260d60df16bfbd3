"""A command under a real pseudo-terminal, as a user's shell runs it: what the terminal got."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

CLEAR = "\r\x1b[K"  # what distcomp's live line starts each drawing with (distcomp.cli._live)


def under_pty(argv: list[str], env: dict[str, str], cwd: Path, stderr_tty: bool = True,
              timeout: float = 240, ci: bool = False) -> tuple[int, str, str]:
    """Run ``argv`` with stdout (and stderr, unless not ``stderr_tty``: a pipe then) on a real
    pty 200 columns wide: its exit code, what the terminal got, and the pipe's text. The terminal
    is a user's: a real ``TERM``, and ``CI`` only where ``ci`` asks for it (a CI runner sets
    ``CI`` and may leave ``TERM`` dumb or unset; either would turn distcomp's live line off)."""
    env = {name: value for name, value in env.items() if name != "CI"}
    if ci:
        env["CI"] = "true"
    if env.get("TERM", "dumb") == "dumb":
        env["TERM"] = "xterm-256color"
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave if stderr_tty else subprocess.PIPE,
                            env=env, cwd=cwd)
    os.close(slave)
    got = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _w, _x = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every end of the pty's slave is closed
                    break
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None and not select.select([master], [], [], 0.2)[0]:
                break
        code = proc.wait(timeout=60)
        piped = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, got.decode(errors="replace"), piped
