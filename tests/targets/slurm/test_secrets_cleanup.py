"""A Slurm job's ``secrets.sh`` (mode 600, read by its script's node agents) lasts as long as the
job may still run, and no longer: a requeued job reads it again, so it stays through a requeue;
once the job ends by itself its batch script removes it, and once Slurm says the job ended any
other way (a ``scancel`` from outside distcomp), ``distcomp status`` removes it."""

from __future__ import annotations

import hashlib
import stat
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

import distcomp
from distcomp.api import JobHandle
from distcomp.records import JobState

TOKEN = "tok-Sl'urm $HOME 9f2c"
SPEC = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python rank.py --token ${{inputs.api_token}} --sha ${{inputs.sha}} --dest ${{inputs.dest}}
code: .
inputs:
  api_token: {type: string}
  sha: {type: string}
  dest: {type: string}
environment:
  image: python:3.11-slim
"""
RANK = """\
import argparse, hashlib, os, time
p = argparse.ArgumentParser()
for flag in ("--token", "--sha", "--dest"):
    p.add_argument(flag)
args = p.parse_args()
attempt = os.environ.get("SLURM_RESTART_COUNT", "0")
whole = hashlib.sha256(args.token.encode()).hexdigest() == args.sha
path = os.path.join(args.dest, f"attempt{attempt}")
with open(path + ".tmp", "w") as f:
    f.write("whole" if whole else "changed")
os.replace(path + ".tmp", path)  # whole at once: the test reads it the moment it is there
if attempt == "0":
    time.sleep(120)  # the first run waits to be requeued or cancelled
"""


def _until(what: str, check: Callable[[], bool], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.2)


def _state(job_id: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", job_id, "-o"], capture_output=True, text=True).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), "")


def _submit(tmp_path: Path, job_dir: Path) -> tuple["JobHandle", Path, Path]:
    code, dest = tmp_path / "code", tmp_path / "dest"
    code.mkdir()
    dest.mkdir()
    (code / "job.yml").write_text(SPEC)
    (code / "rank.py").write_text(RANK)
    sha = hashlib.sha256(TOKEN.encode()).hexdigest()
    job = distcomp.submit(code / "job.yml", "slurm", inputs={"api_token": TOKEN, "sha": sha, "dest": str(dest)},
                          job_dir=str(job_dir / tmp_path.name))
    (record,) = (job_dir / tmp_path.name).glob("*/job.json")
    folder = record.parent
    return job, folder, dest


@pytest.mark.slow
def test_the_secrets_survive_a_requeue_and_go_when_the_job_ends(slurm_cluster: Path, job_dir: Path,
                                                                  tmp_path: Path) -> None:
    job, folder, dest = _submit(tmp_path, job_dir)
    secrets = folder / "secrets.sh"
    _until("the first run", (dest / "attempt0").exists)
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600 and TOKEN not in (folder / "job.sbatch").read_text()
    subprocess.run(["scontrol", "requeue", job.id], check=True, capture_output=True, text=True)
    _until("the requeue", lambda: _state(job.id) not in ("RUNNING", "COMPLETING"), 60)
    time.sleep(2)  # the first run's batch script has ended: what it left is what the second run finds
    assert secrets.is_file(), "\n".join(p.read_text() for p in folder.glob("slurm-*.out"))
    # Slurm holds a requeued job back for a while (BeginTime): no need to wait that out here
    subprocess.run(["scontrol", "update", f"jobid={job.id}", "StartTime=now"], check=True, capture_output=True,
                   text=True)
    _until("the second run", (dest / "attempt1").exists, 240)
    assert (dest / "attempt1").read_text() == "whole"  # the requeued run got the secret unchanged
    _until("the end", lambda: _state(job.id) in ("COMPLETED", ""), 120)
    # nobody asked distcomp about the job: its own script removed them at its end
    _until("the secrets to go", lambda: not secrets.exists(), 30)
    assert job.status().state is JobState.SUCCEEDED


@pytest.mark.slow
def test_a_job_ended_from_outside_loses_its_secrets_when_distcomp_sees_the_end(slurm_cluster: Path, job_dir: Path,
                                                                                tmp_path: Path) -> None:
    job, folder, dest = _submit(tmp_path, job_dir)
    _until("the first run", (dest / "attempt0").exists)
    subprocess.run(["scancel", job.id], check=True, capture_output=True, text=True)
    _until("the end", lambda: _state(job.id) in ("CANCELLED", ""), 60)
    assert job.status().state is JobState.CANCELLED
    assert not (folder / "secrets.sh").exists()
