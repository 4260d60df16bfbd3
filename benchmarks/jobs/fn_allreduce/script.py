"""One gloo all-reduce; exits 1 if the sum is wrong. Runs under torchrun or distcomp alike."""
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env:// from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
expected = world * (world + 1) / 2
dist.destroy_process_group()
if not torch.all(t == expected):
    print(f"rank {rank}: all-reduce gave {t.tolist()}, expected {expected}", file=sys.stderr)
    sys.exit(1)
print(f"rank {rank}/{world} (local {os.environ.get('LOCAL_RANK')}): all-reduce ok ({expected})")
