"""A Ray job id names one job at one Jobs API address (issue 33): this machine's index is keyed
by address and id, and a job found there is used only if it is the one submitted (its
component and MLflow run, as the submit told the Jobs API)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from distcomp.errors import UsageError
from distcomp.targets.ray import _ids

from .conftest import TORCH, distcomp, one_line, ray_env


def test_the_index_holds_an_id_per_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One id sent to two clusters: $RAY_ADDRESS picks its own; else the newest; an id never sent
    from here goes to $RAY_ADDRESS, and without it is one clear refusal."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    _ids.remember("job-1", "http://a:8265", {"distcomp_component": "a.yaml", "mlflow_run_id": "1"})
    time.sleep(0.01)
    _ids.remember("job-1", "http://b:8265", {"distcomp_component": "b.yaml", "mlflow_run_id": "2"})
    older = next((tmp_path / "state" / "distcomp" / "ray").glob("*/job-1"))
    os.utime(older, (1, 1))  # the entry for a: the older one
    assert _ids.job_address("job-1") == "http://b:8265"
    monkeypatch.setenv("RAY_ADDRESS", "http://a:8265")
    assert _ids.job_address("job-1") == "http://a:8265"
    assert _ids.job_address("job-2") == "http://a:8265"
    monkeypatch.delenv("RAY_ADDRESS")
    with pytest.raises(UsageError, match="was not submitted from this machine and RAY_ADDRESS is not set"):
        _ids.job_address("job-2")


@pytest.mark.slow
def test_a_job_that_took_the_id_at_that_address_is_not_the_submitted_one(ray_cluster: str, tmp_path: Path) -> None:
    """The job ran; then the cluster at its address is, as far as this machine can tell, another
    (its job of that id is not the one submitted: forged here by the index entry's metadata):
    status, logs and cancel say so in one line, and never show that job."""
    env = ray_env(ray_cluster, tmp_path)
    proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output",
                    f"result={tmp_path / 'out'}", "--detach", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    deadline = time.monotonic() + 180
    while True:
        status = distcomp(env, "status", job, "--json")
        assert status.returncode == 0, status.stderr
        if json.loads(status.stdout)["state"] in ("succeeded", "failed") or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert json.loads(status.stdout)["state"] == "succeeded", status.stdout
    entry = next((Path(env["XDG_STATE_HOME"]) / "distcomp" / "ray").glob(f"*/{job.removeprefix('ray:')}"))
    data = json.loads(entry.read_text())
    assert data["address"] == ray_cluster and data["metadata"]["distcomp_component"].startswith("ray-test-torch")
    entry.write_text(json.dumps({**data, "metadata": {"distcomp_component": "other/component.yaml",
                                                      "mlflow_run_id": "f" * 32}}))
    for command in ("status", "logs", "cancel"):
        one_line(distcomp(env, command, job), f"Ray job {job.removeprefix('ray:')} at {ray_cluster} is not the job "
                                              "distcomp submitted there")
