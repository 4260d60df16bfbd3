"""Log a falling loss for --steps steps on every rank, from the step after the last one rank 0
saved in runtime.checkpoint_dir(); rank 1 fails at --fail-at on the first attempt. The ranks
step together, as longjob's gloo ranks do: each waits at every step until all have arrived
(files in the checkpoint folder, not a collective), so a rank that fails leaves the others
waiting at that step, with every earlier step logged."""

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

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
folder = runtime.checkpoint_dir()
saved, arrived = folder / "step", folder / "arrived"
arrived.mkdir(exist_ok=True)
attempt = runtime.restart_count()
start = int(saved.read_text()) + 1 if saved.exists() else 0
print(f"rank {rank}: attempt {attempt} starts at step {start}", flush=True)


def write(path: os.PathLike[str] | str, text: str) -> None:
    """Whole or not at all: a reader never sees half of it."""
    tmp = f"{path}.{rank}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def at(peer: int) -> tuple[int, int]:
    try:
        a, s = (arrived / str(peer)).read_text().split()
        return int(a), int(s)
    except (OSError, ValueError):
        return (-1, -1)


for step in range(start, args.steps):
    if rank == 1 and step == args.fail_at and attempt == 0:
        print(f"rank 1: failing at step {step}", flush=True)
        sys.exit(3)
    write(arrived / str(rank), f"{attempt} {step}")
    while any(at(peer) < (attempt, step) for peer in range(world)):
        time.sleep(0.01)
    runtime.log_metric("loss", 1.0 / (step + 1), step=step)
    if rank == 0:
        write(saved, str(step))
    time.sleep(args.step_s)
print(f"rank {rank}: done", flush=True)
