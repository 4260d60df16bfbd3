"""A training loop made distributed by Hugging Face accelerate, under distcomp's
torch.distributed launcher (or torchrun, or ``accelerate launch``).

accelerate reads torchrun's variables; on CPU it joins them into one world (gloo) only when
``ACCELERATE_USE_CPU=true`` (or ``Accelerator(cpu=True)``), which the spec sets. It logs with
``log_with="mlflow"``: its tracker resumes the run in MLFLOW_RUN_ID, the job's run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--model-dir", type=Path, required=True)
    args = p.parse_args()

    accelerator = Accelerator(log_with="mlflow")
    accelerator.init_trackers("accelerate-recipe")  # the tracker is made on the main process only
    world = accelerator.num_processes
    accelerator.get_tracker("mlflow").store_init_configuration(
        {"world_size": world, "distributed_type": str(accelerator.distributed_type)})

    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.samples, 8, generator=g)
    y = torch.sin(x @ (torch.randn(8, 1, generator=g) / 3))
    torch.manual_seed(0)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # prepare: DDP around the model, a sampler giving each rank its share of the batches
    model, opt, loader = accelerator.prepare(model, opt, DataLoader(TensorDataset(x, y), batch_size=32))

    history = []
    for epoch in range(args.epochs):
        total, count = torch.zeros(()), 0
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            accelerator.backward(loss)
            opt.step()
            total += loss.detach()
            count += 1
        mean = accelerator.gather(total / count).mean().item()  # over every rank
        history.append(mean)
        accelerator.log({"train_loss": mean, "steps_per_rank": count}, step=epoch)  # main process only
        accelerator.print(f"epoch {epoch + 1}/{args.epochs}: loss {mean:.4f} ({count} steps on each of {world} ranks)")

    if accelerator.is_main_process:
        args.model_dir.mkdir(parents=True, exist_ok=True)
        (args.model_dir / "metrics.json").write_text(json.dumps({"world_size": world, "loss": history}))
    accelerator.end_training()


if __name__ == "__main__":
    main()
