"""A function component for torch.distributed: tiny DDP (gloo, CPU) on generated data.

    distcomp run examples/torch-function/train.py:train --nproc-per-node 2 -o model=out/

Every rank runs ``train`` with its values typed (``epochs`` an int, ``lr`` a float); DDP
all-reduces the gradients, so the ranks end with the same weights; rank 0 logs the loss to
MLflow (``distcomp.runtime``) and saves the model."""

from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist
from model import build_model, make_data  # a sibling module: it travels with the function
from torch.nn.parallel import DistributedDataParallel

import distcomp
from distcomp import runtime


@distcomp.component(name="torch-function", version="1.0.0", launcher="torch.distributed", nproc_per_node=2,
                    env={"OMP_NUM_THREADS": "1"})
def train(model: distcomp.Output, epochs: int = 5, lr: float = 0.1, samples: int = 256, seed: int = 0) -> None:
    """Linear regression with DistributedDataParallel on CPU (gloo)."""
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR/PORT: set by the launcher
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = make_data(samples, seed)
    x, y = x[rank::world], y[rank::world]  # this rank's share
    net = DistributedDataParallel(build_model(seed))
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    losses = []
    for epoch in range(epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()  # gradients all-reduced across the ranks here
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        runtime.log_metric("loss", losses[-1], step=epoch)  # rank 0's only
    weights = torch.cat([p.detach().flatten() for p in net.parameters()])
    high, low = weights.clone(), weights.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    drift = float((high - low).max())  # 0 when every rank holds the same weights
    if rank == 0:
        os.makedirs(model, exist_ok=True)
        torch.save(net.module.state_dict(), os.path.join(model, "model.pt"))
        with open(os.path.join(model, "summary.json"), "w") as f:
            json.dump({"world_size": world, "losses": losses, "drift": drift, "epochs": epochs}, f)
    dist.destroy_process_group()
