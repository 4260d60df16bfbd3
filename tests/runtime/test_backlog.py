"""The rank's backlog of what the store has not taken yet: in memory, then in a private file
(real files, in the test's folder), first in first out, bounded, cleaned up."""

from __future__ import annotations

import os
from pathlib import Path

from distcomp.runtime._backlog import Backlog
from distcomp.runtime._records import Artifact, Metric
from distcomp.mlstore import Counts


def points(first: int, n: int) -> list[Metric]:
    return [Metric("m", float(i), i, i) for i in range(first, first + n)]


def test_backlog_spills_to_disk_in_order_and_cleans_up(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "f.txt").write_text("f")
    backlog = Backlog(str(tmp_path / "kept"), memory_points=250, max_points=1000)
    items: list = [points(0, 200), {"p": "1"}, points(200, 100), Artifact(str(staged / "f.txt"), None, False,
                                                                          str(staged)), points(300, 300)]
    assert all(backlog.add(item) for item in items)
    assert backlog.kept == Counts(metrics=600, params=1, artifacts=1) and len(backlog) == 5
    (spilled,) = (tmp_path / "kept").iterdir()  # past 250 points in memory: the rest is in a file
    assert spilled.stat().st_mode & 0o777 == 0o600 and len(spilled.read_text().splitlines()) == 3
    assert not backlog.add(points(600, 500))  # past max_points: dropped, and counted
    assert backlog.dropped == Counts(metrics=500)
    got = []
    while (item := backlog.peek()) is not None:
        got.append(item)
        backlog.pop()
    assert got == items  # first in, first out, across memory and file; NaN-free values round-trip
    assert backlog.kept == Counts() and not list((tmp_path / "kept").iterdir())  # the file is gone once empty
    backlog.add(points(0, 300))
    backlog.add(Artifact(str(staged / "f.txt"), None, False, str(staged)))
    backlog.discard()  # the process ends: file and staged copies go
    assert not staged.exists() and not list((tmp_path / "kept").iterdir()) and len(backlog) == 0


def test_backlog_without_a_folder_uses_a_temporary_one_and_removes_it(tmp_path: Path) -> None:
    backlog = Backlog(None, memory_points=10)
    backlog.add(points(0, 20))  # straight to a file
    folder = Path(backlog._path or "").parent  # noqa: SLF001 - where it went
    assert folder.is_dir() and folder != tmp_path
    assert backlog.peek() == points(0, 20)
    backlog.pop()
    assert not folder.exists() and os.path.basename(str(folder)).startswith("distcomp-backlog-")
