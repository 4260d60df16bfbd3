"""``mlflow.autolog()`` in a plain DDP script: MLflow's telemetry thread can deadlock with
autolog's import hooks and hang the ranks for ever (issue 26), so every rank gets
``MLFLOW_DISABLE_TELEMETRY=true`` unless the user set it: the job finishes with one run."""

from __future__ import annotations

import pytest
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from mlflow import MlflowClient

from distcomp.core.plan import make_plan
from distcomp.spec import load

from ..targets._jobs import clean_env

SPEC = Path(__file__).resolve().parent / "jobs" / "autolog" / "component.yaml"


@pytest.mark.slow
def test_a_ddp_script_calling_mlflow_autolog_finishes_with_one_run(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = clean_env(MLFLOW_TRACKING_URI=uri)
    env.pop("MLFLOW_DISABLE_TELEMETRY", None)
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(SPEC), "--run-dir", str(tmp_path / "run"),
                           "--experiment", "autolog", "--timeout", "150"], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in (0, 1):
        assert f"[rank{rank}]: rank {rank}: telemetry off=True step done" in proc.stdout, proc.stdout
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("autolog")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and "loss" in run.data.metrics


@pytest.mark.slow
def test_the_users_own_setting_wins_on_every_replica() -> None:
    spec = load(SPEC)
    assert {r.env["MLFLOW_DISABLE_TELEMETRY"] for r in make_plan(spec).topology.replicas} == {"true"}
    given = {"MLFLOW_DISABLE_TELEMETRY": "false"}  # --env, or the shell of a local run
    assert all("MLFLOW_DISABLE_TELEMETRY" not in r.env for r in make_plan(spec, env=given).topology.replicas)
    mine = replace(spec, environment_variables={"MLFLOW_DISABLE_TELEMETRY": "false"})  # the spec's own
    assert all("MLFLOW_DISABLE_TELEMETRY" not in r.env for r in make_plan(mine).topology.replicas)
