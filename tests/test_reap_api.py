"""``distcomp.reap`` called directly: a ReapReport for run folders as a killed ``distcomp run``
leaves them (status.json running, its supervisor gone), a live one, another host's and a garbled
one. tests/targets/test_supervision.py kills real jobs and runs the command."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

import distcomp
from distcomp.errors import UsageError
from distcomp.targets.local import Reaped
from tests.targets._supervised import my_start_time, running_record

HOST = socket.gethostname()


def _state(run_dir: Path) -> str:
    return str(json.loads((run_dir / "status.json").read_text())["state"])


def test_reap_reports_each_folder_and_counts_them(tmp_path: Path) -> None:
    me = os.getpid()  # a process that runs: a live supervisor, or a pid reused by another program
    alive = running_record(tmp_path, "alive", pid=me, host=HOST, start_time=my_start_time())
    dead = running_record(tmp_path, "dead", pid=me, host=HOST, start_time=1)
    remote = running_record(tmp_path, "remote", pid=me, host="elsewhere.example", start_time=1)
    heard: list[Reaped] = []
    report = distcomp.reap(alive, str(dead), remote, grace=0.5, progress=heard.append)
    assert isinstance(report, distcomp.ReapReport) and report.scanned is None
    assert [(r.run_dir, r.outcome) for r in report.runs] == [(alive, "running"), (dead, "closed"),
                                                              (remote, "elsewhere")]
    assert heard == list(report.runs)  # each as it was known, the same records
    assert report.runs[1].message.startswith(f"the supervisor (pid {me} on host {HOST}) died; distcomp reap stopped")
    assert dict(report.counts) == {"closed": 1, "running": 1, "elsewhere": 1, "ended": 0}
    assert (report.problems, report.exit_code) == ((), 0)
    assert [_state(d) for d in (alive, dead, remote)] == ["running", "failed", "running"]

    forced = distcomp.reap(remote, force=True)
    assert [r.outcome for r in forced.runs] == ["closed"] and _state(remote) == "failed"


def test_reap_without_folders_takes_those_under_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    empty = distcomp.reap()
    assert (empty.runs, empty.scanned) == ((), tmp_path / "runs")
    dead = running_record(tmp_path / "runs", "dead", pid=os.getpid(), host=HOST, start_time=1)
    (tmp_path / "runs" / "not-a-run").mkdir()
    report = distcomp.reap(grace=0)
    assert [(r.run_dir, r.outcome) for r in report.runs] == [(dead, "closed")]
    again = distcomp.reap()
    assert dict(again.counts) == {"closed": 0, "running": 0, "elsewhere": 0, "ended": 1}


def test_a_folder_that_is_no_run_folder_is_refused_before_any_is_reaped(tmp_path: Path) -> None:
    dead = running_record(tmp_path, "dead", pid=os.getpid(), host=HOST, start_time=1)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError) as caught:
        distcomp.reap(dead, tmp_path / "empty", tmp_path / "nope")
    assert str(caught.value).splitlines() == [
        f"{tmp_path / 'empty'}: not a run folder (no status.json in it); give folders that `distcomp run` made, or "
        "none for those under ./runs",
        f"{tmp_path / 'nope'}: not a run folder (no status.json in it); give folders that `distcomp run` made, or "
        "none for those under ./runs"]
    assert _state(dead) == "running"
    with pytest.raises(UsageError, match="grace must be a number of seconds >= 0"):
        distcomp.reap(dead, grace=-1)
