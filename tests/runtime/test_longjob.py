"""What a rank of a long job asks (issue 36): ``runtime.restart_count()``, ``checkpoint_dir()`` and
``preempted()``, as the supervisors set them (``distcomp.agent.longjob``) and outside distcomp."""

from __future__ import annotations

from pathlib import Path

import pytest

from distcomp import runtime
from distcomp.agent import longjob


def test_the_rank_reads_what_the_supervisor_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = longjob.long_job_env(str(tmp_path / "ck"), str(tmp_path), 2, 3)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert runtime.restart_count() == 2
    assert runtime.checkpoint_dir() == tmp_path / "ck" and (tmp_path / "ck").is_dir()  # made on first ask
    assert not runtime.preempted()
    longjob.give_notice(env[longjob.NOTICE_ENV], "SIGUSR1 from Slurm")
    assert runtime.preempted()
    # the next attempt has a notice file of its own: an old notice never reaches it
    monkeypatch.setenv(longjob.NOTICE_ENV, longjob.notice_file(str(tmp_path), 3))
    assert not runtime.preempted()


def test_outside_distcomp_torch_s_count_else_zero_and_a_local_folder(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (longjob.RESTART_ENV, longjob.CHECKPOINT_ENV, longjob.NOTICE_ENV, "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert runtime.restart_count() == 0 and not runtime.preempted()
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "4")  # torchrun's own agent restarted it
    assert runtime.restart_count() == 4
    monkeypatch.setenv(longjob.RESTART_ENV, "1")  # distcomp's wins: it counts requeues too
    assert runtime.restart_count() == 1
    assert runtime.checkpoint_dir() == tmp_path / "checkpoint" and (tmp_path / "checkpoint").is_dir()
