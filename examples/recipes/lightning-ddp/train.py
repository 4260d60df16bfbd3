"""PyTorch Lightning DDP under distcomp's torch.distributed launcher (or torchrun).

Lightning detects the launcher from torchrun's variables (RANK, GROUP_RANK, LOCAL_RANK,
LOCAL_WORLD_SIZE: its TorchElasticEnvironment) and then starts no processes of its own; the
Trainer's ``devices`` must be the processes per node and ``num_nodes`` the nodes, both read
here from that same environment. ``MLFlowLogger()`` (no run id) writes the job's MLflow run.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.loggers import MLFlowLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        # sync_dist: the epoch's value is the mean over every rank, logged once by rank 0
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--model-dir", type=Path, required=True)
    args = p.parse_args()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.samples, 8, generator=g)
    y = torch.sin(x @ (torch.randn(8, 1, generator=g) / 3))
    # Lightning adds a DistributedSampler: each rank trains on its half
    loader = DataLoader(TensorDataset(x, y), batch_size=32)

    devices = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    nodes = int(os.environ.get("WORLD_SIZE", devices)) // devices
    trainer = L.Trainer(accelerator="cpu", devices=devices, num_nodes=nodes, strategy="ddp",
                        max_epochs=args.epochs, logger=MLFlowLogger(), enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Regressor(), loader)

    seen = {"world_size": trainer.world_size, "global_rank": trainer.global_rank, "num_nodes": trainer.num_nodes,
            "environment": type(trainer.strategy.cluster_environment).__name__}
    trainer.logger.log_hyperparams(seen)  # rank 0 only: Lightning's rank_zero_only
    if trainer.is_global_zero:
        args.model_dir.mkdir(parents=True, exist_ok=True)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        (args.model_dir / "metrics.json").write_text(json.dumps({**seen, "metrics": metrics}))
        print(f"trained on {seen['world_size']} ranks ({seen['environment']}): {metrics}", flush=True)


if __name__ == "__main__":
    main()
