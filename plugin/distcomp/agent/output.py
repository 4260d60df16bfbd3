"""Where the node agent puts one replica's output (a ``supervise.Sink``): its log file, as it
comes; a replica hosting several ranks (``mpirun --output tag``) has each tagged line written to
its rank's log instead, the tag removed; ``[name] line`` on the console when asked; the last
lines of the replica and of each rank it hosts, for its report."""

from __future__ import annotations

import re
import sys
from collections import deque
from typing import IO, Callable

TAIL = 15  # lines of a replica's output kept for its report


class Output:
    def __init__(self, name: str, log: IO[bytes], rank_prefix: str | None = None,
                 opener: Callable[[str], IO[bytes]] | None = None, console: bool = False) -> None:
        self.name, self.log, self.console = name, log, console
        # its group ``rank`` is the rank a line comes from (``Replica.rank_prefix``)
        self.tag = re.compile(rank_prefix.encode("ascii")) if rank_prefix else None
        self.opener = opener
        self.rank_logs: dict[int, IO[bytes]] = {}
        self.rank_tails: dict[int, deque[str]] = {}  # each tagged rank's last lines
        self.tail: deque[str] = deque(maxlen=TAIL)
        self.partial = b""

    def feed(self, data: bytes) -> None:
        if self.tag is None:
            self.log.write(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if not data and self.partial:  # the end: an unfinished last line counts
            lines.append(self.partial)
            self.partial = b""
        for line in lines:
            name = self.name
            if self.tag is not None:
                line, name = self._route(line)
            decoded = line.decode("utf-8", "replace")
            self.tail.append(decoded)
            if name != self.name and name.startswith("rank"):
                self.rank_tails.setdefault(int(name[4:]), deque(maxlen=TAIL)).append(decoded)
            if self.console:
                sys.stdout.write(f"[{name}] {decoded}\n")
        if self.console and lines:
            sys.stdout.flush()

    def _route(self, line: bytes) -> tuple[bytes, str]:
        """A whole line, written to its rank's log (its tag removed) or the replica's own."""
        assert self.tag is not None
        m = self.tag.match(line)
        if m is None or self.opener is None:
            self.log.write(line + b"\n")
            return line, self.name
        rank = int(m.group("rank"))
        if rank not in self.rank_logs:
            self.rank_logs[rank] = self.opener(f"rank{rank}")
        text = line[m.end():]
        self.rank_logs[rank].write(text + b"\n")
        return text, f"rank{rank}"

    def close(self) -> None:
        for log in (self.log, *self.rank_logs.values()):
            log.close()
