"""Train an MLP classifier with DistributedDataParallel, one process per rank.

Data: Gaussian clusters, one per class, drawn from ``--seed`` (every rank draws the same set,
so nothing has to be downloaded or shared), or every ``*.csv`` of ``--data`` (feature columns,
then an integer label). A seeded permutation splits it into training and validation parts;
each epoch every rank takes an equal slice of a fresh seeded shuffle of the training part, so
all ranks run the same number of steps. Loss and accuracy of both parts are summed over the
ranks with one all-reduce per epoch and logged to MLflow by rank 0 through
``distcomp.runtime``. Rank 0 writes ``model.pt`` (weights, optimizer state, architecture,
epochs trained) and ``metrics.json``; ``--init-from`` resumes from such a folder.

Reads the torch.distributed env contract (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
LOCAL_RANK), which ``distcomp run``, torchrun and Azure ML's PyTorch distribution all set.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from distcomp import runtime

CHECKPOINT = "model.pt"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="DDP training of an MLP classifier")
    numbers: list[tuple[str, type, Any, str]] = [
        ("epochs", int, 5, "passes over the training split"),
        ("batch-size", int, 64, "samples per step on each rank"),
        ("lr", float, 0.005, "learning rate"),
        ("hidden", int, 64, "width of the hidden layers"),
        ("samples", int, 4096, "size of the generated data set"),
        ("features", int, 20, "features of the generated data"),
        ("classes", int, 4, "classes of the generated data"),
        ("val-fraction", float, 0.2, "share of the samples held out for validation"),
        ("seed", int, 0, "seed of the data, split, shuffling and weights"),
    ]
    for name, kind, default, text in numbers:
        parser.add_argument(f"--{name}", type=kind, default=default, help=f"{text} (default: {default})")
    parser.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    parser.add_argument("--data", type=Path, help="a folder of CSV files (default: generate the data)")
    parser.add_argument("--init-from", type=Path, help=f"a folder holding the {CHECKPOINT} of an earlier run")
    parser.add_argument("--out", type=Path, required=True, help="where rank 0 writes the model")
    args = parser.parse_args(argv)
    if not 0.0 <= args.val_fraction < 1.0:
        parser.error("--val-fraction must be in [0, 1)")
    return args


def gaussian_clusters(samples: int, features: int, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``samples`` points around one random centre per class (overlapping a little: not trivial)."""
    gen = torch.Generator().manual_seed(seed)
    centres = 0.5 * torch.randn(classes, features, generator=gen)
    labels = torch.randint(0, classes, (samples,), generator=gen)
    points = centres[labels] + torch.randn(samples, features, generator=gen)
    return points, labels


def csv_rows(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of every CSV file in ``folder``: features, then an integer label."""
    features: list[list[float]] = []
    labels: list[int] = []
    for path in sorted(folder.glob("*.csv")):
        with path.open(newline="") as handle:
            for line, row in enumerate(csv.reader(handle), 1):
                if not row:
                    continue
                try:
                    values = [float(cell) for cell in row]
                except ValueError:
                    if line == 1:
                        continue  # a header row
                    raise SystemExit(f"{path}:{line}: not a number in {row}") from None
                features.append(values[:-1])
                labels.append(int(values[-1]))
    widths = {len(f) for f in features}
    if not features or len(widths) != 1 or 0 in widths:
        raise SystemExit(f"--data {folder}: expected CSV rows of the same length, features then a label")
    y = torch.tensor(labels)
    if y.min() < 0:
        raise SystemExit(f"--data {folder}: labels must be 0..K-1")
    return torch.tensor(features), y


class Classifier(nn.Module):
    def __init__(self, features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def totals(model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """[summed loss, correct predictions, samples] of ``model`` on (x, y), without gradients."""
    out = torch.zeros(3, device=x.device)
    model.eval()
    with torch.no_grad():
        for start in range(0, len(x), chunk):
            logits = model(x[start:start + chunk])
            target = y[start:start + chunk]
            out[0] += F.cross_entropy(logits, target, reduction="sum")
            out[1] += (logits.argmax(dim=1) == target).sum()
            out[2] += len(target)
    model.train()
    return out


def main() -> None:
    args = parse_args()
    on_gpu = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if on_gpu:
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl" if on_gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{local_rank}" if on_gpu else "cpu")

    x, y = csv_rows(args.data) if args.data else gaussian_clusters(args.samples, args.features, args.classes,
                                                                    args.seed)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(args.seed))
    n_val = int(len(x) * args.val_fraction)
    val_idx, train_idx = order[:n_val], order[n_val:]
    if len(train_idx) < world:
        raise SystemExit(f"{len(train_idx)} training samples cannot be shared by {world} ranks")
    x, y = x.to(device), y.to(device)
    val_x, val_y = x[val_idx[rank::world]], y[val_idx[rank::world]]  # each rank scores its slice

    checkpoint = None
    if args.init_from:
        checkpoint = torch.load(args.init_from / CHECKPOINT, map_location=device, weights_only=True)
        arch = checkpoint["arch"]
    else:
        arch = {"features": x.shape[1], "hidden": args.hidden, "classes": int(y.max()) + 1}
    if arch["features"] != x.shape[1] or int(y.max()) >= arch["classes"]:
        raise SystemExit(f"the data ({x.shape[1]} features, labels up to {int(y.max())}) does not fit the "
                         f"model of {args.init_from} ({arch})")

    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = Classifier(**arch).to(device)
    if args.optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    done = 0  # epochs trained before this run
    if checkpoint is not None:
        model.load_state_dict(checkpoint["weights"])
        if checkpoint.get("optimizer_name") == args.optimizer:
            opt.load_state_dict(checkpoint["optimizer"])
            for group in opt.param_groups:
                group["lr"] = args.lr
        done = int(checkpoint["epochs"])
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if on_gpu else None)

    per_rank = len(train_idx) // world  # equal slices: every rank runs the same number of steps
    steps = -(-per_rank // args.batch_size)
    runtime.log_params({"world_size": world, "device": device.type, "backend": dist.get_backend(),
                        "train_samples": per_rank * world, "val_samples": n_val, "steps_per_epoch": steps,
                        "resumed_from_epoch": done, **{f"model_{k}": v for k, v in arch.items()}})
    if rank == 0:
        print(f"{world} ranks on {device.type}: {per_rank} training samples each, {n_val} for validation, "
              f"model {arch}, from epoch {done}", flush=True)

    history: list[dict[str, float]] = []
    for epoch in range(done, done + args.epochs):
        began = time.perf_counter()
        shuffle = torch.randperm(len(train_idx), generator=torch.Generator().manual_seed(args.seed * 7919 + epoch))
        mine = train_idx[shuffle][rank * per_rank:(rank + 1) * per_rank].to(device)
        seen = torch.zeros(3, device=device)
        for step in range(steps):
            batch = mine[step * args.batch_size:(step + 1) * args.batch_size]
            logits = ddp(x[batch])
            loss = F.cross_entropy(logits, y[batch])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            hits = (logits.argmax(1) == y[batch]).sum().float()
            seen += torch.stack([loss.detach() * len(batch), hits, torch.tensor(float(len(batch)), device=device)])
        scores = torch.cat([seen, totals(model, val_x, val_y)])
        dist.all_reduce(scores)  # sums over the ranks
        row = {"loss": scores[0].item() / scores[2].item(), "accuracy": scores[1].item() / scores[2].item()}
        if scores[5] > 0:
            row.update(val_loss=scores[3].item() / scores[5].item(), val_accuracy=scores[4].item() / scores[5].item())
        row["epoch_seconds"] = time.perf_counter() - began
        history.append({"epoch": epoch, **row})
        runtime.log_metrics(row, step=epoch)
        if rank == 0:
            print(f"epoch {epoch + 1}: " + " ".join(f"{k} {v:.4f}" for k, v in row.items()), flush=True)

    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save({"weights": model.state_dict(), "arch": arch, "epochs": done + args.epochs,
                    "optimizer_name": args.optimizer, "optimizer": opt.state_dict()}, args.out / CHECKPOINT)
        (args.out / "metrics.json").write_text(json.dumps({"world_size": world, "history": history}, indent=1))
        runtime.log_artifact(args.out / CHECKPOINT, "model")
        runtime.log_artifact(args.out / "metrics.json", "model")
    dist.barrier()  # nobody leaves while rank 0 may still need the group
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without finalising the interpreter: once DDP has used the group, torch's gloo threads
    # outlive destroy_process_group(), and an exit racing them aborts (SIGABRT) now and then.
    # os._exit skips the exit's flushes: deliver the MLflow points and the output first.
    # A failing rank raised above and never gets here: its exit code stays an error.
    runtime.finish()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
