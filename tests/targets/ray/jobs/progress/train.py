"""Log loss = 1 / (step + 1) per step on every rank; rank 1 fails at --fail-at on the first attempt."""
import argparse
import os
import sys
import time

from distcomp import runtime

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--step-s", type=float, default=0.5)
p.add_argument("--fail-at", type=int, default=-1)
args = p.parse_args()
rank = int(os.environ["RANK"])
for step in range(args.steps):
    if rank == 1 and step == args.fail_at and runtime.restart_count() == 0:
        print(f"rank {rank}: failing at step {step}", flush=True)
        sys.exit(3)
    runtime.log_metric("loss", 1.0 / (step + 1), step=step)
    time.sleep(args.step_s)
print(f"rank {rank}: done", flush=True)
