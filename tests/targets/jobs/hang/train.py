"""Gloo ranks step together; in mode stall, rank --stall-rank stops stepping after --stall-at
steps in a plain function (``stall_here``) while the others wait for it in dist.all_reduce."""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

from distcomp import runtime

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="stall", choices=["stall", "steady", "silent"])
parser.add_argument("--steps", type=int, default=1000)
parser.add_argument("--stall-at", type=int, default=3)
parser.add_argument("--stall-rank", type=int, default=1)
parser.add_argument("--step-s", type=float, default=0.2)
args = parser.parse_args()


def stall_here() -> None:
    while True:
        time.sleep(1)  # the line the report names


dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"rank {rank}: pid {os.getpid()}", flush=True)
if args.mode == "silent":  # a start-up longer than the hang timeout, before the first beat
    time.sleep(args.steps * args.step_s)
else:
    for step in range(args.steps):
        if args.mode == "stall" and rank == args.stall_rank and step == args.stall_at:
            stall_here()
        grad = torch.ones(4)
        dist.all_reduce(grad)
        runtime.log_metric("loss", 1.0 / (step + 1), step=step)
        time.sleep(args.step_s)
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
