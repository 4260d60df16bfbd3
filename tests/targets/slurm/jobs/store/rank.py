"""One rank of a job whose code came through the object store: where it runs, and a gloo all-reduce."""

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from lib.words import GREETING

p = argparse.ArgumentParser()
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
dist.destroy_process_group()
args.out.mkdir(parents=True, exist_ok=True)
(args.out / f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "node": os.environ["SLURMD_NODENAME"], "cwd": os.getcwd(), "greeting": GREETING,
    "all_reduce": total.item(), "run_id": os.environ.get("MLFLOW_RUN_ID")}))
print(f"rank {rank} on {os.environ['SLURMD_NODENAME']} in {os.getcwd()}: all_reduce={total.item()}", flush=True)
if rank == 0:
    import mlflow

    mlflow.log_metric("all_reduce", total.item())
