"""Supervision on the real two-node Slurm cluster, through the `distcomp` command as a user
runs it: Ctrl-C while waiting cancels the job, --timeout ends it TIMED_OUT, and --output puts
an output where the user said on the shared file system."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import distcomp
from distcomp.records import JobState
from distcomp.targets.slurm._slurm import SlurmJob

from .conftest import JOBS

TORCH = JOBS / "torch" / "component.yaml"
DISTCOMP = str(Path(sys.executable).parent / "distcomp")


def _mlflow_run(job_dir: Path, run_id: str):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{job_dir}/mlflow.db").get_run(run_id)


def _squeue(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip()


def _outcome(job_id: str) -> dict:  # type: ignore[type-arg]
    folder = Path(distcomp.job(f"slurm:{job_id}").status().details["folder"])
    return json.loads((folder / "outcome.json").read_text())


def _submit(job_dir: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([DISTCOMP, "submit", "--target", "slurm", str(TORCH), "--nodes", "2",
                             "--job-dir", str(job_dir), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()  # the job id, alone on stdout, before waiting
    assert line.startswith("slurm:"), (line, proc.stderr.read() if proc.stderr else "")
    return proc, line.removeprefix("slurm:")


@pytest.mark.slow
def test_ctrl_c_while_waiting_cancels_the_job(job_dir: Path) -> None:
    import psutil

    proc, job_id = _submit(job_dir, "-i", "sleep=120")
    try:
        folder = Path(distcomp.job(f"slurm:{job_id}").status().details["folder"])
        logs = [folder / "logs" / f"rank{r}.log" for r in range(2)]
        deadline = time.monotonic() + 60
        while not all(p.is_file() and "sleeping" in p.read_text() for p in logs):  # both ranks run
            assert time.monotonic() < deadline and proc.poll() is None, "the ranks did not start"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        # the cancel waits for Slurm to say the job ended (up to 60 s) and then ends its run: on a
        # loaded machine with other workers' Slurm jobs beside it, that has taken longer than 90 s
        _out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "stopped while waiting" in err
    assert _squeue(job_id) == ""
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"]) if str(folder) in " ".join(p.info["cmdline"] or ())]
    assert left == []
    outcome = _outcome(job_id)
    assert outcome["state"] == "cancelled" and outcome["exit_code"] == 130
    assert _mlflow_run(job_dir, outcome["tracking"]["run_id"]).info.status == "KILLED"


@pytest.mark.slow
def test_timeout_is_the_time_limit_and_a_job_past_it_times_out(job_dir: Path) -> None:
    """--timeout 4 is Slurm's --time=1 (minutes) and a deadline distcomp's wait keeps to the second."""
    started = time.monotonic()
    proc, job_id = _submit(job_dir, "-i", "sleep=120", "--timeout", "4")
    _out, err = proc.communicate(timeout=90)
    assert proc.returncode == 124, err
    assert time.monotonic() - started < 30
    assert "timed out: ran past its deadline of 4 s (--timeout)" in err
    assert _squeue(job_id) == ""
    outcome = _outcome(job_id)
    assert outcome["state"] == "timed_out" and outcome["exit_code"] == 124
    folder = Path(outcome["details"]["folder"])
    assert "#SBATCH --time=1\n" in (folder / "job.sbatch").read_text()
    run = _mlflow_run(job_dir, outcome["tracking"]["run_id"])
    assert run.info.status == "FAILED" and run.data.tags["distcomp.state"] == "timed_out"
    assert "deadline of 4 s" in run.data.tags["distcomp.message"]


def test_slurm_timeout_state_is_timed_out() -> None:
    """Slurm's own limit (TIMEOUT, DEADLINE) reads as TIMED_OUT (exit 124): a limit of whole
    minutes takes a minute or more to show on the real cluster, so the mapping is checked here."""
    for word in ("TIMEOUT", "DEADLINE"):
        job = SlurmJob("7", word, "TimeLimit", "0:15", {"TimeLimit": "00:01:00"})
        assert job.state is JobState.TIMED_OUT and job.state.exit_code() == 124


@pytest.mark.slow
def test_output_path_on_the_shared_file_system(job_dir: Path) -> None:
    mine = job_dir / "my-results" / "torch"
    outcome = distcomp.submit(TORCH, "slurm", nodes=2, outputs={"result": str(mine)}, job_dir=str(job_dir),
                              tracking=False).wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause
    assert outcome.outputs["result"] == str(mine)
    assert sorted(p.name for p in mine.iterdir()) == ["rank0.json", "rank1.json"]
    assert not (Path(outcome.details["folder"]) / "outputs" / "result").exists()


def _marked(mark: str) -> list[int]:
    """Live processes of this host with DISTCOMP_TEST_ESCAPE=mark in their environment (both
    nodes of the dev cluster are this host)."""
    import psutil

    needle = f"\0DISTCOMP_TEST_ESCAPE={mark}\0".encode()
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as f:
                if needle in b"\0" + f.read() and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc.pid)
        except (OSError, psutil.Error):
            pass
    return found


@pytest.mark.slow
def test_what_the_ranks_leave_is_stopped_on_every_node_when_the_job_ends(job_dir: Path) -> None:
    """proctrack/linuxproc (the dev cluster's) loses a rank's child whose parent ended: the job
    script stops every process carrying the job's cookie on each node as it ends."""
    import os
    import uuid

    mark = uuid.uuid4().hex
    try:
        outcome = distcomp.submit(JOBS / "escape" / "component.yaml", "slurm", nodes=2, inputs={"mark": mark},
                                  job_dir=str(job_dir), tracking=False).wait()
        assert outcome.state is JobState.SUCCEEDED, outcome.root_cause
        folder = Path(outcome.details["folder"])
        assert [(folder / "logs" / f"rank{r}.log").read_text() for r in (0, 1)] == [
            "rank 0 left sleep 301 and 302\n", "rank 1 left sleep 303 and 304\n"]
        left = _marked(mark)
        deadline = time.monotonic() + 10  # the job is over once its last step ended: give it a moment
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = _marked(mark)
        assert left == [], f"outlived the job: {left}"
        said = (folder / f"slurm-{outcome.job_id.removeprefix('slurm:')}.out").read_text()
        assert said.count("stopping what the ranks left: pid") >= 1, said
    finally:
        for pid in _marked(mark):
            os.kill(pid, 9)
