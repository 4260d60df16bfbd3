"""`distcomp run`'s live line (issue 37), under a real pseudo-terminal: a small job logs its
loss per step through distcomp.runtime (jobs/beats: longjob's steps without torch, whose import
only cost the suite CPU here), and stderr, a terminal, shows one line rewritten in place
(``\\r`` + erase) with the latest step and rank 0's loss; the ranks' own lines are never mixed
with it. stderr not a terminal, $CI set, or --quiet: no line at all."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from distcomp.agent import progress
from tests._pty import CLEAR, under_pty as _under_pty
from tests.targets._jobs import clean_env

JOB = Path(__file__).parent / "jobs" / "beats" / "component.yaml"
FRAME = re.compile(r"distcomp run: (\d+:\d\d) \| (\d+)/(\d+) ranks alive \| step (\d+) \| loss (\S+) \| (\d+) restarts?")


def _argv(run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "distcomp", "run", str(JOB), "--no-tracking", "--run-dir", str(run_dir),
            "-i", "steps=7", "-i", "step_s=0.7"]


@pytest.mark.slow
def test_a_terminal_sees_one_line_with_the_latest_step_and_loss(tmp_path: Path) -> None:
    run_dir = tmp_path / "job"
    code, screen, _ = _under_pty(_argv(run_dir), clean_env(), tmp_path)
    assert code == 0, screen
    frames = [m for m in (FRAME.match(piece) for piece in screen.split(CLEAR)) if m]
    assert len(frames) >= 3, screen  # rewritten about once a second while the ranks step
    steps = [int(m.group(4)) for m in frames]
    assert steps == sorted(steps) and steps[-1] >= 4, steps  # it follows the job
    assert all(m.group(2) == m.group(3) == "2" and m.group(6) == "0" for m in frames), frames[-1].group(0)
    # rank 0's latest loss as its last beat kept it, as the line shows it (name and value)
    last = progress.read(str(run_dir / progress.FOLDER))["rank0"]
    name, value = progress.metric_of(last) or ("", 0.0)
    assert name == "loss" and f"loss {value:.4g} " in {f"loss {m.group(5)} " for m in frames}, (value, frames)
    for line in screen.replace("\r\n", "\n").split("\n"):
        shown = line.split(CLEAR)[-1]  # what the terminal shows of the line, once it is rewritten
        if "[rank" in line:  # a rank's own line: printed on a line of its own, the live line erased first
            assert re.fullmatch(r"\[rank\d\]: .*", shown), repr(line)
            assert "ranks alive" not in shown, repr(line)
    # ... and erased at the end: the terminal's last line is left empty, after distcomp's own last word
    shown = [line.split(CLEAR)[-1] for line in screen.split("\r\n")]
    assert shown[-1] == "" and shown[-2].startswith("distcomp run: succeeded"), screen[-300:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "succeeded"


@pytest.mark.slow
def test_no_line_where_stderr_is_no_terminal_in_ci_or_with_quiet(tmp_path: Path) -> None:
    code, screen, piped = _under_pty(_argv(tmp_path / "piped"), clean_env(), tmp_path, stderr_tty=False)
    assert code == 0, piped
    assert "ranks alive" not in screen + piped and CLEAR not in screen + piped, piped
    assert "[rank0]: rank 0: done" in screen and "succeeded" in piped  # both streams were there
    code, screen, _ = _under_pty(_argv(tmp_path / "ci"), clean_env(), tmp_path, ci=True)
    assert code == 0, screen
    assert "ranks alive" not in screen and CLEAR not in screen, screen
    assert "succeeded" in screen
    code, screen, _ = _under_pty([*_argv(tmp_path / "quiet"), "--quiet"], clean_env(), tmp_path)
    assert code == 0, screen
    assert "ranks alive" not in screen and CLEAR not in screen and "succeeded" in screen, screen
    submit = [sys.executable, "-m", "distcomp", "submit", "--target", "local", str(JOB), "--run-dir",
              str(tmp_path / "bg"), "--no-tracking", "--quiet", "-i", "steps=7", "-i", "step_s=0.7"]
    code, screen, _ = _under_pty(submit, clean_env(), tmp_path)
    assert code == 0, screen
    assert "ranks alive" not in screen and CLEAR not in screen and "succeeded" in screen, screen


@pytest.mark.slow
def test_a_waiting_local_submit_shows_the_line_and_the_restart(tmp_path: Path) -> None:
    """`submit --target local` runs the job in the background: the waiting submit reads its run
    folder's beats; rank 1 fails once, and the second attempt's line says the restart."""
    run_dir = tmp_path / "bg"
    code, screen, _ = _under_pty([sys.executable, "-m", "distcomp", "submit", "--target", "local", str(JOB),
                                  "--run-dir", str(run_dir), "--no-tracking", "--max-restarts", "1",
                                  "-i", "steps=9", "-i", "step_s=0.7", "-i", "fail_at=3"], clean_env(), tmp_path)
    assert code == 0, screen
    frames = [m for m in (re.match(r"distcomp submit: \d+:\d\d \| (\d+)/(\d+) ranks alive \| step (\d+) \| "
                                   r"loss (\S+) \| (\d+) restarts?", piece) for piece in screen.split(CLEAR)) if m]
    assert any(m.group(5) == "1" and int(m.group(3)) >= 4 for m in frames), [m.group(0) for m in frames]
    assert [m.group(5) for m in frames] == sorted(m.group(5) for m in frames)  # never back to 0 once restarted
    shown = [line.split(CLEAR)[-1] for line in screen.split("\r\n")]
    assert shown[-1] == "" and any(line.startswith("distcomp submit: local:") and "succeeded" in line
                                   for line in shown), screen[-400:]
