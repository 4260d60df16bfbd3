"""Progress heartbeats: every rank's last step and when it came, kept as one small file per rank
in the job's progress folder (``PROGRESS_ENV``), never in MLflow. ``runtime.progress(step)``
and every ``runtime.log_metric(s)`` call beat; a beat is written at most once a second, so a
training loop pays a clock read per call. Standard library only: the node agent reads the
folder where it runs (hang detection), the core and ``distcomp status`` where it is shared.
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable, Mapping

PROGRESS_ENV = "DISTCOMP_PROGRESS_DIR"
FOLDER = "progress"  # its name in a job's folder (a local run folder)
SUFFIX = ".beat"  # a beat's file: only these are read, and cleared (a folder the user made may hold others)
INTERVAL = 1.0  # seconds between two writes of one rank's beat
_RANK_ENVS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "DISTCOMP_RANK")

__all__ = ["FOLDER", "INTERVAL", "PROGRESS_ENV", "SUFFIX", "Beats", "announce", "clear", "describe", "metric_of",
           "read", "rank_name", "watch"]


def rank_name(environ: Mapping[str, str]) -> str:
    """``rankN`` from the launcher's contract (torch, Open MPI, PMI, distcomp's own), else the pid."""
    for name in _RANK_ENVS:
        value = environ.get(name, "")
        if value.isdigit():
            return f"rank{value}"
    return f"pid{os.getpid()}"


class Beats:
    """One process's heartbeat: ``beat(step, metric)`` keeps the step and the metric (a metric
    call's ``(name, value)``), and writes them when a second has passed since the last write (or
    on the first beat): the file holds the latest of each as of that write."""

    def __init__(self, folder: str, name: str, attempt: str = "0") -> None:
        self.path = os.path.join(folder, name + SUFFIX)
        self.attempt = attempt
        self.step: int | None = None
        self.metric: tuple[str, float] | None = None
        self._written = -INTERVAL  # time.monotonic() of the last write
        self._kept: float | None = None  # time.monotonic() of a beat kept since the last write (``flush``)

    def beat(self, step: int | None, metric: tuple[str, float] | None = None) -> None:
        if step is not None:
            self.step = step
        if metric is not None:
            self.metric = metric
        now = time.monotonic()
        if now - self._written < INTERVAL:
            self._kept = now
            return
        self._write(now, time.time())

    def flush(self) -> None:
        """Write the beat kept since the last write, if any, as of when it came (at the rank's
        exit: its last step)."""
        if self._kept is not None:
            self._write(self._kept, time.time() - (time.monotonic() - self._kept))

    def _write(self, now: float, at: float) -> None:
        self._written, self._kept = now, None
        fields: dict[str, object] = {"step": self.step, "at": at, "attempt": self.attempt, "pid": os.getpid()}
        if self.metric is not None:  # a key readers may not find: a beat written before it existed has none
            fields["metric"] = [self.metric[0], self.metric[1]]
        data = json.dumps(fields)
        try:  # whole or not at all; a beat that cannot be written is no reason to fail a rank
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except OSError:
            pass


def read(folder: str) -> dict[str, dict[str, object]]:
    """Every rank's last beat in ``folder``: {name: {"step", "at", "attempt", "pid"}}, and
    ``"metric"`` ([name, value], ``metric_of``) where the rank's last metric call gave one."""
    found: dict[str, dict[str, object]] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("at"), (int, float)):
            found[name[:-len(SUFFIX)]] = data
    return found


def metric_of(beat: Mapping[str, object]) -> tuple[str, float] | None:
    """A beat's metric ``(name, value)``, or None (none logged yet, a beat from before metrics
    were kept, or one that is not well formed)."""
    found = beat.get("metric")
    if isinstance(found, list) and len(found) == 2 and isinstance(found[0], str) \
            and isinstance(found[1], (int, float)) and not isinstance(found[1], bool):
        return found[0], float(found[1])
    return None


# who in this process wants to know where beats go (``distcomp run``'s live line): the local
# runner announces each attempt's folder as the attempt starts
_watchers: list[Callable[[str, int], None]] = []


def watch(listener: Callable[[str, int], None]) -> Callable[[], None]:
    """Call ``listener(folder, attempt)`` as each attempt of a job run in this process starts;
    returns what stops it."""
    _watchers.append(listener)
    return lambda: _watchers.remove(listener) if listener in _watchers else None


def announce(folder: str, attempt: int) -> None:
    """An attempt of a job run in this process starts, its ranks beating into ``folder``."""
    for listener in list(_watchers):
        listener(folder, attempt)


def clear(folder: str) -> None:
    """The beats an earlier attempt (or job) left in ``folder``: its beat files only, nothing else."""
    try:
        entries = list(os.scandir(folder))
    except OSError:  # none yet
        return
    for entry in entries:
        if (entry.name.endswith(SUFFIX) or (SUFFIX + "." in entry.name and entry.name.endswith(".tmp"))) \
                and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def describe(beats: Mapping[str, Mapping[str, object]], now: float | None = None) -> list[str]:
    """One line per rank: ``rank0: step 12, 3 s ago`` (in rank order)."""
    now = time.time() if now is None else now

    def order(name: str) -> tuple[int, str]:
        return (int(name[4:]), name) if name.startswith("rank") and name[4:].isdigit() else (1 << 30, name)

    lines = []
    for name in sorted(beats, key=order):
        beat = beats[name]
        step = beat.get("step")
        at = beat.get("at")
        ago = max(0.0, now - float(at)) if isinstance(at, (int, float)) else 0.0
        lines.append(f"{name}: " + (f"step {step}" if step is not None else "alive") + f", {ago:.0f} s ago")
    return lines
