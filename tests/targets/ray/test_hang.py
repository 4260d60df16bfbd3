"""A stalled job on the real two-node Ray cluster (issue 37, ``--hang-timeout``): one torch
(gloo) rank per node; rank 1 sleeps in a plain function while rank 0 waits in all_reduce. Each
node's agent watches its ranks' beats: the job ends, its root cause names rank 1 with its
function and line and says rank 0 waits in all_reduce, no rank is left on either node, and the
one MLflow run is FAILED."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from .conftest import distcomp, marked, ray_env

HANG = Path(__file__).resolve().parents[1] / "jobs" / "hang"
STALL_LINE = next(i for i, line in enumerate((HANG / "train.py").read_text().splitlines(), 1)
                  if "the line the report names" in line)
pytestmark = pytest.mark.slow


def test_a_stalled_rank_is_named_and_the_job_ends_failed(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    t0 = time.monotonic()
    proc = distcomp(env, "submit", str(HANG / "component.yaml"), "--target", "ray", "--nodes", "2",
                    "--nproc-per-node", "1", "--hang-timeout", "10", "-i", "stall_at=5", cwd=tmp_path)
    took = time.monotonic() - t0
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    job = proc.stdout.strip().splitlines()[0]
    cause = json.loads(distcomp(env, "status", job, "--json").stdout)["root_cause"]
    assert cause.startswith("rank1 (node 1, ") and ") hung\n  hung: no rank made progress for " in cause, cause
    assert re.search(rf"rank1 is not in a collective: \S+/train\.py:{STALL_LINE} in stall_here", cause), cause
    # the stacks meet where the beats do (this machine's folder for the job, which both dev nodes see)
    assert re.search(r"rank0 waits in all_reduce \(\S+/train\.py:\d+ in <module>\)", cause), cause
    assert took < 240, took
    assert marked(job.removeprefix("ray:")) == []  # no rank left on either node
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED" and f"train.py:{STALL_LINE} in stall_here" in run.data.tags["distcomp.failure"]
