"""One DeepSpeed rank: the torch.distributed env, deepspeed.init_distributed(gloo), an all-reduce."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: the shared _contract helpers

from _contract import (LOCALHOST, RankInfo, absent, arguments, check, env, expect, expect_cpu_threads,  # noqa: E402
                       expect_rank_info, expected_sum, finish, port_of)

args = arguments()
nodes, per_node = args.nodes, args.per_node
world = nodes * per_node

# what init_distributed needs to skip its MPI discovery: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK
rank = int(env("RANK"))
check(0 <= rank < world, f"RANK={rank} is outside 0..{world - 1}")
local, node = rank % per_node, rank // per_node
expect("WORLD_SIZE", world)
expect("LOCAL_RANK", local)
expect("LOCAL_WORLD_SIZE", per_node)
expect("NODE_RANK", node)
expect("GROUP_RANK", node)
expect("MASTER_ADDR", LOCALHOST)
master_port = port_of(env("MASTER_PORT"), "MASTER_PORT")
expect("DISTCOMP_TEST_MARK", "deepspeed")
expect_cpu_threads(nodes, per_node)
absent("openmpi", "tensorflow", "azure", "kubeflow")
info = expect_rank_info(RankInfo(rank, world, local, per_node, node, LOCALHOST, master_port, "torch"))

import deepspeed  # noqa: E402
import deepspeed.comm as ds_comm  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from deepspeed.accelerator import get_accelerator  # noqa: E402

accelerator = get_accelerator()
check(accelerator.device_name() == "cpu", f"DeepSpeed chose the {accelerator.device_name()} accelerator")
deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
check(dist.is_initialized() and dist.get_backend() == "gloo", "init_distributed did not start a gloo process group")
check((ds_comm.get_rank(), ds_comm.get_world_size()) == (rank, world),
      f"deepspeed.comm says rank {ds_comm.get_rank()} of {ds_comm.get_world_size()}, env says {rank} of {world}")
check((dist.get_rank(), dist.get_world_size()) == (rank, world), "torch.distributed disagrees with the env")
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
check(total.item() == expected_sum(world), f"all_reduce gave {total.item()}, expected {expected_sum(world)}")
via_ds = torch.tensor([rank + 1.0])
ds_comm.all_reduce(via_ds)
check(via_ds.item() == expected_sum(world), f"deepspeed.comm.all_reduce gave {via_ds.item()}")
ds_comm.barrier()
dist.destroy_process_group()

finish(args.out, rank, all_reduce=total.item(), ds_all_reduce=via_ds.item(), rank_info=info,
       accelerator=accelerator.device_name(), backend="gloo")
