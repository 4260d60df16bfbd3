"""One gloo all-reduce, then what a small training job logs: 2 params, 3 metrics x 10 epochs."""
import sys

import torch
import torch.distributed as dist

from distcomp import runtime

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
runtime.log_params({"world_size": world, "lr": 0.05})
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
for epoch in range(10):
    runtime.log_metrics({"loss": 1.0 / (epoch + 1), "accuracy": epoch / 10, "sum": float(t[0])}, step=epoch)
dist.destroy_process_group()
if not torch.all(t == world * (world + 1) / 2):
    sys.exit(1)
print(f"rank {rank}/{world}: all-reduce ok")
