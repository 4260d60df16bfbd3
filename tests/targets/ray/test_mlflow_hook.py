"""A script written for plain MLflow (its own ``mlflow.start_run()`` on every rank) stays the
job's one run on Ray too: distcomp's MLflow hook travels with the job and is first on each
rank's PYTHONPATH (before the spec's own), so every top-level start_run resumes the job's run,
rank 0's metrics land there and the other ranks' are dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from .conftest import JOBS, distcomp, ray_env
from tests._metrics import ranks_metrics


@pytest.mark.slow
def test_a_plain_mlflow_script_logs_into_the_job_s_one_run(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    proc = distcomp(env, "submit", str(JOBS / "plain_mlflow" / "component.yaml"), "--target", "ray", "--nodes", "2",
                    "--output", f"result={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1, [r.info.run_name for r in runs]  # no run of the script's own
    (run,) = runs
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert sorted(r["node"] for r in ranks) == ["n1", "n2"]
    assert {r["run_id"] for r in ranks} == {run.info.run_id}  # start_run resumed the job's run on both
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.job"] == proc.stdout.strip()
    assert ranks_metrics(run.data.metrics) == {"loss": 1.0} and run.data.params["lr"] == "0.1"  # rank 0's only
    # the hook first, the spec's PYTHONPATH kept after it
    assert all(r["pythonpath"].split(":")[0].endswith("/_site") and r["pythonpath"].split(":")[1] == "extra"
               for r in ranks), ranks
