"""A rank of the MLflow target's test job. It prints what it was given (the test finds the
-P values in the rank logs), writes PID_DIR/rankN.pid once its group is up, and logs metrics
whose value is its rank, so a test can tell that only rank 0's reached MLflow."""

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from distcomp import runtime

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, required=True)
p.add_argument("--tag", required=True)
p.add_argument("--lr", type=float, required=True)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--fail-rank", type=int)
p.add_argument("--pid-dir", type=Path)
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()
info = runtime.rank_info()
rank = info.rank
print(f"rank {rank}/{info.world_size} got tag={args.tag!r} steps={args.steps} lr={args.lr}", flush=True)

dist.init_process_group("gloo")
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
if args.pid_dir is not None:
    args.pid_dir.mkdir(parents=True, exist_ok=True)
    tmp = args.pid_dir / f".rank{rank}.{os.getpid()}"
    tmp.write_text(str(os.getpid()))
    tmp.replace(args.pid_dir / f"rank{rank}.pid")

runtime.log_params({"tag_seen": args.tag, "logged_by": rank})
for step in range(args.steps):
    runtime.log_metrics({"rank": float(rank), "loss": args.lr / (step + 1), "allreduce": total.item()}, step=step)
if args.fail_rank == rank:
    runtime.flush()
    print(f"rank {rank} fails on purpose", flush=True)
    # at once: left to the interpreter, gloo's teardown can abort (SIGABRT) while the peer is
    # still connected, and the test checks this exit code
    os._exit(3)
time.sleep(args.sleep)
if rank == 0:
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tag.txt").write_text(args.tag)
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
