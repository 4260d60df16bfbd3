"""One rank: a gloo all-reduce of rank + 1, then OUT/rankN.json with what it saw."""

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--data", type=Path, required=True)
p.add_argument("--fail-rank", type=int, required=True)
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()

if int(os.environ["RANK"]) == args.fail_rank:
    print(f"rank {args.fail_rank}: failing on purpose", flush=True)
    sys.exit(3)
dist.init_process_group("gloo")  # env://, from torchrun
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
dist.barrier()
dist.destroy_process_group()
args.out.mkdir(parents=True, exist_ok=True)
record = {"rank": rank, "world": world, "sum": total.item(), "pod": os.environ.get("HOSTNAME"),
          "node_rank": os.environ.get("PET_NODE_RANK"), "data": args.data.read_text()}
(args.out / f"rank{rank}.json").write_text(json.dumps(record))
print(f"rank {rank} of {world}: all_reduce {total.item()}", flush=True)
