"""examples/kfp_pipeline.py as a user runs it: compiled by kfp, then both steps for real under
kfp.local (SubprocessRunner, no venv): data prepared, 2 DDP ranks trained on it, one MLflow run."""

import pytest
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from mlflow import MlflowClient

from tests.conftest import REPO

EPOCHS = 2


@pytest.mark.slow
def test_pipeline_runs_locally_end_to_end(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_RUN_ID", "RANK", "WORLD_SIZE")}
    env.update(MLFLOW_TRACKING_URI=uri, TMPDIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "kfp_pipeline.py"), "--run-local", "--samples", "512",
         "--epochs", str(EPOCHS), "--pipeline-root", str(tmp_path / "root"), "--out", str(tmp_path / "pipeline.yaml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    console = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # kfp.local colours task names
    assert proc.returncode == 0, console[-4000:]

    # both steps ran and succeeded
    for task in ("prepare-data", "pytorch-ddp-example"):
        assert f"Task '{task}' finished with status SUCCESS" in console
    assert "Pipeline 'distcomp-ddp' finished with status SUCCESS" in console

    # the training step started 2 ranks on the prepared data, and rank 0 wrote the model
    data = re.search(r"\[rank0\]: rank 0 of 2: training on 512 samples from (\S+)", console)
    assert data and data.group(1).startswith(str(tmp_path / "root")) and data.group(1).endswith("prepare-data/data")
    model = Path(re.search(r"^model: (.+)$", console, re.M).group(1))  # type: ignore[union-attr]
    metrics = json.loads((model / "metrics.json").read_text())
    assert (model / "model.pt").stat().st_size > 0
    assert metrics["world_size"] == 2 and len(metrics["loss"]) == EPOCHS
    facts = json.loads(re.search(r"^step metadata: (.+)$", console, re.M).group(1))  # type: ignore[union-attr]
    assert facts["distcomp.processes"] == 2

    # one MLflow run for the job, holding rank 0's loss history
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("pytorch-ddp-example")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_id == facts["distcomp.mlflow_run_id"] and run.info.status == "FINISHED"
    assert run.data.tags["distcomp.world_size"] == "2"
    history = sorted(client.get_metric_history(run.info.run_id, "loss"), key=lambda m: m.step)
    assert [round(m.value, 6) for m in history] == [round(x, 6) for x in metrics["loss"]]

    # the compiled pipeline: the prepared data flows into the distributed step's optional input
    spec = yaml.safe_load((tmp_path / "pipeline.yaml").read_text())
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"prepare-data", "pytorch-ddp-example"}
    assert tasks["pytorch-ddp-example"]["inputs"]["artifacts"]["data"] == {
        "taskOutputArtifact": {"outputArtifactKey": "data", "producerTask": "prepare-data"}}
