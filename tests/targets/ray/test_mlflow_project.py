"""`mlflow run DIR -b distcomp -c '{"target": "ray", "nodes": 2, "address": ..., "outputs": {...}}'`:
the project's job is submitted to the real two-node Ray cluster through the ray target, in one
MLflow run (the run `mlflow run` created is the job's run, which rank 0 logs into and the
target ends); a ray key without the ray target, or a misspelt one, leaves no run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


from ..mlflow._helpers import all_runs, explain, mlflow_run, only_run
from .conftest import TORCH


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The ray torch test job as an MLflow project (`distcomp compile --target mlflow`)."""
    out = tmp_path / "project"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "mlflow", str(TORCH), "--out",
                           str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
def test_mlflow_run_submits_to_ray_in_one_run(project: Path, sqlite_uri: str, ray_cluster: str,  # noqa: F811
                                              tmp_path: Path) -> None:
    result = tmp_path / "result"
    config = json.dumps({"target": "ray", "nodes": 2, "address": ray_cluster, "outputs": {"result": str(result)},
                         "placement_timeout": 120})
    proc = mlflow_run(project, sqlite_uri, tmp_path, "sleep=0", config=config)
    assert proc.returncode == 0, explain(proc)
    run = only_run(sqlite_uri)  # the one `mlflow run` created, which the job resumed and ended
    tags = run.data.tags
    assert (run.info.status, tags["distcomp.state"], tags["distcomp.world_size"]) == ("FINISHED", "succeeded", "2")
    assert tags["mlflow.project.backend"] == "distcomp" and tags["distcomp.job"].startswith("ray:")
    assert run.data.params["sleep"] == "0" and run.data.metrics["allreduce"] == 3.0  # rank 0's, on the cluster
    ranks = [json.loads((result / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world"], r["sum"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]
    assert sorted(r["node"] for r in ranks) == ["n1", "n2"]  # one rank on each Ray node
    assert {r["run_id"] for r in ranks} == {run.info.run_id}


@pytest.mark.slow
def test_ray_keys_need_the_ray_target(project: Path, sqlite_uri: str, tmp_path: Path) -> None:  # noqa: F811
    proc = mlflow_run(project, sqlite_uri, tmp_path, config=json.dumps({"address": "http://127.0.0.1:8265",
                                                                         "placement_timeout": 5}))
    assert proc.returncode != 0
    assert "backend config 'address' is an option of the ray target: add \"target\": \"ray\"" in proc.stderr
    assert "'placement_timeout' is an option of the ray target" in proc.stderr  # both, at once
    proc = mlflow_run(project, sqlite_uri, tmp_path, config=json.dumps({
        "target": "ray", "adress": "http://127.0.0.1:8265", "outputs": {"result": "relative/out"}}))
    assert proc.returncode != 0
    assert "unknown backend config key 'adress' (did you mean 'address'?)" in proc.stderr
    assert "'result': 'relative/out' is a relative path; target 'ray' runs on nodes that do not see" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert all_runs(sqlite_uri) == []
