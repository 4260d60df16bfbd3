"""How often a waiting submit asks Slurm about its job (``scontrol show job``): every ``POLL``
seconds, and every ``FAST`` seconds for ``FAST_FOR`` seconds after the job folder showed that
the end is near. A node agent writes ``exits/NAME.json`` as each replica ends, and the batch
script writes ``attempts.json`` as an attempt ends or begins: the job's end (or its next attempt)
follows within a fraction of a second, once the step, the record of the attempt and the sweep of
the nodes are done. The folder is looked at between the calls (two ``stat``s); on a shared file
system that caches attributes a change may be seen late, and then the job is asked every
``POLL`` seconds as before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

POLL = 0.5  # seconds between scontrol calls while nothing changes
FAST = 0.05  # ... while the job folder has just changed
FAST_FOR = 3.0  # seconds of fast calls after the folder's last change
TICK = 0.05  # seconds between looks at the job folder
WATCHED = ("exits", "attempts.json")  # in the job folder (``_attempts.EXITS``, ``_attempts.FILE``)


class Pace:
    """The pauses between a waiting submit's calls to Slurm for the job in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.paths = tuple(str(folder / name) for name in WATCHED)
        self.seen = self._look()
        self.fast_until = 0.0  # time.monotonic()

    def _look(self) -> tuple[tuple[int, int, int] | None, ...]:
        out: list[tuple[int, int, int] | None] = []
        for path in self.paths:
            try:
                st = os.stat(path)
            except OSError:
                out.append(None)
                continue
            out.append((st.st_mtime_ns, st.st_ino, st.st_size))
        return tuple(out)

    def changed(self) -> bool:
        """Whether the folder changed since last looked at (then Slurm is asked often a while)."""
        look = self._look()
        if look == self.seen:
            return False
        self.seen = look
        self.fast_until = time.monotonic() + FAST_FOR
        return True

    def pause(self, longest: float | None = None) -> None:
        """Sleep until Slurm is to be asked again: ``POLL`` seconds, ``FAST`` while the end is
        near, at once when the folder changes; at most ``longest`` seconds."""
        now = time.monotonic()
        end = now + (FAST if now < self.fast_until else POLL)
        if longest is not None:
            end = min(end, now + max(0.0, longest))
        while now < end:
            time.sleep(min(TICK, end - now))
            if self.changed():
                return
            now = time.monotonic()
