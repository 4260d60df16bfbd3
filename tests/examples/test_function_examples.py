"""The function-component examples, one per launcher family, run as their docstrings say:
``distcomp run examples/NAME/train.py:train --nproc-per-node 2`` from another folder, a real
subprocess with 2 real ranks (torchrun, the TensorFlow launcher, mpirun) tracking into a test
SQLite store. Each imports a sibling module, so each run also shows the whole folder travels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..components._run import ComponentRun, steps_only_once
from ..launchers.conftest import _explain, clean_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, tmp_path: Path, uri: str, output: str, **inputs: object) -> ComponentRun:
    """The example's job on 2 local ranks; asserts exit 0 and the job's one FINISHED MLflow run."""
    run_dir = tmp_path / name
    argv = [sys.executable, "-m", "distcomp", "run", f"{EXAMPLES / name / 'train.py'}:train", "--nproc-per-node", "2",
            "-o", f"{output}={tmp_path / 'out'}", "--quiet", "--run-dir", str(run_dir), "--experiment", name,
            "--timeout", "240", "--grace", "3"]
    for key, value in inputs.items():
        argv += ["-i", f"{key}={value}"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**clean_env(), "MLFLOW_TRACKING_URI": uri})
    run = ComponentRun(proc, run_dir, world=2, uri=uri)
    assert proc.returncode == 0, _explain(run)
    assert "Traceback" not in proc.stderr, _explain(run)
    mlflow_run = run.mlflow_run()
    assert mlflow_run.info.status == "FINISHED", mlflow_run.info
    tags = mlflow_run.data.tags
    assert tags["distcomp.component"] == name and tags["distcomp.world_size"] == "2", tags
    for key, value in inputs.items():  # the function's parameters are the run's params
        assert mlflow_run.data.params[key] == str(value)
    return run


@pytest.mark.slow
def test_torch_ddp(sqlite_uri: str, tmp_path: Path) -> None:
    run = run_example("torch-function", tmp_path, sqlite_uri, "model", epochs=4, lr=0.1)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["epochs"] == 4  # an int: range(epochs) ran 4 times
    assert summary["drift"] == 0.0, "the ranks' weights diverged: gradients were not all-reduced"
    losses = summary["losses"]
    assert len(losses) == 4 and losses[-1] < losses[0] / 2, losses
    assert (tmp_path / "out" / "model.pt").is_file()
    mlflow_run = run.mlflow_run()
    points = run.history(mlflow_run.info.run_id, "loss")
    assert steps_only_once(points) == [0, 1, 2, 3]  # rank 0's only
    assert [v for _, v in points] == pytest.approx(losses)
    assert mlflow_run.data.tags["distcomp.launcher"] == "torch.distributed"


@pytest.mark.slow
def test_mpi_allreduce(sqlite_uri: str, tmp_path: Path) -> None:
    run = run_example("mpi-function", tmp_path, sqlite_uri, "result", count=999, rounds=4)
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result == {"world_size": 2, "count": 999, "total": 999 * 1000 // 2, "rounds": 4}
    mlflow_run = run.mlflow_run()
    assert steps_only_once(run.history(mlflow_run.info.run_id, "allreduce_us")) == [0, 1, 2, 3]
    assert mlflow_run.data.tags["distcomp.launcher"] == "mpi"


@pytest.mark.slow
def test_tensorflow_multiworker(sqlite_uri: str, tmp_path: Path) -> None:
    run = run_example("tensorflow-function", tmp_path, sqlite_uri, "model", epochs=3, lr=0.1)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["workers"] == 2
    losses = summary["losses"]
    assert len(losses) == 3 and losses[-1] < losses[0] / 2, losses
    # each worker printed its weights: the same, as all-reduced gradients keep them
    printed = [line.split(" weights: ", 1)[1] for rank in ("rank0", "rank1") for line in run.log(rank).splitlines()
               if " weights: " in line]
    assert len(printed) == 2 and json.loads(printed[0]) == json.loads(printed[1]) == summary["weights"]
    mlflow_run = run.mlflow_run()
    points = run.history(mlflow_run.info.run_id, "loss")
    assert steps_only_once(points) == [0, 1, 2]  # the chief's only
    assert [v for _, v in points] == pytest.approx(losses)
    assert mlflow_run.data.tags["distcomp.launcher"] == "tensorflow.distributed"
