"""Route each process's output: a log file per rank, ``[rankN]: `` lines on the console, and
the last lines of each rank kept for the root-cause report. ``mpirun --output tag`` lines
(``[1,3]<stdout>: ...``) are split back into the ranks they came from."""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path
from typing import IO, Callable

from ...records import Replica

TAIL_LINES = 15
_MPI_TAG = re.compile(rb"^\[(\d+),(\d+)\]<(?:stdout|stderr)>: ?")


class Logs:
    """The open log files and tails of one job, by name (``rank0``, ``launcher0``)."""

    def __init__(self, log_dir: Path, console: Callable[[str], None] | None) -> None:
        self.log_dir = log_dir
        self.console = console
        self._files: dict[str, IO[bytes]] = {}
        self.tails: dict[str, deque[str]] = {}
        log_dir.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def open(self, name: str, header: str) -> None:
        """Start (or continue, on a restart) ``name``'s log; a user's old logs are kept."""
        if name not in self._files:
            self._files[name] = open(self.path(name), "ab")
        self._files[name].write(header.encode() + b"\n")
        self.tails[name] = deque(maxlen=TAIL_LINES)

    def line(self, name: str, raw: bytes) -> None:
        if name not in self._files:
            self.open(name, f"=== {name}")
        self._files[name].write(raw + b"\n")
        text = raw.decode("utf-8", "replace").rstrip("\r")
        self.tails[name].append(text)
        if self.console is not None:
            try:
                self.console(f"[{name}]: {text}\n")
            except (OSError, ValueError):  # the console went away (closed pipe): keep logging
                self.console = None

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


class Stream:
    """Splits one process's pipe into lines and hands them to Logs under the right name."""

    def __init__(self, replica: Replica, logs: Logs) -> None:
        self.replica = replica
        self.logs = logs
        self._partial = b""
        self.tagged = replica.output == "openmpi-tagged"

    def feed(self, data: bytes) -> None:
        if not data:  # EOF: a last line without newline still counts
            if self._partial:
                self._emit(self._partial)
                self._partial = b""
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        for raw in lines:
            self._emit(raw)

    def _emit(self, raw: bytes) -> None:
        if self.tagged:
            m = _MPI_TAG.match(raw)
            if m:
                self.logs.line(f"rank{int(m.group(2))}", raw[m.end():])
                return
        self.logs.line(self.replica.name, raw)
