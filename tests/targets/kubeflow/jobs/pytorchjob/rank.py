"""One rank of a PyTorchJob pod's torchrun: a gloo all-reduce, then what this rank saw."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: _report

from _report import arguments, check, environ, expected_sum, finish, rank_info  # noqa: E402

args = arguments()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from torchrun
rank, world = dist.get_rank(), dist.get_world_size()
check(world == args.world, f"world size {world}, the test asked for {args.world}")
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
check(total.item() == expected_sum(world), f"all_reduce gave {total.item()}, expected {expected_sum(world)}")
peers = [None] * world
dist.all_gather_object(peers, {"rank": rank, "pod": os.environ.get("HOSTNAME"),
                               "group_rank": os.environ.get("GROUP_RANK")})
dist.barrier()
dist.destroy_process_group()

finish(args.out, rank, world=world, all_reduce=total.item(), peers=peers, rank_info=rank_info(),
       env=environ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                   "MASTER_ADDR", "MASTER_PORT", "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
                   "PYTHONUNBUFFERED", "HOSTNAME", "DISTCOMP_TEST_MARK"))
