"""`mlflow run DIR -b distcomp -c '{"target": "slurm", "nodes": 2, ...}'`: the project's job is
submitted to the real two-node Slurm cluster through the slurm target, in one MLflow run (the
run `mlflow run` created is the job's run, which the ranks log into and the target ends)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient


from ..mlflow._helpers import all_runs, explain, mlflow_run
from .conftest import JOBS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The slurm torch test job as an MLflow project (`distcomp compile --target mlflow`)."""
    out = tmp_path / "project"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "mlflow",
                           str(JOBS / "torch" / "component.yaml"), "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
def test_mlflow_run_submits_to_slurm_in_one_run(project: Path, sqlite_uri: str, job_dir: Path,  # noqa: F811
                                                tmp_path: Path) -> None:
    config = json.dumps({"target": "slurm", "nodes": 2, "nproc_per_node": 2, "job_dir": str(job_dir), "time": 5})
    proc = mlflow_run(project, sqlite_uri, tmp_path, "per_node=2", config=config)
    assert proc.returncode == 0, explain(proc)
    runs = all_runs(sqlite_uri)
    assert len(runs) == 1, [r.data.tags.get("mlflow.runName") for r in runs]
    run = runs[0]
    assert run.info.status == "FINISHED", explain(proc)
    assert run.data.tags["mlflow.project.backend"] == "distcomp" and run.data.params["per_node"] == "2"
    assert run.data.tags["distcomp.state"] == "succeeded" and run.data.tags["distcomp.world_size"] == "4"
    assert run.data.metrics["all_reduce"] == 10.0  # rank 0 on the cluster logged into the project's run
    assert "submitted Slurm job" in proc.stderr
    # every rank had the project's run; the job's script asked Slurm for 2 nodes and 5 minutes
    folder = Path(next(p for p in job_dir.iterdir() if p.name.startswith("slurm-test-torch-")
                       and run.info.run_id in (p / "job.json").read_text()))
    result = Path(json.loads((folder / "job.json").read_text())["outputs"]["result"])
    ranks = [json.loads((result / f"rank{r}.json").read_text()) for r in range(4)]
    assert {r["run_id"] for r in ranks[1:]} == {run.info.run_id} and [r["node"] for r in ranks] == ["n1", "n1", "n2", "n2"]
    script = (folder / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --time=5\n" in script
    assert MlflowClient(sqlite_uri).list_artifacts(run.info.run_id)  # the ranks' logs attached


@pytest.mark.slow
def test_slurm_keys_need_the_slurm_target(project: Path, sqlite_uri: str, tmp_path: Path) -> None:  # noqa: F811
    proc = mlflow_run(project, sqlite_uri, tmp_path, config=json.dumps({"partition": "debug", "target": "local"}))
    assert proc.returncode != 0 and "'partition' is an option of the slurm target" in proc.stderr
    proc = mlflow_run(project, sqlite_uri, tmp_path, config=json.dumps({"target": "slurm", "run_dir": "x"}))
    assert proc.returncode != 0 and "'run_dir' does not apply to target slurm" in proc.stderr
    assert all_runs(sqlite_uri) == []
