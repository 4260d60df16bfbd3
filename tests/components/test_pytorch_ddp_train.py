"""pytorch-ddp-train: DDP on 2 gloo ranks, metrics per epoch from rank 0, a checkpoint that a
second run resumes from, on generated data and on a folder of CSV files."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from ._run import run_component, steps_only_once

NAME = "pytorch-ddp-train"
METRICS = ("loss", "accuracy", "val_loss", "val_accuracy", "epoch_seconds")


@pytest.mark.slow
def test_trains_on_generated_data(sqlite_uri: str, tmp_path: Path) -> None:
    epochs = 4
    run = run_component(NAME, tmp_path, sqlite_uri, epochs=epochs, samples=2048, classes=4, seed=3)
    mlflow_run = run.mlflow_run()
    run_id = mlflow_run.info.run_id
    for key in METRICS:
        assert steps_only_once(run.history(run_id, key)) == list(range(epochs)), key
    params = mlflow_run.data.params
    assert params["world_size"] == "2" and params["backend"] == "gloo" and params["model_classes"] == "4", params
    assert params["epochs"] == str(epochs)  # distcomp's own record of the inputs

    model_dir = run.output("model")
    saved = json.loads((model_dir / "metrics.json").read_text())
    assert saved["world_size"] == 2 and [h["epoch"] for h in saved["history"]] == list(range(epochs))
    # what MLflow holds is rank 0's numbers (all-reduced over both ranks), once per epoch
    assert [v for _, v in run.history(run_id, "loss")] == [h["loss"] for h in saved["history"]]
    losses = [h["loss"] for h in saved["history"]]
    assert losses[-1] < losses[0], losses
    assert saved["history"][-1]["val_accuracy"] > 0.6, saved["history"]  # 4 classes: chance is 0.25

    import torch  # here, not at the top: collecting the suite should not import torch

    checkpoint = torch.load(model_dir / "model.pt", weights_only=True)
    assert checkpoint["epochs"] == epochs and checkpoint["arch"] == {"features": 20, "hidden": 64, "classes": 4}
    assert {"model/model.pt", "model/metrics.json"} <= run.artifacts(run_id, "model")
    assert "2 ranks on cpu" in run.log("rank0") and "epoch 1:" not in run.log("rank1")  # rank 1 trains quietly


@pytest.mark.slow
def test_resumes_from_a_checkpoint_on_csv_data(sqlite_uri: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(7)
    for part in range(2):  # two files, each with a header row
        with (data / f"part{part}.csv").open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow([f"f{i}" for i in range(6)] + ["label"])
            for _ in range(400):
                label = rng.randrange(3)
                out.writerow([round(rng.gauss(1.5 * (i % 3 == label), 1.0), 4) for i in range(6)] + [label])

    first = run_component(NAME, tmp_path, sqlite_uri, label="first", epochs=2, data=data, batch_size=32)
    second = run_component(NAME, tmp_path, sqlite_uri, label="second", epochs=1, data=data, batch_size=32,
                           init_from=first.output("model"))

    run_id = second.mlflow_run().info.run_id
    assert steps_only_once(second.history(run_id, "loss")) == [2]  # epochs continue where the first run ended
    assert second.mlflow_run().data.params["resumed_from_epoch"] == "2"
    start = first.history(first.mlflow_run().info.run_id, "loss")[0][1]
    assert second.history(run_id, "loss")[0][1] < start, "resuming did not start from the trained weights"
    import torch

    checkpoint = torch.load(second.output("model") / "model.pt", weights_only=True)
    assert checkpoint["arch"] == {"features": 6, "hidden": 64, "classes": 3} and checkpoint["epochs"] == 3
    assert "320 training samples each, 160 for validation" in second.log("rank0")
