"""The recipes in examples/recipes run as a user runs them: the command line docs/recipes.md
shows, word for word (a real subprocess, 2 local ranks, a real SQLite MLflow store), and each
leaves exactly one MLflow run, FINISHED, holding the metrics its library logged from rank 0 and
the world size the library saw. The docs test leaves that block to this one."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from distcomp.spec import load

from .._shellblocks import blocks, local, workspace
from ..conftest import REPO
from ..launchers.conftest import JobRun, _explain, clean_env

RECIPES = REPO / "examples" / "recipes"
PAGE = REPO / "docs" / "recipes.md"


@dataclass
class RecipeRun(JobRun):
    uri: str = ""
    experiment: str = ""  # the component's name: the default experiment

    def only_run(self) -> Any:
        """The one run in the whole store (a library's own experiment would show up here too)."""
        client = MlflowClient(self.uri)
        runs = [(e.name, r) for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
        assert len(runs) == 1, [(name, r.info.run_name, r.info.run_id) for name, r in runs]
        name, run = runs[0]
        assert name == self.experiment and run.info.status == "FINISHED", (name, run.info)
        return run

    def history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in MlflowClient(self.uri).get_metric_history(run_id, key))


def documented(name: str, scratch: Path) -> list[str]:
    """The words of docs/recipes.md's command line for recipe ``name``, its /tmp/ paths in ``scratch``."""
    (block,) = [b for b in blocks(PAGE.read_text(encoding="utf-8")) if f"examples/recipes/{name}/" in b.body]
    (line,) = [line for line in block.body.splitlines() if f"examples/recipes/{name}/" in line]
    return shlex.split(local(line, scratch))


def run_recipe(name: str, tmp_path: Path, uri: str, *, timeout: float = 300) -> RecipeRun:
    """The page's ``distcomp run examples/recipes/NAME/component.yaml ...`` in a copy of the clone
    (a folder of links), on its 2 local ranks; asserts exit 0."""
    words = documented(name, tmp_path)
    assert words[:2] == ["distcomp", "run"], words
    run_dir = Path(words[words.index("--run-dir") + 1])
    proc = subprocess.run([sys.executable, "-m", "distcomp", *words[1:]], cwd=workspace(tmp_path / "clone"),
                          capture_output=True, text=True, timeout=timeout, env={**clean_env(), "MLFLOW_TRACKING_URI": uri})
    run = RecipeRun(proc, run_dir, world=2, uri=uri, experiment=load(str(RECIPES / name / "component.yaml")).name)
    assert proc.returncode == 0, _explain(run)
    run.status = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    assert run.status["state"] == "succeeded", run.status
    return run


def output_json(run: RecipeRun, output: str = "model") -> dict[str, Any]:
    return json.loads((Path(run.status["outputs"][output]) / "metrics.json").read_text())


@pytest.mark.slow
def test_lightning_ddp(sqlite_uri: str, tmp_path: Path) -> None:
    run = run_recipe("lightning-ddp", tmp_path, sqlite_uri)
    mlflow_run = run.only_run()
    params = mlflow_run.data.params
    # Lightning joined distcomp's world (torchrun's env), it did not spawn 2 worlds of its own
    assert (params["world_size"], params["num_nodes"], params["environment"]) == ("2", "1", "TorchElasticEnvironment")
    assert params["global_rank"] == "0", params  # rank 1's MLFlowLogger wrote nothing
    losses = run.history(mlflow_run.info.run_id, "train_loss")
    assert len(losses) == 2 and losses[-1][1] < losses[0][1], losses  # one point per epoch, falling
    seen = output_json(run)
    assert seen["world_size"] == 2 and seen["metrics"]["train_loss"] == pytest.approx(losses[-1][1])
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" in run.log("rank1")


@pytest.mark.slow
def test_hf_trainer(sqlite_uri: str, tmp_path: Path) -> None:
    run = run_recipe("hf-trainer", tmp_path, sqlite_uri)
    mlflow_run = run.only_run()  # train(), evaluate() and the script's own start_run(): one run
    params, metrics = mlflow_run.data.params, mlflow_run.data.metrics
    assert params["world_size"] == "2" and params["report_to"] == "['mlflow']", params
    assert params["num_hidden_layers"] == "2" and params["epochs"] == "2", params  # the config's and distcomp's
    # 128 samples / (2 ranks x 16 per batch) = 4 steps an epoch, a loss every 2 steps
    assert [s for s, _ in run.history(mlflow_run.info.run_id, "loss")] == [2, 4, 6, 8]
    assert {"train_loss", "train_runtime", "eval_loss", "eval_runtime"} <= metrics.keys(), metrics
    seen = output_json(run)
    assert seen["world_size"] == 2 and seen["eval_loss"] == pytest.approx(metrics["eval_loss"])
    assert "eval_loss" not in run.log("rank1")  # the Trainer logs from rank 0 only


@pytest.mark.slow
def test_accelerate(sqlite_uri: str, tmp_path: Path) -> None:
    run = run_recipe("accelerate", tmp_path, sqlite_uri)
    mlflow_run = run.only_run()
    params = mlflow_run.data.params
    # ACCELERATE_USE_CPU=true from the spec: one world of 2 (without it: 2 worlds of 1, no error)
    assert (params["world_size"], params["distributed_type"]) == ("2", "DistributedType.MULTI_CPU"), params
    losses = run.history(mlflow_run.info.run_id, "train_loss")
    assert [s for s, _ in losses] == [0, 1] and losses[1][1] < losses[0][1], losses
    # 512 samples in batches of 32 = 16 batches, shared by the 2 ranks
    assert mlflow_run.data.metrics["steps_per_rank"] == 8
    assert output_json(run) == {"world_size": 2, "loss": [v for _, v in losses]}
    assert "epoch 1/2" in run.log("rank0") and "epoch 1/2" not in run.log("rank1")  # accelerator.print: main only


@pytest.mark.slow
def test_keras_mwms(sqlite_uri: str, tmp_path: Path) -> None:
    run = run_recipe("keras-mwms", tmp_path, sqlite_uri)
    mlflow_run = run.only_run()  # every worker's autolog: the chief's metrics, in the job's run
    assert mlflow_run.data.params["world_size"] == "2" and mlflow_run.data.params["opt_name"] == "SGD"
    losses = run.history(mlflow_run.info.run_id, "loss")
    assert [s for s, _ in losses] == [0, 1] and losses[1][1] < losses[0][1], losses
    seen = output_json(run)
    assert (seen["world_size"], seen["keras"]) == (2, "tf_keras"), seen  # TF_USE_LEGACY_KERAS=1 from the spec
    assert seen["loss"] == pytest.approx([v for _, v in losses])
    assert "Epoch 1/2" in run.log("rank0") and "Epoch 1/2" not in run.log("rank1")
