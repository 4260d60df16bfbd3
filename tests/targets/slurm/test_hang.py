"""A stalled job on the real two-node Slurm cluster (issue 37, ``--hang-timeout``): two torch
(gloo) ranks per node; rank 3, on the second node, sleeps in a plain function while the others
wait in all_reduce. Each node's agent watches the job folder's beats: the job ends within a
minute of the stall, its root cause names rank 3 with its function and line and says the others
wait in all_reduce, no rank is left on either node, and the one MLflow run is FAILED."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import distcomp

HANG = Path(__file__).resolve().parents[1] / "jobs" / "hang"
STALL_LINE = next(i for i, line in enumerate((HANG / "train.py").read_text().splitlines(), 1)
                  if "the line the report names" in line)
DISTCOMP = str(Path(sys.executable).parent / "distcomp")
pytestmark = pytest.mark.slow


def test_a_stalled_rank_on_the_second_node_is_named_and_the_job_ends_failed(job_dir: Path) -> None:
    t0 = time.monotonic()
    proc = subprocess.run([DISTCOMP, "submit", "--target", "slurm", str(HANG / "component.yaml"), "--nodes", "2",
                           "--job-dir", str(job_dir), "--hang-timeout", "10", "-i", "stall_rank=3",
                           "-i", "stall_at=5"], capture_output=True, text=True, timeout=240)
    took = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    job_id = proc.stdout.splitlines()[0].strip()
    outcome = distcomp.job(job_id).status()
    folder = Path(outcome.details["folder"])
    cause = outcome.root_cause
    assert cause.startswith("rank3 (node n2) hung\n  hung: no rank made progress for "), cause
    assert re.search(rf"rank3 is not in a collective: \S+/train\.py:{STALL_LINE} in stall_here", cause), cause
    for rank in (0, 1, 2):  # seen by the node that runs them, in the shared folder
        assert re.search(rf"rank{rank} waits in all_reduce \(\S+/train\.py:\d+ in <module>\)", cause), cause
    assert "rank3 is not in a collective" in proc.stderr
    # started to ended: the start-up of a Slurm job, 5 steps, the 10 s timeout, the stacks and the stop
    beats = json.loads((folder / "progress" / "rank3.beat").read_text())
    assert beats["step"] is not None and took < 180, took
    pids = {int(m.group(1)) for log in (folder / "logs").glob("*.log")
            for m in re.finditer(r"rank \d+: pid (\d+)", log.read_text(errors="replace"))}
    assert len(pids) == 4, pids
    time.sleep(1)
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]

    from mlflow import MlflowClient

    assert outcome.tracking is not None
    run = MlflowClient(f"sqlite:///{job_dir}/mlflow.db").get_run(outcome.tracking.run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["distcomp.failure"].startswith("rank3 (node n2) hung"), run.data.tags
    assert f"train.py:{STALL_LINE} in stall_here" in run.data.tags["distcomp.failure"]
