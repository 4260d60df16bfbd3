"""A rank of the tracking test job. Metrics carry the rank that logged them, so a test can
tell that only rank 0's reached MLflow. STATE_DIR/rankN.ready says a rank is up (and, for
rank 0, that what it logged is in the store)."""

import argparse
import os
import sys
import time
from pathlib import Path

from distcomp import runtime

p = argparse.ArgumentParser()
p.add_argument("--mode", required=True)
p.add_argument("--bad-rank", type=int, default=2)
p.add_argument("--state-dir", type=Path, required=True)
p.add_argument("--linger", type=float, default=0.0)
p.add_argument("--points", type=int, default=5)
p.add_argument("--every", type=float, default=0.0)
args = p.parse_args()
info = runtime.rank_info()
rank = info.rank
ready = args.state_dir / f"rank{rank}.ready"

if args.mode == "mlflow":  # a script written for plain MLflow: a run on every rank
    import mlflow

    with mlflow.start_run() as run:
        mlflow.log_metric(f"seen_rank{rank}", 1.0)
        ready.write_text(run.info.run_id)
    sys.exit(0)

runtime.log_params({"logged_by": rank, "world": info.world_size})
for step in range(args.points):
    runtime.log_metrics({"loss": 1.0 / (step + 1), "rank": float(rank)}, step=step)
    time.sleep(args.every)
if rank == 0:
    runtime.flush()
ready.write_text(str(os.getpid()))

if args.mode == "fail" and rank == args.bad_rank:
    while not (args.state_dir / "rank0.ready").exists():  # fail once rank 0's metrics are stored
        time.sleep(0.05)
    print(f"rank {rank} fails on purpose", flush=True)
    sys.exit(3)
if args.mode in ("fail", "hang"):
    time.sleep(120)  # stopped by distcomp
time.sleep(args.linger)
print(f"rank {rank} done", flush=True)
