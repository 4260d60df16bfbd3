"""Long jobs on the real two-node Slurm cluster (issue 36): a failed attempt starts again in the
allocation, `scontrol requeue` and the time limit's notice (--signal) requeue the job, which
resumes from its checkpoint, and one MLflow run holds every step; cancel ends it for good. Every
job is jobs/longjob/train.py: two torch (gloo) ranks, one per node, that checkpoint every step to
runtime.checkpoint_dir(), log their loss per step, and note what they saw in CHECKPOINT/seen/."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import distcomp
from distcomp.records import JobState

from .conftest import JOBS, record_of

LONG = JOBS / "longjob" / "component.yaml"
DISTCOMP = str(Path(sys.executable).parent / "distcomp")
pytestmark = pytest.mark.slow


def _history(job_dir: Path, run_id: str) -> tuple[Any, list[int]]:
    """The job's MLflow run and the steps of its loss history."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{job_dir}/mlflow.db")
    return client.get_run(run_id), sorted(m.step for m in client.get_metric_history(run_id, "loss"))


def _seen(folder: Path) -> list[dict[str, Any]]:
    """What each rank of each attempt noted (train.py), by attempt then rank."""
    notes = [json.loads(p.read_text()) for p in (folder / "checkpoint" / "seen").glob("*.json")]
    return sorted(notes, key=lambda n: (n["attempt"], n["rank"]))


def _submit(job_dir: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`distcomp submit` as a user runs it, waiting; the Slurm job id it printed."""
    proc = subprocess.Popen([DISTCOMP, "submit", "--target", "slurm", str(LONG), "--nodes", "2",
                             "--job-dir", str(job_dir), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("slurm:"), (line, proc.stderr.read() if proc.stderr else "")
    return proc, line.removeprefix("slurm:")


def _folder(job_id: str) -> Path:
    return Path(distcomp.job(f"slurm:{job_id}").status().details["folder"])


def _until(what: str, ok: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True).stdout
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what} (sinfo: {nodes.split()})"
        time.sleep(0.5)


def _steps_done(folder: Path, attempt: int, at_least: int) -> bool:
    notes = [n for n in _seen(folder) if n["attempt"] == attempt] if (folder / "checkpoint" / "seen").is_dir() else []
    return len(notes) == 2 and all(n["last"] >= at_least for n in notes)


def test_the_script_asks_for_requeue_and_notice_and_loops_its_attempts(tmp_path: Path) -> None:
    """Pure: the #SBATCH lines, the record's long job, the attempts' loop around the agents' step."""
    text = distcomp.compile(LONG, "slurm", nodes=2, max_restarts=2, preempt_grace=20, job_dir=str(tmp_path)).text or ""
    for line in ("#SBATCH --requeue", "#SBATCH --signal=B:USR1@20", "#SBATCH --open-mode=append"):
        assert line in text.splitlines()
    assert "#SBATCH --signal=B:USR1@60" in (distcomp.compile(LONG, "slurm", job_dir=str(tmp_path)).text or "")
    long_job = record_of(text)["long_job"]
    assert long_job == {"checkpoint": "checkpoint", "max_restarts": 2, "notice_signals": ["SIGUSR1"],
                        "notice_grace": 15.0, "preempted_exit": 0}
    assert "trap distcomp_notice USR1" in text and 'scontrol requeue "$SLURM_JOB_ID"' in text
    assert '_attempts begin "$DISTCOMP_JOB_FOLDER" 2)' in text
    # the spec's launcher.max_restarts is the default, --max-restarts beats it
    retried = JOBS / "longjob" / "retried.yaml"
    for options, restarts in (({}, 1), ({"max_restarts": 0}, 0), ({"max_restarts": 3}, 3)):
        compiled = distcomp.compile(retried, "slurm", job_dir=str(tmp_path), **options).text or ""
        assert record_of(compiled)["long_job"]["max_restarts"] == restarts
        assert f'_attempts begin "$DISTCOMP_JOB_FOLDER" {restarts})' in compiled
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_a_rank_that_fails_once_restarts_the_job_on_both_nodes_which_resumes(job_dir: Path) -> None:
    job = distcomp.submit(LONG, "slurm", nodes=2, max_restarts=1, inputs={"steps": 8, "fail_at": 3},
                          job_dir=str(job_dir))
    outcome = job.wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    folder = Path(outcome.details["folder"])
    seen = _seen(folder)
    # attempt 0 got to step 2 (rank 1 failed at 3); attempt 1 ran both ranks again, on both nodes, from step 3
    assert [(n["attempt"], n["rank"], n["node"], n["start"], n["torchelastic"]) for n in seen] == [
        (0, 0, "n1", 0, "0"), (0, 1, "n2", 0, "0"), (1, 0, "n1", 3, "1"), (1, 1, "n2", 3, "1")]
    assert {n["checkpoint"] for n in seen} == {str(folder / "checkpoint")}
    assert outcome.restarts == ("attempt 1 failed: rank1 (node n2) exited with code 3",)
    assert outcome.tracking is not None
    run, steps = _history(job_dir, outcome.tracking.run_id)
    assert run.info.status == "FINISHED"
    assert steps == list(range(8)), "one run holds every step, each once"
    assert run.data.tags["distcomp.restarts"] == "1"
    assert run.data.tags["distcomp.restart.1"] == "attempt 1 failed: rank1 (node n2) exited with code 3"
    # `distcomp status` says the restart, from another process
    said = subprocess.run([DISTCOMP, "status", str(job)], capture_output=True, text=True, timeout=60)
    assert "restart 1: attempt 1 failed: rank1 (node n2) exited with code 3" in said.stdout, said


def test_with_no_restart_left_the_job_fails_with_its_cause(job_dir: Path) -> None:
    outcome = distcomp.submit(LONG, "slurm", nodes=2, inputs={"steps": 6, "fail_at": 2}, job_dir=str(job_dir)).wait()
    assert outcome.state is JobState.FAILED
    assert outcome.root_cause.startswith("rank1 (node n2) exited with code 3")
    assert outcome.restarts == ()
    assert outcome.tracking is not None
    run, _steps = _history(job_dir, outcome.tracking.run_id)
    assert run.info.status == "FAILED" and run.data.tags["distcomp.restarts"] == "0"


def test_a_requeued_job_comes_back_and_resumes_and_a_waiting_submit_follows_it(job_dir: Path) -> None:
    proc, job_id = _submit(job_dir, "-i", "steps=14", "-i", "step_s=1")
    try:
        folder = _folder(job_id)
        _until("attempt 0 ran 4 steps", lambda: _steps_done(folder, 0, 3), 120)
        subprocess.run(["scontrol", "requeue", job_id], check=True, capture_output=True)
        # while it waits to run again, it has not ended: status says so
        _until("the job is pending again", lambda: distcomp.job(f"slurm:{job_id}").status().state in (
            JobState.PENDING, JobState.RUNNING) and (folder / "attempts.json").is_file(), 60)
        _out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"Slurm job {job_id}: pending" in err and err.count(f"Slurm job {job_id}: running") >= 2, err
    assert f"Slurm job {job_id}: restart 1: attempt 1 requeued by Slurm while it ran" in err
    seen = _seen(folder)
    resumed = [n for n in seen if n["attempt"] == 1]
    assert [n["rank"] for n in resumed] == [0, 1] and all(n["start"] >= 4 for n in resumed), seen
    outcome = distcomp.job(f"slurm:{job_id}").status()
    assert outcome.state is JobState.SUCCEEDED and len(outcome.restarts or ()) == 1
    assert outcome.tracking is not None
    run, steps = _history(job_dir, outcome.tracking.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.restarts"] == "1"
    assert "requeued by Slurm" in run.data.tags["distcomp.restart.1"]
    # a step the requeue cut after its point was logged and before its checkpoint may come twice
    assert sorted(set(steps)) == list(range(14)), steps


def test_the_time_limit_s_notice_lets_the_ranks_leave_and_the_job_requeues_itself(job_dir: Path) -> None:
    """--time=1 (Slurm's limit is in whole minutes) and --preempt-grace 10: Slurm's SIGUSR1
    comes 20 to 50 s into each attempt (its timer runs every 30 s); the job needs about 60 s."""
    job = distcomp.submit(LONG, "slurm", nodes=2, time=1, preempt_grace=10, inputs={"steps": 28, "step_s": 2},
                          job_dir=str(job_dir))
    outcome = job.wait(timeout=600)
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    folder = Path(outcome.details["folder"])
    seen = _seen(folder)
    noticed = [n for n in seen if n["preempted"]]
    assert noticed and {n["rank"] for n in noticed if n["attempt"] == 0} == {0, 1}, seen  # both nodes' ranks
    restarts = outcome.restarts or ()
    assert restarts and all("preempted: notice given (" in r and "the job requeued itself" in r for r in restarts)
    assert "SIGUSR1 to the batch script" in restarts[0]
    # each attempt starts where the last checkpoint left off
    starts = {n["attempt"]: n["start"] for n in seen}
    lasts = {n["attempt"]: n["last"] for n in seen}
    assert all(starts[a + 1] == lasts[a] + 1 for a in range(len(restarts))), seen
    assert outcome.tracking is not None
    run, steps = _history(job_dir, outcome.tracking.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.restarts"] == str(len(restarts))
    assert steps == list(range(28)), "one run holds every step, each once"


def test_cancel_during_a_long_job_ends_it_for_good(job_dir: Path) -> None:
    proc, job_id = _submit(job_dir, "--max-restarts", "2", "-i", "steps=60", "-i", "step_s=1")
    try:
        folder = _folder(job_id)
        _until("attempt 0 ran 2 steps", lambda: _steps_done(folder, 0, 1), 120)
        proc.send_signal(signal.SIGINT)  # as Ctrl-C: the waiting submit cancels the job
        _out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    outcome = distcomp.job(f"slurm:{job_id}").status()
    assert outcome.state is JobState.CANCELLED and outcome.restarts == ()
    time.sleep(5)  # no requeue, no restart afterwards
    assert subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip() == ""
    assert json.loads((folder / "attempts.json").read_text())["attempt"] == 0
    assert outcome.tracking is not None
    run, _steps = _history(job_dir, outcome.tracking.run_id)
    assert run.info.status == "KILLED"


def _node_state(node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%t"], capture_output=True, text=True).stdout.strip()


def _processes_on(node: str, job_id: str) -> list[Any]:
    """The job's processes "on" dev node ``node`` (both are this host): its node agent, that
    agent's slurmstepd and everything the agent started."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        if ("distcomp.agent" in " ".join(proc.info["cmdline"] or ()) and env.get("SLURMD_NODENAME") == node
                and env.get("SLURM_JOB_ID") == job_id):
            return [proc.parent(), proc, *proc.children(recursive=True)]
    raise AssertionError(f"no node agent of job {job_id} on {node}")


def test_a_node_lost_mid_job_requeues_it_and_it_finishes_once_the_node_is_back(slurm_cluster: Path,
                                                                               job_dir: Path) -> None:
    """n2 is lost: its job processes frozen (as on a machine that vanished: no reply, no reset)
    and its slurmd killed. Slurm declares it down (the dev cluster's SlurmdTimeout, 30 s) and
    requeues the job (--requeue); n2 comes back (its frozen processes gone, as after a reboot,
    its slurmd started again) and the job runs again and resumes from its checkpoint."""
    import os

    conf, pidfile = slurm_cluster / "slurm.conf", slurm_cluster / "slurmd-n2.pid"
    proc, job_id = _submit(job_dir, "-i", "steps=14", "-i", "step_s=1")
    frozen: list[Any] = []
    try:
        folder = _folder(job_id)
        _until("attempt 0 ran 4 steps", lambda: _steps_done(folder, 0, 3), 120)
        frozen = _processes_on("n2", job_id)
        for p in frozen:
            p.suspend()
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
        try:
            _until("n2 is down", lambda: _node_state("n2").startswith("down"), 240)
            assert distcomp.job(f"slurm:{job_id}").status().state in (JobState.PENDING, JobState.RUNNING)
        finally:
            for p in frozen:
                p.kill()
            subprocess.run(["slurmd", "-N", "n2", "-f", str(conf)], check=True, capture_output=True)
        _out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"Slurm job {job_id}: restart 1: attempt 1 requeued by Slurm while it ran" in err
    outcome = distcomp.job(f"slurm:{job_id}").status()
    assert outcome.state is JobState.SUCCEEDED and len(outcome.restarts or ()) == 1
    assert "no end was reported from node(s) 1 of the job: lost?" in (outcome.restarts or ("",))[0]
    seen = _seen(folder)
    lost = [n for n in seen if n["attempt"] == 0]
    resumed = [n for n in seen if n["attempt"] == 1]
    assert [n["rank"] for n in resumed] == [0, 1] and all(n["start"] >= 4 for n in resumed), seen
    assert max(n["last"] for n in lost) < 13, "the lost node stopped the first attempt"
    assert outcome.tracking is not None
    run, steps = _history(job_dir, outcome.tracking.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.restarts"] == "1"
    assert sorted(set(steps)) == list(range(14)), steps
