"""Long local jobs (issue 36): a rank that fails restarts the whole job, which resumes from
its checkpoint; SIGTERM to `distcomp run` is a preemption (the ranks get notice through
runtime.preempted(), save and leave); `distcomp run --resume` goes on in the same run folder
and MLflow run. Every job is real: two torch (gloo) ranks of jobs/longjob/train.py, which
checkpoint every step to runtime.checkpoint_dir() and log their loss per step; the MLflow
run is read back from its real store. The tests of where max_restarts comes from and of what
--resume refuses run jobs/beats, the same steps without torch (only the suite's CPU differs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.targets._jobs import clean_env

JOB = Path(__file__).parent / "jobs" / "longjob"
BEATS = Path(__file__).parent / "jobs" / "beats"
pytestmark = pytest.mark.slow


def distcomp(tmp_path: Path, *args: str | Path) -> list[str]:
    return [sys.executable, "-m", "distcomp", *map(str, args)]


def env_for(tmp_path: Path) -> dict[str, str]:
    return clean_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")


def run(tmp_path: Path, *args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(distcomp(tmp_path, *args), cwd=tmp_path, env=env_for(tmp_path), text=True,
                          capture_output=True, timeout=timeout)


def mlflow_run(tmp_path: Path, run_dir: Path) -> tuple[Any, list[int]]:
    """The job's run (as status.json names it) and the steps of its loss history."""
    from mlflow.tracking import MlflowClient

    run_id = json.loads((run_dir / "status.json").read_text())["mlflow"]["run_id"]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return client.get_run(run_id), sorted(m.step for m in client.get_metric_history(run_id, "loss"))


def test_a_rank_that_fails_once_restarts_the_job_which_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "job"
    done = run(tmp_path, "run", JOB / "component.yaml", "--run-dir", run_dir, "--max-restarts", "1",
               "-i", "steps=8", "-i", "fail_at=3")
    assert done.returncode == 0, done.stderr
    assert "attempt 1 failed: rank1 (worker, node 0" in done.stderr and "exited with code 3" in done.stderr
    assert "restarting every rank (restart 1 of 1)" in done.stderr
    assert "rank 1: failing at step 3" in done.stdout
    # the second attempt is restart 1 and starts where the checkpoint left off, not at 0
    assert "rank 0: attempt 1 starts at step 3" in done.stdout
    assert (run_dir / "checkpoint" / "state.pt").is_file()
    status = json.loads((run_dir / "status.json").read_text())
    assert (status["state"], status["attempts"], status["failures_used"]) == ("succeeded", 2, 1)
    assert status["restarts"][0].startswith("attempt 1 failed: rank1 (worker, node 0")
    got, steps = mlflow_run(tmp_path, run_dir)
    assert got.info.status == "FINISHED"
    assert steps == list(range(8)), "one run holds every step, each once"
    assert got.data.tags["distcomp.restarts"] == "1"
    assert got.data.tags["distcomp.restart.1"].startswith("attempt 1 failed: rank1 (worker, node 0")


def test_the_spec_s_max_restarts_is_the_default_and_the_flag_beats_it(tmp_path: Path) -> None:
    ok = run(tmp_path, "run", BEATS / "retried.yaml", "--run-dir", tmp_path / "a", "-i", "steps=5", "-i", "fail_at=2")
    assert ok.returncode == 0, ok.stderr
    assert "restarting every rank (restart 1 of 1)" in ok.stderr
    failed = run(tmp_path, "run", BEATS / "retried.yaml", "--run-dir", tmp_path / "b", "--max-restarts", "0",
                 "-i", "steps=5", "-i", "fail_at=2")
    assert failed.returncode == 1, failed.stderr
    assert "job failed: rank1 (worker, node 0" in failed.stderr and "exited with code 3" in failed.stderr
    assert "restarting" not in failed.stderr
    got, steps = mlflow_run(tmp_path, tmp_path / "b")
    assert got.info.status == "FAILED" and got.data.tags["distcomp.restarts"] == "0"
    assert steps == [0, 1]


def test_sigterm_preempts_the_job_and_resume_goes_on_in_the_same_run(tmp_path: Path) -> None:
    run_dir, progress = tmp_path / "job", tmp_path / "progress"
    proc = subprocess.Popen(distcomp(tmp_path, "run", JOB / "component.yaml", "--run-dir", run_dir, "--grace", "30",
                                     "-i", "steps=40", "-i", "step_s=0.25", "-i", f"progress={progress}"),
                            cwd=tmp_path, env=env_for(tmp_path), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (progress.exists() and progress.read_text().strip() and int(progress.read_text()) >= 3):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    # the ranks left by themselves on notice, within a step or two: not after the 30 s grace
    assert time.monotonic() - sent < 20, err
    assert "rank 0: notice given; leaving after step" in out and "rank 1: notice given" in out
    assert "Traceback" not in err
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "preempted" and status["exit_code"] == 143
    assert f"distcomp run --resume {run_dir}" in status["message"]
    assert f"distcomp run: {status['message']}\n" in err
    assert err.rstrip().endswith(f"MLflow run {status['mlflow']['run_id']}: KILLED")
    stopped_at = int(progress.read_text())
    first, steps = mlflow_run(tmp_path, run_dir)
    assert first.info.status == "KILLED" and steps == list(range(stopped_at + 1))

    resumed = run(tmp_path, "run", "--resume", run_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert f"rank 0: attempt 1 starts at step {stopped_at + 1}" in resumed.stdout
    assert "resuming: attempt 2 (restart_count() 1)" in resumed.stderr
    assert f"MLflow run {first.info.run_id} (resumed)" in resumed.stderr
    got, steps = mlflow_run(tmp_path, run_dir)
    assert got.info.run_id == first.info.run_id and got.info.status == "FINISHED"
    assert steps == list(range(40)), "one run holds every step of both attempts, each once"
    assert got.data.tags["distcomp.restarts"] == "1"
    assert got.data.tags["distcomp.restart.1"] == "attempt 1: preempted by signal 15 (SIGTERM); resumed with --resume"
    status = json.loads((run_dir / "status.json").read_text())
    assert (status["state"], status["attempts"]) == ("succeeded", 2)
    shown = run(tmp_path, "status", run_dir)
    assert shown.returncode == 0, shown.stderr
    assert "  restart 1: attempt 1: preempted by signal 15 (SIGTERM); resumed with --resume\n" in shown.stdout


def test_resume_refuses_what_it_cannot_go_on_with(tmp_path: Path) -> None:
    ok = run(tmp_path, "run", BEATS / "component.yaml", "--run-dir", tmp_path / "done", "-i", "steps=2")
    assert ok.returncode == 0, ok.stderr
    again = run(tmp_path, "run", "--resume", tmp_path / "done")
    assert again.returncode == 2 and "the job succeeded; there is nothing to resume" in again.stderr
    nothing = run(tmp_path, "run", "--resume", tmp_path / "nowhere")
    assert nothing.returncode == 2 and "no run folder of a distcomp run there" in nothing.stderr
    flags = run(tmp_path, "run", "--resume", tmp_path / "done", "--nodes", "2")
    assert flags.returncode == 2 and "--nodes cannot be given again" in flags.stderr
    for r in (again, nothing, flags):
        assert "Traceback" not in r.stderr
    assert sorted(os.listdir(tmp_path / "done" / "checkpoint")) == ["arrived", "step"]
