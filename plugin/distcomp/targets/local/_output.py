"""Route each process's output: a log file per rank, ``[rankN]: `` lines on the console, and
the last lines of each rank kept for the root-cause report. A process that hosts several ranks
has its lines split back into the ranks they came from by its launcher's demultiplexer
(``Replica.output``; e.g. mpirun's ``--output tag``).

What reaches the console is on disk first: lines are written to the log files as they come,
and ``flush`` (once per batch the supervisor reads) pushes the files, then shows the batch on
the console; so a ``distcomp run`` killed with SIGKILL leaves logs holding all it showed.
The job's secrets (``distcomp.base.redact.Masker``) are masked in every line before it goes anywhere.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import IO, Callable

from ...records import Replica
from ...base.redact import NONE, Masker

TAIL_LINES = 15


class Logs:
    """The open log files and tails of one job, by name (``rank0``, ``launcher0``)."""

    def __init__(self, log_dir: Path, console: Callable[[str], None] | None, masker: Masker = NONE) -> None:
        self.log_dir = log_dir
        self.console = console
        self.masker = masker
        self._files: dict[str, IO[bytes]] = {}
        self._dirty: set[str] = set()
        self._shown: list[str] = []  # console lines waiting for their log lines to be on disk
        self.tails: dict[str, deque[str]] = {}
        log_dir.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def open(self, name: str, header: str) -> None:
        """Start (or continue, on a restart) ``name``'s log; a user's old logs are kept."""
        if name not in self._files:
            self._files[name] = open(self.path(name), "ab")
        self._files[name].write(self.masker.text(header).encode("utf-8", "surrogateescape") + b"\n")
        self._dirty.add(name)
        self.tails[name] = deque(maxlen=TAIL_LINES)

    def line(self, name: str, raw: bytes) -> None:
        if name not in self._files:
            self.open(name, f"=== {name}")
        raw = self.masker.raw(raw)  # decoded only when it holds a secret: other bytes stay as written
        self._files[name].write(raw + b"\n")
        self._dirty.add(name)
        text = raw.decode("utf-8", "replace").rstrip("\r")
        self.tails[name].append(text)
        if self.console is not None:
            self._shown.append(f"[{name}]: {text}\n")

    def flush(self) -> None:
        """The log files to disk, then the console: it never shows what a log does not hold."""
        try:
            for name in self._dirty:
                self._files[name].flush()
            self._dirty.clear()
        finally:
            shown, self._shown = "".join(self._shown), []
            if shown and self.console is not None:
                try:
                    self.console(shown)
                except (OSError, ValueError):  # the console went away (closed pipe): keep logging
                    self.console = None

    def close(self) -> None:
        """Flush and close every log; the first error (a full disk) is raised once all are closed."""
        errors: list[OSError] = []
        for step in (self.flush, *(f.close for f in self._files.values())):
            try:
                step()
            except OSError as exc:
                errors.append(exc)
        self._files.clear()
        if errors:
            raise errors[0]


class Stream:
    """Splits one process's pipe into lines and hands them to Logs under the right name."""

    def __init__(self, replica: Replica, logs: Logs) -> None:
        self.replica = replica
        self.logs = logs
        self._partial = b""
        self.demux = replica.output

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
        if self.demux is not None:
            found = self.demux(raw)
            if found is not None:
                self.logs.line(f"rank{found[0]}", found[1])
                return
        self.logs.line(self.replica.name, raw)
