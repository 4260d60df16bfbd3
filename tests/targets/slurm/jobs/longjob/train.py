"""Train a tiny model for --steps steps on every rank (gloo), as a long job does on Slurm: resume
from the checkpoint in runtime.checkpoint_dir(), save it after every step, log the loss per step,
and leave at the first step after runtime.preempted() (every rank agrees through a collective, so
none is left waiting in one). Rank 1 fails at --fail-at on the first attempt. Each rank writes
CHECKPOINT/seen/attemptA.rankR.json: the attempt, where it started, whether it had notice."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from distcomp import runtime

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--fail-at", type=int, default=-1)
parser.add_argument("--step-s", type=float, default=0.0)
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
attempt = runtime.restart_count()
folder = runtime.checkpoint_dir()
checkpoint = folder / "state.pt"
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
start = 0
if checkpoint.exists():
    state = torch.load(checkpoint)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = state["step"] + 1
print(f"rank {rank}: attempt {attempt} starts at step {start} on {os.environ.get('SLURMD_NODENAME')}", flush=True)
seen = {"attempt": attempt, "rank": rank, "start": start, "node": os.environ.get("SLURMD_NODENAME"),
        "torchelastic": os.environ.get("TORCHELASTIC_RESTART_COUNT"), "checkpoint": str(folder),
        "preempted": False, "last": start - 1,
        "first_step_done": None}  # when (time.time()): benchmarks/slurm_requeue.py's restart overhead


def note() -> None:
    # Written whole then renamed: the test reads these while the rank runs.
    (folder / "seen").mkdir(exist_ok=True)
    path = folder / "seen" / f"attempt{attempt}.rank{rank}.json"
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(seen))
    os.replace(part, path)


note()
x = torch.arange(8.0).reshape(2, 4) / 8
y = torch.tensor([[1.0], [2.0]])
for step in range(start, args.steps):
    if rank == 1 and step == args.fail_at and attempt == 0:
        print(f"rank 1: failing at step {step}", flush=True)
        sys.exit(3)
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    for p in model.parameters():
        assert p.grad is not None
        dist.all_reduce(p.grad)
        p.grad /= world
    optimizer.step()
    if rank == 0:  # whole or not at all: a stop while saving keeps the last one
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                   checkpoint.with_suffix(".tmp"))
        os.replace(checkpoint.with_suffix(".tmp"), checkpoint)
    runtime.log_metric("loss", loss.item(), step=step)  # rank 0's points reach the job's run
    seen["last"] = step
    seen["first_step_done"] = seen["first_step_done"] or time.time()
    note()
    dist.barrier()
    time.sleep(args.step_s)
    notice = torch.tensor([1 if runtime.preempted() else 0])
    dist.all_reduce(notice, op=dist.ReduceOp.MAX)
    if notice.item() and step + 1 < args.steps:
        seen["preempted"] = runtime.preempted()
        note()
        print(f"rank {rank}: notice given; leaving after step {step}, checkpoint saved", flush=True)
        break
else:
    print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
