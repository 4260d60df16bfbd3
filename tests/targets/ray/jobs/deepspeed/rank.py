"""One DeepSpeed rank under the ray target: torchrun's env from the Topology, deepspeed.init_distributed(gloo)."""

import argparse
import json
import os
import sys
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()
env = os.environ


def check(ok: bool, message: str) -> None:
    if not ok:
        print(f"contract broken: {message}", flush=True)
        sys.exit(2)


check(env["MASTER_PORT"].isdigit() and bool(env.get("MASTER_ADDR")), "MASTER_ADDR/MASTER_PORT")
check(env.get("DISTCOMP_TEST_MARK") == "deepspeed", "the spec's environment_variables")

import deepspeed  # noqa: E402
import deepspeed.comm as ds_comm  # noqa: E402
import torch  # noqa: E402

rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
check((ds_comm.get_rank(), ds_comm.get_world_size()) == (rank, world), "deepspeed.comm disagrees with the env")
total = torch.tensor([rank + 1.0])
ds_comm.all_reduce(total)
check(total.item() == world * (world + 1) / 2, f"all_reduce gave {total.item()}")
ds_comm.barrier()
node = env.get("DISTCOMP_RAY_NODE")
(args.out / f"rank{rank}.json").write_text(json.dumps(
    {"rank": rank, "world": world, "node": node, "all_reduce": total.item(), "master": env["MASTER_ADDR"]}))
print(f"rank {rank} on {node}: all_reduce={total.item()}", flush=True)
# end the process group before the interpreter does: gloo's threads torn down at exit abort it
# now and then ("terminate called without an active exception", SIGABRT after the work is done)
torch.distributed.destroy_process_group()
