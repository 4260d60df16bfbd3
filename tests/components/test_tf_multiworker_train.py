"""tf-multiworker-train: 2 TensorFlow workers (TF_CONFIG) under MultiWorkerMirroredStrategy;
the chief alone logs per epoch and writes the model, the workers end with the same weights."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from ._run import run_component, steps_only_once

NAME = "tf-multiworker-train"


@pytest.mark.slow
def test_two_workers_train_and_the_chief_saves_once(sqlite_uri: str, tmp_path: Path) -> None:
    epochs = 3
    run = run_component(NAME, tmp_path, sqlite_uri, epochs=epochs, samples=2048)
    model_dir = run.output("model")
    assert sorted(p.name for p in model_dir.iterdir()) == ["history.json", "model.keras"]
    with zipfile.ZipFile(model_dir / "model.keras") as archive:  # Keras' format: a zip of config + weights
        assert {"config.json", "model.weights.h5"} <= set(archive.namelist())
        config = json.loads(archive.read("config.json"))
    assert config["class_name"] == "Sequential"

    saved = json.loads((model_dir / "history.json").read_text())
    assert saved["workers"] == 2 and saved["saved_by"] == "worker 0"
    assert saved["weights_drift"] == 0.0, "the workers' weights diverged: gradients were not all-reduced"
    history = saved["history"]
    assert history[-1]["loss"] < history[0]["loss"] and history[-1]["val_accuracy"] > 0.75, history  # chance: 0.5
    # once, by the chief; the other worker saved into a temporary folder and removed it
    assert "worker 0: saved the model to" in run.log("rank0") and "saved the model" not in run.log("rank1")
    assert "worker 1: saved to a temporary folder, removed" in run.log("rank1")
    assert "(chief: False)" in run.log("rank1") and "(chief: True)" in run.log("rank0")

    mlflow_run = run.mlflow_run()
    run_id = mlflow_run.info.run_id
    for key in ("loss", "accuracy", "val_loss", "val_accuracy", "epoch_seconds"):
        assert steps_only_once(run.history(run_id, key)) == list(range(epochs)), key
    assert [v for _, v in run.history(run_id, "val_accuracy")] == [h["val_accuracy"] for h in history]
    params, tags = mlflow_run.data.params, mlflow_run.data.tags
    assert params["workers"] == "2" and params["global_batch"] == "128", params
    assert tags["distcomp.launcher"] == "tensorflow.distributed"
    assert {"model/model.keras", "model/history.json"} <= run.artifacts(run_id, "model")
