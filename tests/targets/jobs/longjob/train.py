"""Train a tiny model for --steps steps on every rank (gloo), as a long job does: resume from
the checkpoint in runtime.checkpoint_dir(), save it after every step, log the loss per step,
and leave at the first step after runtime.preempted() (every rank agrees, through a
collective, so none is left waiting in one). Rank 1 fails at --fail-at on the first attempt."""

from __future__ import annotations

import argparse
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
parser.add_argument("--progress", default="")
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
checkpoint = runtime.checkpoint_dir() / "state.pt"
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
start = 0
if checkpoint.exists():
    state = torch.load(checkpoint)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = state["step"] + 1
print(f"rank {rank}: attempt {runtime.restart_count()} starts at step {start}", flush=True)

x = torch.arange(8.0).reshape(2, 4) / 8
y = torch.tensor([[1.0], [2.0]])
for step in range(start, args.steps):
    if rank == 1 and step == args.fail_at and runtime.restart_count() == 0:
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
    runtime.log_metric("loss", loss.item(), step=step)  # rank 0's points reach the job's run
    if rank == 0:  # whole or not at all: a stop while saving keeps the last one
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                   checkpoint.with_suffix(".tmp"))
        os.replace(checkpoint.with_suffix(".tmp"), checkpoint)
        if args.progress:
            with open(args.progress, "w") as f:
                f.write(f"{step}\n")
    dist.barrier()
    time.sleep(args.step_s)
    notice = torch.tensor([1 if runtime.preempted() else 0])
    dist.all_reduce(notice, op=dist.ReduceOp.MAX)
    if notice.item() and step + 1 < args.steps:
        print(f"rank {rank}: notice given; leaving after step {step}, checkpoint saved", flush=True)
        break
else:
    print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
