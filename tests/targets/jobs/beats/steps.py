"""Log a falling loss for --steps steps on every rank, from the step after the last one rank 0
saved in runtime.checkpoint_dir(); rank 1 fails at --fail-at on the first attempt."""

from __future__ import annotations

import argparse
import os
import sys
import time

from distcomp import runtime

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--fail-at", type=int, default=-1)
parser.add_argument("--step-s", type=float, default=0.0)
args = parser.parse_args()

rank = int(os.environ["RANK"])
saved = runtime.checkpoint_dir() / "step"
start = int(saved.read_text()) + 1 if saved.exists() else 0
print(f"rank {rank}: attempt {runtime.restart_count()} starts at step {start}", flush=True)
for step in range(start, args.steps):
    if rank == 1 and step == args.fail_at and runtime.restart_count() == 0:
        print(f"rank 1: failing at step {step}", flush=True)
        sys.exit(3)
    runtime.log_metric("loss", 1.0 / (step + 1), step=step)
    if rank == 0:  # whole or not at all
        saved.with_suffix(".tmp").write_text(str(step))
        os.replace(saved.with_suffix(".tmp"), saved)
    time.sleep(args.step_s)
print(f"rank {rank}: done", flush=True)
