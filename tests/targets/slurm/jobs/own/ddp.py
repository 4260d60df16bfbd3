"""One process started by the user's own torchrun (once per Slurm node): a gloo all-reduce, its node."""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
out = Path(sys.argv[sys.argv.index("--out") + 1])
(out / f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "world": world, "sum": total.item(), "local_rank": int(os.environ["LOCAL_RANK"]),
    "node_rank": os.environ.get("NODE_RANK"), "node": os.environ.get("SLURMD_NODENAME", "")}))
dist.destroy_process_group()
