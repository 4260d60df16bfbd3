"""The live line of ``distcomp run`` and a waiting ``distcomp submit``: one line on stderr,
rewritten in place about once a second while the job runs: elapsed time, the ranks alive (those
that beat lately), the latest step, rank 0's latest metric and the restarts, all read from the
ranks' beats (``agent.progress``) by a thread of its own.

Like a progress bar it is there only for a person: off when stderr is no terminal, with
``--quiet``, and in CI (``$CI`` set). Every line the command prints while it is drawn (a rank's
output through ``echo``, distcomp's own through ``speaker``) is printed inside ``cleared()``,
which erases the line first and draws it again after, so no printed line holds a piece of it.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, TextIO

if TYPE_CHECKING:
    from ..api import JobHandle

TICK = 1.0  # seconds between two reads of the beats (a rank writes its beat at most once a second)
ALIVE_S = 30.0  # a rank whose last beat is older is not counted alive
CLEAR = "\r\x1b[K"  # to the line's start, and erase it

# what the line reads: the folder the ranks beat into now (None: not known yet, or none) and the
# restarts known apart from the beats (an attempt announced by the local runner)
Source = Callable[[], "tuple[str | None, int]"]


def wanted(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether to draw: a terminal, not ``--quiet``, not CI, not a dumb terminal."""
    stream = sys.stderr if stream is None else stream
    if quiet or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or no real stream
        return False


@dataclass(frozen=True)
class Frame:
    """What one drawing of the line says."""

    elapsed: float
    alive: int  # ranks whose last beat is at most ALIVE_S old
    ranks: int  # ranks that beat at all this attempt
    step: int | None  # the latest step any rank reached
    metric: tuple[str, float] | None  # rank 0's latest metric
    restarts: int

    def text(self, command: str) -> str:
        parts = [_clock(self.elapsed),
                 f"{self.alive}/{self.ranks} ranks alive" if self.ranks else "no rank has beaten yet"]
        if self.step is not None:
            parts.append(f"step {self.step}")
        if self.metric is not None:
            parts.append(f"{self.metric[0]} {self.metric[1]:.4g}")
        parts.append(f"{self.restarts} restart{'' if self.restarts == 1 else 's'}")
        return f"distcomp {command}: " + " | ".join(parts)


def frame(beats: Mapping[str, Mapping[str, object]], elapsed: float, restarts: int, now: float) -> Frame:
    """The line's facts from every rank's last beat (``progress.read``)."""
    from ..agent.progress import metric_of

    steps: list[int] = []
    alive = 0
    for beat in beats.values():
        step, at, attempt = beat.get("step"), beat.get("at"), beat.get("attempt")
        if isinstance(step, int) and not isinstance(step, bool):
            steps.append(step)
        if isinstance(at, (int, float)) and now - at <= ALIVE_S:
            alive += 1
        if isinstance(attempt, str) and attempt.isdigit():  # the rank's restart count
            restarts = max(restarts, int(attempt))
    return Frame(elapsed, alive, len(beats), max(steps) if steps else None,
                 metric_of(beats["rank0"]) if "rank0" in beats else None, restarts)


def _clock(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class LiveLine:
    """The line, drawn by a thread from ``source`` between ``start`` and ``stop``. While it is
    on, ``cleared()`` (``echo``'s and ``speaker``'s) erases it around each print."""

    def __init__(self, command: str, source: Source, stream: TextIO | None = None) -> None:
        self.command = command
        self.source = source
        self.stream = sys.stderr if stream is None else stream
        self.started = time.monotonic()
        self.lock = threading.RLock()  # one writer at a time: the thread, a print
        self.text = ""  # what the line says now ("": nothing yet)
        self._drawn = False  # whether it is on the terminal now
        self._restarts = 0  # the most seen: a new attempt's folder is empty until its ranks beat
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="distcomp-live-line", daemon=True)

    def start(self) -> "LiveLine":
        _active.append(self)
        self._thread.start()
        return self

    def stop(self) -> None:
        """The thread ended and the line erased: what is printed next starts a clean line."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5 * TICK)
        with self.lock:
            self.erase()
            if self in _active:
                _active.remove(self)

    def erase(self) -> None:
        if self._drawn:
            self._write(CLEAR)
            self._drawn = False

    def draw(self) -> None:
        if self.text and not self._drawn and not self._stopped.is_set():
            self._write(CLEAR + self.text[:_width(self.stream)])
            self._drawn = True

    def _loop(self) -> None:
        while not self._stopped.is_set():
            text = self._read()
            if text is not None:
                with self.lock:  # drawn over the old text: CLEAR starts it
                    self.text, self._drawn = text, False
                    self.draw()
            self._stopped.wait(TICK)

    def _read(self) -> str | None:
        from ..agent.progress import read

        folder, restarts = self.source()
        if folder is None:  # the job's ranks are not started yet (or beat nowhere this machine reads)
            return None
        shown = frame(read(folder), time.monotonic() - self.started, max(self._restarts, restarts), time.time())
        self._restarts = shown.restarts
        return shown.text(self.command)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the job goes on without its line
            self._stopped.set()


_active: list[LiveLine] = []  # the line on now (at most one)


@contextmanager
def cleared() -> Iterator[None]:
    """Around a print to the console: the live line (if one is on) erased before, drawn after."""
    line = _active[-1] if _active else None
    if line is None:
        yield
        return
    with line.lock:
        line.erase()
        try:
            yield
        finally:
            line.draw()


def _width(stream: TextIO) -> int:
    """One less than the terminal's columns: a line as wide as the terminal would wrap, and a
    wrapped line is not rewritten in place."""
    try:
        return max(10, os.get_terminal_size(stream.fileno()).columns - 1)
    except (AttributeError, ValueError, OSError):
        return 79


def live_command(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``distcomp run``'s command with its line on while it runs (``--quiet``: off)."""
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        with live_run(bool(getattr(args, "quiet", False))):
            return command(args)
    return run


@contextmanager
def live_run(quiet: bool) -> Iterator[None]:
    """``distcomp run``'s line: it follows each attempt the local runner starts in this process."""
    if not wanted(quiet):
        yield
        return
    from ..agent.progress import watch

    now: list[tuple[str | None, int]] = [(None, 0)]
    unwatch = watch(lambda folder, attempt: now.__setitem__(0, (folder, attempt)))
    line = LiveLine("run", lambda: now[0]).start()
    try:
        yield
    finally:
        unwatch()
        line.stop()


@contextmanager
def live_wait(handle: "JobHandle", quiet: bool = False) -> Iterator[None]:
    """A waiting submit's line, for a target whose ranks beat where this machine reads
    (``progress_folder``: local, Slurm, Ray); none for another."""
    find = getattr(handle.instance, "progress_folder", None)
    if find is None or not wanted(quiet):
        yield
        return
    from ..errors import DistcompError

    found: list[str | None] = []

    def source() -> tuple[str | None, int]:
        if not found:  # asked once, in the line's thread (a Slurm job's folder may ask Slurm)
            try:
                folder = find(handle.id)
            except (DistcompError, OSError):
                folder = None
            found.append(str(folder) if folder is not None else None)
        return found[0], 0

    line = LiveLine("submit", source).start()
    try:
        yield
    finally:
        line.stop()


__all__ = ["ALIVE_S", "CLEAR", "Frame", "LiveLine", "cleared", "frame", "live_command", "live_run", "live_wait", "wanted"]
