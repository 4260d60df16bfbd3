"""The one atomic writer: a reader sees the old content or the new, whole, and two writers of
one file (a supervisor and its watchdog both writing status.json) never collide."""

import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.base.files import tree_usage, write_atomic

WRITER = """
import sys
from pathlib import Path
from distcomp.base.files import write_atomic
path, mark = Path(sys.argv[1]), sys.argv[2]
for i in range(300):
    write_atomic(path, (mark * 5000) + "\\n", durable=i % 50 == 0)
"""


def test_two_processes_writing_one_file_never_collide(tmp_path: Path) -> None:
    target = tmp_path / "status.json"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), mark], stderr=subprocess.PIPE, text=True)
               for mark in "ab"]
    seen = set()
    while any(w.poll() is None for w in writers):
        if target.exists():
            text = target.read_text()
            assert text in ("a" * 5000 + "\n", "b" * 5000 + "\n"), "a reader saw half a file"
            seen.add(text[0])
    errors = [w.stderr.read() for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors  # a shared temporary name made one fail
    assert target.read_text() in ("a" * 5000 + "\n", "b" * 5000 + "\n")
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_atomic(target, "old\n")
    try:
        write_atomic(target, "\ud800")  # a lone surrogate cannot be encoded: the write fails midway
    except UnicodeEncodeError:
        pass
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_tree_usage_counts_files_and_bytes_without_following_links(tmp_path: Path) -> None:
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "a").write_bytes(b"12345")
    (tmp_path / "d" / "e" / "b").write_bytes(b"123")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "d" / "a")
    files, size = tree_usage(tmp_path / "d")
    assert files == 3 and size == 5 + 3 + len(str(tmp_path / "d" / "a"))
    assert tree_usage(tmp_path / "d" / "a") == (1, 5)
    assert tree_usage(tmp_path / "missing") == (0, 0)


def test_a_path_is_shown_as_the_user_can_use_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distcomp.base.files import USER_CWD, shown_path

    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.delenv(USER_CWD, raising=False)
    assert shown_path(tmp_path / "project" / "runs" / "r1") == "runs/r1"
    assert shown_path(tmp_path / "other") == str(tmp_path / "other")  # not under it: absolute
    assert shown_path(tmp_path / "project") == "."
    monkeypatch.setenv(USER_CWD, str(tmp_path))  # a tool started distcomp in the project for the user
    assert shown_path("runs/r1") == "project/runs/r1"
