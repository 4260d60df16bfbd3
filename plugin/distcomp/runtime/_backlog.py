"""What the store did not take yet, kept in order until it does: in memory while small, then in
a file, so a long outage costs disk rather than the training process's memory.

Items are metric batches (lists of ``Metric``), param batches (dicts) and artifacts (their
staged copy is on disk already). Once anything is in the file, every later item goes there
too: the first in is the first out, so an artifact still follows the metrics logged before it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import deque
from typing import Sequence, Union

from ..mlstore import Counts
from ..mlstore._pending import PREFIX as PENDING
from ._records import Artifact, Metric

MEMORY_POINTS = 50_000  # metric points and params held in memory before the file is used
MAX_POINTS = 20_000_000  # kept at most (~1 GB of file); past it new items are dropped, and counted


Item = Union[list[Metric], dict[str, str], Artifact]


def counts(item: Item) -> Counts:
    if isinstance(item, Artifact):
        return Counts(artifacts=item.files)
    if isinstance(item, dict):
        return Counts(params=len(item))
    return Counts(metrics=len(item))


def _encode(item: Item) -> str:
    if isinstance(item, Artifact):
        return json.dumps({"a": [item.staged, item.artifact_path, item.is_dir, item.staging_dir, item.files]})
    if isinstance(item, dict):
        return json.dumps({"p": item})
    return json.dumps({"m": [[m.key, m.value, m.timestamp, m.step] for m in item]})  # NaN/inf: Python's JSON


def _decode(line: str) -> Item:
    data = json.loads(line)
    if "a" in data:
        return Artifact(*data["a"])
    if "p" in data:
        return dict(data["p"])
    return [Metric(k, float(v), int(t), int(s)) for k, v, t, s in data["m"]]


class Backlog:
    """A first-in first-out queue of items, in memory then in a file under ``folder`` (a
    temporary folder when None). Used by one thread."""

    def __init__(self, folder: str | None, memory_points: int = MEMORY_POINTS, max_points: int = MAX_POINTS) -> None:
        self.folder, self.memory_points, self.max_points = folder, memory_points, max_points
        self.kept = Counts()  # everything held, memory and file
        self.dropped = Counts()  # refused for lack of room
        self._staged: set[str] = set()  # staging folders of the artifacts held
        self._memory: deque[Item] = deque()
        self._in_memory = 0
        self._path: str | None = None
        self._own_dir: str | None = None  # a temporary folder this backlog made
        self._read_at = 0  # bytes of the file already taken
        self._in_file = 0  # items in the file not yet taken
        self._head: tuple[Item, int] | None = None  # the next file item, read ahead, and its end offset

    def __len__(self) -> int:
        return len(self._memory) + self._in_file

    def add(self, item: Item) -> bool:
        """Keep ``item``; False (and counted as dropped) when the backlog is full."""
        size = counts(item)
        if self.kept.metrics + self.kept.params + size.metrics + size.params > self.max_points:
            self.dropped += size
            return False
        points = size.metrics + size.params
        if self._in_file or self._in_memory + points > self.memory_points:
            try:
                self._append(item)
            except OSError:  # a full disk: nowhere to keep it
                self.dropped += size
                return False
        else:
            self._memory.append(item)
            self._in_memory += points
        if isinstance(item, Artifact):
            self._staged.add(item.staging_dir)
        self.kept += size
        return True

    def peek(self) -> Item | None:
        if self._memory:
            return self._memory[0]
        if not self._in_file:
            return None
        if self._head is None:
            assert self._path is not None
            with open(self._path, "rb") as f:
                f.seek(self._read_at)
                line = f.readline()
            self._head = (_decode(line.decode("utf-8")), self._read_at + len(line))
        return self._head[0]

    def pop(self) -> None:
        """Forget the item ``peek()`` answered: it was delivered (or refused for good)."""
        if self._memory:
            item = self._memory.popleft()
            self._in_memory -= counts(item).metrics + counts(item).params
        else:
            assert self._head is not None
            item, self._read_at = self._head
            self._head = None
            self._in_file -= 1
            if not self._in_file:
                self._remove_file()
        if isinstance(item, Artifact):
            self._staged.discard(item.staging_dir)
        self.kept -= counts(item)

    def discard(self) -> None:
        """Drop everything (the process is ending): the file and the staged artifacts too."""
        for folder in self._staged:
            shutil.rmtree(folder, ignore_errors=True)
        self._staged.clear()
        self._memory.clear()
        self._in_memory = 0
        self._remove_file()
        self.kept = Counts()

    def spill(self, more: Sequence[Item] = ()) -> tuple[str, Counts]:
        """The process ends with the store away: move everything held, then ``more``, into a
        pending file in ``folder`` (``distcomp.mlstore._pending``), the artifacts' copies beside
        it, for distcomp to deliver once the store answers. Returns the file and what it holds;
        the backlog is empty after. OSError: nothing was kept (the caller counts it lost)."""
        assert self.folder, "a pending file belongs in the run folder"
        os.makedirs(self.folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{PENDING}{os.getpid()}-", suffix=".tmp", dir=self.folder)  # 0600
        final = os.path.join(self.folder, os.path.basename(tmp)[1:-len(".tmp")] + ".jsonl")
        copies = final[:-len(".jsonl")] + ".files"
        moved = 0

        def keep(item: Item) -> str:
            nonlocal moved
            if isinstance(item, Artifact):  # its staged copy goes with it: /tmp is no place to wait
                moved += 1
                dest = os.path.join(copies, str(moved))
                os.makedirs(copies, exist_ok=True)
                shutil.move(item.staging_dir, dest)
                item = Artifact(os.path.join(dest, os.path.relpath(item.staged, item.staging_dir)),
                                item.artifact_path, item.is_dir, dest, item.files)
            return _encode(item) + "\n"

        held = self.kept + sum((counts(i) for i in more), Counts())
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                for item in self._memory:
                    out.write(keep(item))
                if self._in_file and self._path is not None:
                    with open(self._path, "rb") as f:
                        f.seek(self._read_at)
                        for raw in f:
                            line = raw.decode("utf-8")
                            out.write(keep(_decode(line)) if line.startswith('{"a"') else line)
                for item in more:
                    out.write(keep(item))
            os.rename(tmp, final)
        except BaseException:
            os.unlink(tmp)
            raise
        self._staged.clear()  # moved with the file: not ours to remove any more
        self._memory.clear()
        self._in_memory = 0
        self._remove_file()
        self.kept = Counts()
        return final, held

    def _append(self, item: Item) -> None:
        if self._path is None:
            folder = self.folder
            if folder:
                os.makedirs(folder, exist_ok=True)
            else:
                folder = self._own_dir = tempfile.mkdtemp(prefix="distcomp-backlog-")
            fd, self._path = tempfile.mkstemp(prefix=f"backlog-{os.getpid()}-", suffix=".jsonl", dir=folder)
            os.close(fd)  # mkstemp: mode 0600, the values may be private
            self._read_at = 0
        line = memoryview((_encode(item) + "\n").encode("utf-8"))
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            try:
                while line:
                    line = line[os.write(fd, line):]
            except OSError:
                os.ftruncate(fd, end)  # never leave half a line for the reader
                raise
        finally:
            os.close(fd)
        self._in_file += 1

    def _remove_file(self) -> None:
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        self._path = self._own_dir = self._head = None
        self._in_file = self._read_at = 0
