"""deepspeed-train: DeepSpeed ZeRO 1 and 2 on 2 CPU ranks (gloo), loss per step from rank 0, the
stage DeepSpeed really ran recorded, every rank's optimizer partition in the checkpoint.

DeepSpeed's CPU accelerator JIT-builds its shared-memory comm op the first time it runs on a
machine (about a minute here, cached in ~/.cache/torch_extensions), hence the long timeout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._run import run_component, steps_only_once

NAME = "deepspeed-train"


@pytest.mark.slow
@pytest.mark.parametrize("stage", [1, 2])
def test_zero_stage_trains_and_checkpoints(stage: int, sqlite_uri: str, tmp_path: Path) -> None:
    steps = 12
    run = run_component(NAME, tmp_path, sqlite_uri, timeout=420, zero_stage=stage, steps=steps, micro_batch=16)
    out = run.output("checkpoint")
    summary = json.loads((out / "train.json").read_text())
    assert summary["zero_stage"] == stage and summary["config"]["zero_optimization"]["stage"] == stage
    assert summary["partition_gradients"] is (stage == 2)
    assert summary["optimizer"] == "DeepSpeedZeroOptimizer" and summary["world_size"] == 2
    # ZeRO: each rank holds about half of the optimizer state, together all of it
    parts, total = summary["optimizer_partitions"], summary["parameters"]
    assert len(parts) == 2 and all(p < total for p in parts) and sum(parts) >= total, (parts, total)

    assert (out / "latest").read_text().strip() == "final"
    files = {p.name for p in (out / "final").iterdir()}
    assert {"mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
            "zero_pp_rank_1_mp_rank_00_optim_states.pt"} <= files, files
    import torch  # here, not at the top: collecting the suite should not import torch (~7 s)

    weights = torch.load(out / "model.pt", weights_only=True)
    assert sum(w.numel() for w in weights.values()) == total

    mlflow_run = run.mlflow_run()
    run_id = mlflow_run.info.run_id
    losses = run.history(run_id, "loss")
    assert steps_only_once(losses) == list(range(steps))
    assert [v for _, v in losses] == [h["loss"] for h in summary["history"]]
    assert losses[-1][1] < losses[0][1], losses
    assert steps_only_once(run.history(run_id, "grad_norm")) == list(range(steps))
    assert run.history(run_id, "val_loss") == [(steps, summary["val_loss"])]
    params = mlflow_run.data.params
    assert params["zero_stage"] == str(stage) and params["world_size"] == "2" and params["global_batch"] == "32"
    assert mlflow_run.data.tags["distcomp.launcher"] == "deepspeed"
    assert "train.json" in run.artifacts(run_id) and "model/model.pt" in run.artifacts(run_id, "model")
    assert f"ZeRO stage {stage} on 2 cpu ranks" in run.log("rank0")
