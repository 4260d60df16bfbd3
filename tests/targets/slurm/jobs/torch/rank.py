"""One torch.distributed rank under the slurm target: torchrun's env from Slurm's, then a gloo all-reduce."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--per-node", type=int, required=True)
p.add_argument("--fail-rank", type=int, default=-1)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()
env = os.environ
rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])


def check(ok: bool, message: str) -> None:
    if not ok:
        print(f"contract broken: {message}", flush=True)
        sys.exit(2)


# the node agent of Slurm node SLURM_NODEID started this node's ranks with the Topology's env
check(env["NODE_RANK"] == env["SLURM_NODEID"], "NODE_RANK is the Slurm node's index")
check(int(env["WORLD_SIZE"]) == int(env["SLURM_JOB_NUM_NODES"]) * args.per_node, "WORLD_SIZE vs Slurm's nodes")
check(rank == int(env["NODE_RANK"]) * args.per_node + int(env["LOCAL_RANK"]), "RANK from NODE_RANK and LOCAL_RANK")
check(env["LOCAL_WORLD_SIZE"] == str(args.per_node), f"LOCAL_WORLD_SIZE={env['LOCAL_WORLD_SIZE']}")
check(int(env["NODE_RANK"]) == rank // args.per_node, "ranks are numbered node by node")
check(env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"].isdigit(), "MASTER_ADDR/MASTER_PORT")
check(env.get("DISTCOMP_TEST_MARK") == "torch", "the spec's environment_variables")
check(Path.cwd().name == "code" and Path.cwd().parent.name.startswith("slurm-test-torch-"), f"cwd {Path.cwd()}")

from distcomp.runtime import rank_info  # noqa: E402

info = rank_info()
check((info.rank, info.world_size, info.node_rank) == (rank, world, int(env["NODE_RANK"])), f"rank_info {info}")
if args.sleep:
    print(f"rank {rank} sleeping {args.sleep}s (pid {os.getpid()})", flush=True)
    time.sleep(args.sleep)
if rank == args.fail_rank:
    print(f"rank {rank} fails on purpose", flush=True)
    sys.exit(3)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
check(total.item() == world * (world + 1) / 2, f"all_reduce gave {total.item()}")
nodes = [None] * world
dist.all_gather_object(nodes, env["SLURMD_NODENAME"])
dist.destroy_process_group()
if rank == 0 and env.get("MLFLOW_RUN_ID"):
    import mlflow

    mlflow.log_metric("all_reduce", total.item())
(args.out / f"rank{rank}.json").write_text(json.dumps(
    {"rank": rank, "node": env["SLURMD_NODENAME"], "all_reduce": total.item(), "nodes": nodes,
     "run_id": env.get("MLFLOW_RUN_ID", "")}))
print(f"rank {rank} on {env['SLURMD_NODENAME']}: all_reduce={total.item()}", flush=True)
