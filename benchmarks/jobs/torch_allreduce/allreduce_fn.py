"""The same job as component.yaml + script.py (one gloo all-reduce), written as a function that
imports torch inside, where only the ranks pay for it (benchmarks/launch.py's fntorch row)."""
import os

import distcomp


@distcomp.component(name="bench-torch-allreduce", version="0.1.0", nproc_per_node=2)
def allreduce() -> None:
    """One gloo all-reduce over 2 ranks; raises if the sum is wrong."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")  # env:// from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    expected = world * (world + 1) / 2
    dist.destroy_process_group()
    if not torch.all(t == expected):
        raise RuntimeError(f"rank {rank}: all-reduce gave {t.tolist()}, expected {expected}")
    print(f"rank {rank}/{world} (local {os.environ.get('LOCAL_RANK')}): all-reduce ok ({expected})")
