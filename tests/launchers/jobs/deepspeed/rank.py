"""One DeepSpeed rank: the torch.distributed env, deepspeed.init_distributed(gloo), an all-reduce."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: the shared _contract helpers

from _contract import arguments, check, expect_torch_rank, expected_sum, finish  # noqa: E402

args = arguments()
# what init_distributed needs to skip its MPI discovery: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK
rank, world, master_port, info = expect_torch_rank(args, "deepspeed")

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
