"""DDP training of a small MLP on generated data, y = sin(x . w) + noise, or on the CSV files
of a data folder (``--data``: 16 feature columns, then the target; a header row is skipped).

Launcher-agnostic: reads the torch.distributed contract (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) that every distcomp launcher sets, and uses gloo on CPU, NCCL on GPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

try:
    from distcomp import runtime  # MLflow logging from rank 0 (a no-op on the other ranks)
except ImportError:  # an image with only Python and torch (a Kubeflow pod): MLflow's own calls, when present
    from types import SimpleNamespace

    def _rank0(name: str):
        def call(*args, **kwargs):
            if os.environ.get("RANK", "0") != "0" or not os.environ.get("MLFLOW_RUN_ID"):
                return None
            try:
                import mlflow
            except ImportError:
                return None
            return getattr(mlflow, name)(*args, **kwargs)
        return call

    runtime = SimpleNamespace(**{n: _rank0(n) for n in ("log_params", "log_metrics", "log_artifact")},
                              finish=lambda: True)  # MLflow's own calls are synchronous: nothing to deliver


def make_data(samples: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 16, generator=g)
    w = torch.randn(16, 1, generator=g) / 4  # keeps x . w near unit scale: learnable in a few epochs
    y = torch.sin(x @ w) + 0.05 * torch.randn(samples, 1, generator=g)
    return TensorDataset(x, y)


def read_data(folder: Path) -> TensorDataset:
    """Every ``*.csv`` in ``folder``, rows of 16 features and a target."""
    rows: list[list[float]] = []
    for file in sorted(folder.glob("*.csv")):
        with file.open(newline="") as f:
            for row in csv.reader(f):
                try:
                    rows.append([float(v) for v in row])
                except ValueError:  # a header
                    continue
    if not rows or any(len(r) != 17 for r in rows):
        raise SystemExit(f"--data {folder}: expected CSV rows of 16 features and a target")
    table = torch.tensor(rows)
    return TensorDataset(table[:, :16], table[:, 16:])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=Path, help="a folder of CSV files to train on (default: generate the data)")
    p.add_argument("--init-from", type=Path)
    p.add_argument("--model-dir", type=Path, required=True)
    args = p.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    torch.manual_seed(args.seed)
    runtime.log_params({"world_size": world, "device": device.type})

    data = read_data(args.data) if args.data else make_data(args.samples, args.seed)
    if rank == 0:
        print(f"rank 0 of {world}: training on {len(data)} samples from "
              f"{args.data or 'generated data'}", flush=True)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1)).to(device)
    if args.init_from:
        model.load_state_dict(torch.load(args.init_from / "model.pt", map_location=device))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.MSELoss()

    history = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        start, total, count = time.perf_counter(), torch.zeros(2, device=device), 0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            total[0] += loss.detach() * len(x)
            total[1] += len(x)
            count += 1
        dist.all_reduce(total)  # mean loss over every rank's samples
        mean = (total[0] / total[1]).item()
        history.append(mean)
        runtime.log_metrics({"loss": mean, "epoch_seconds": time.perf_counter() - start}, step=epoch)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} loss {mean:.4f} ({count} steps/rank, "
                  f"{time.perf_counter() - start:.2f}s)", flush=True)

    if rank == 0:
        args.model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.model_dir / "model.pt")
        (args.model_dir / "metrics.json").write_text(json.dumps({"loss": history, "world_size": world}))
        runtime.log_artifact(str(args.model_dir / "model.pt"), "model")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without finalising the interpreter: once DDP has used the group, torch's gloo threads
    # outlive destroy_process_group(), and an exit racing them aborts (SIGABRT) now and then.
    # os._exit skips the exit's flushes, so deliver the MLflow points and the output first.
    # A failing rank raised above and never gets here: its exit code stays an error.
    runtime.finish()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
