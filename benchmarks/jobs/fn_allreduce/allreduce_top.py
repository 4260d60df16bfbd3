"""The same job as component.yaml + script.py (one gloo all-reduce), written as a function with
torch imported at the module's top, as a script does: `distcomp run allreduce_top.py:allreduce`
then imports torch in the launcher too, to read the signature (benchmarks/launch.py's fntop row;
allreduce_fn.py imports it inside the function)."""
import os

import torch
import torch.distributed as dist

import distcomp


@distcomp.component(name="bench-fn-allreduce", version="0.1.0", nproc_per_node=2)
def allreduce() -> None:
    """One gloo all-reduce over 2 ranks; raises if the sum is wrong."""
    dist.init_process_group("gloo")  # env:// from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    expected = world * (world + 1) / 2
    dist.destroy_process_group()
    if not torch.all(t == expected):
        raise RuntimeError(f"rank {rank}: all-reduce gave {t.tolist()}, expected {expected}")
    print(f"rank {rank}/{world} (local {os.environ.get('LOCAL_RANK')}): all-reduce ok ({expected})")
