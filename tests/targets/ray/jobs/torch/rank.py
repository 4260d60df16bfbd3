"""A gloo all-reduce across the nodes; rank 0 logs a metric to the job's MLflow run."""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--fail-rank", type=int, default=-1)
p.add_argument("--recover-at", type=int, default=-1)
p.add_argument("--sleep", type=float, default=0)
args = p.parse_args()
rank = int(os.environ["RANK"])
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])  # the Topology's {{restart}}: 0, then 1, 2, ...
print(f"rank {rank} of {os.environ['WORLD_SIZE']} on {os.environ.get('DISTCOMP_RAY_NODE')}", flush=True)
if rank == args.fail_rank and not 0 <= args.recover_at <= restart:
    print(f"rank {rank} gives up on purpose", flush=True)
    sys.exit(5)
dist.init_process_group("gloo")
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
if rank == 0:
    from distcomp.runtime import flush, log_metric
    log_metric("allreduce", float(t.item()))
    flush()
with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": int(os.environ["WORLD_SIZE"]), "sum": t.item(),
               "node": os.environ.get("DISTCOMP_RAY_NODE"), "master": os.environ["MASTER_ADDR"],
               "run_id": os.environ.get("MLFLOW_RUN_ID", ""), "restart": restart,
               "max_restarts": int(os.environ["TORCHELASTIC_MAX_RESTARTS"])}, f)
time.sleep(args.sleep)
dist.destroy_process_group()
