"""The same job has the same world size on every target: a spec whose command starts its own
torchrun with more processes per node than the spec says is laid out by the core's plan, and
the Kubeflow job's MLflow run (made by the core, at submit) carries that plan's world size, as
the local run and the Slurm job do, not the spec's."""

from __future__ import annotations

import pytest
import os
import subprocess
import sys
from pathlib import Path

from .test_submit import FakeApi, condition, kubeconfig

SPEC = """\
name: own-torchrun
type: DistributedComponent
launcher:
  type: torch.distributed
  node_count: 2
  process_count_per_node: 1
  additional_arguments: >-
    torchrun --nnodes 2 --nproc-per-node 3 --node-rank $NODE_RANK --master-addr $MASTER_ADDR
    --master-port $MASTER_PORT train.py
"""


@pytest.mark.slow
def test_the_runs_world_size_is_the_own_launchers(tmp_path: Path, mlflow_server: str) -> None:  # noqa: F811
    from mlflow import MlflowClient

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    (code / "component.yaml").write_text(SPEC)
    experiment = f"own-{tmp_path.name}"
    statuses = [[condition("Succeeded", "PyTorchJobSucceeded", "done")]]
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
    with FakeApi(statuses) as api:
        proc = subprocess.run(  # --name ddp: the name the scripted API answers for
            [sys.executable, "-m", "distcomp", "submit", "--target", "kubeflow",
             str(code / "component.yaml"), "--image", "r.example/t:1",
             "--name", "ddp", "--namespace", "ml", "--kubeconfig", str(kubeconfig(tmp_path, api)), "--poll", "0.05",
             "--experiment", experiment],
            capture_output=True, text=True, timeout=120, env={**env, "MLFLOW_TRACKING_URI": mlflow_server})
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(mlflow_server)
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    tags = run.data.tags
    assert run.info.status == "FINISHED"
    assert (tags["distcomp.nodes"], tags["distcomp.processes_per_node"], tags["distcomp.world_size"]) == ("2", "3", "6")
