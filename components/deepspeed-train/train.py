"""DeepSpeed ZeRO stage 1 or 2 data-parallel training of a small MLP, one process per rank.

The task is teacher-student regression: a fixed random "teacher" MLP, drawn from ``--seed``,
labels Gaussian inputs (plus a little noise); the student learns to imitate it with MSE. Each
rank draws fresh samples every step from its own seeded stream (no data set to hold or shard);
the held-out loss at the end is measured on streams no rank trained on.

The DeepSpeed config is built here (``ds_config``): fp32, ZeRO ``--zero-stage`` (1 partitions
the optimizer state across the ranks, 2 the gradients too), gradient clipping and
accumulation, and a plain ``torch.optim.AdamW`` handed to ``deepspeed.initialize``: DeepSpeed's
fused optimizers need compiled ops, which a CPU-only install (DS_BUILD_OPS=0) does not have.
Communication is gloo on CPU and the accelerator's backend (NCCL) on GPU.

Rank 0 logs loss, learning rate and gradient norm per optimizer step, and the held-out loss
at the end, through ``distcomp.runtime``. Every rank takes part in ``save_checkpoint`` (each
writes its optimizer partition) into ``--out``; rank 0 also writes ``model.pt`` (plain
weights) and ``train.json`` (the ZeRO stage DeepSpeed ran, the partition sizes, the losses).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from distcomp import runtime

TAG = "final"  # the checkpoint's folder under --out


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="DeepSpeed ZeRO training of an MLP")
    parser.add_argument("--zero-stage", type=int, choices=(1, 2), default=2)
    parser.add_argument("--steps", type=int, default=50, help="optimizer steps")
    parser.add_argument("--micro-batch", type=int, default=32, help="samples per forward pass on each rank")
    parser.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--width", type=int, default=128, help="hidden width of the student")
    parser.add_argument("--clip", type=float, default=1.0, help="gradient clipping norm (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args()


def ds_config(args: argparse.Namespace, world: int) -> dict[str, Any]:
    return {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.grad_accum,
        "train_batch_size": args.micro_batch * args.grad_accum * world,
        "gradient_clipping": args.clip,
        "zero_optimization": {
            "stage": args.zero_stage,
            "overlap_comm": False,  # nothing to overlap with on CPU
            "contiguous_gradients": True,
            "reduce_bucket_size": 5e7,
            "allgather_bucket_size": 5e7,
        },
        "zero_allow_untested_optimizer": True,  # a client torch.optim optimizer under ZeRO
        "fp16": {"enabled": False},
        "bf16": {"enabled": False},
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


class Teacher:
    """A fixed random MLP drawn from ``seed`` that labels Gaussian inputs: what the student learns."""

    def __init__(self, seed: int, inputs: int = 32, hidden: int = 48, outputs: int = 8) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.w1 = torch.randn(inputs, hidden, generator=gen) / inputs ** 0.5
        self.w2 = torch.randn(hidden, outputs, generator=gen) / hidden ** 0.5

    def stream(self, stream: str, seed: int) -> torch.Generator:
        """An independent, reproducible source of samples (one per rank for training)."""
        return torch.Generator().manual_seed(zlib.crc32(f"{seed}/{stream}".encode()))

    def draw(self, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, self.w1.shape[0], generator=gen)
        return x, torch.tanh(x @ self.w1) @ self.w2 + 0.01 * torch.randn(n, self.w2.shape[1], generator=gen)


def main() -> None:
    args = parse_args()
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    accelerator = get_accelerator()
    on_cpu = accelerator.device_name() == "cpu"
    deepspeed.init_distributed(dist_backend="gloo" if on_cpu else accelerator.communication_backend_name(),
                               auto_mpi_discovery=False)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(args.seed)
    teacher = Teacher(args.seed)
    student = nn.Sequential(nn.Linear(teacher.w1.shape[0], args.width), nn.GELU(),
                            nn.Linear(args.width, args.width), nn.GELU(), nn.Linear(args.width, teacher.w2.shape[1]))
    optimizer = torch.optim.AdamW(student.parameters(), lr=args.lr, weight_decay=0.01)
    engine, _, _, _ = deepspeed.initialize(model=student, optimizer=optimizer, config=ds_config(args, world))
    stage = engine.zero_optimization_stage()
    device = engine.device
    params = sum(p.numel() for p in engine.module.parameters())
    # the optimizer state this rank holds: its partition of the fp32 master weights
    held = sum(p.numel() for p in engine.optimizer.single_partition_of_fp32_groups)
    partition = torch.tensor([float(held)], device=device)  # on the device: NCCL gathers nothing else
    partitions = [torch.zeros(1, device=device) for _ in range(world)]
    dist.all_gather(partitions, partition)
    runtime.log_params({"zero_stage": stage, "world_size": world, "device": str(device), "parameters": params,
                        "deepspeed": deepspeed.__version__, "optimizer": type(engine.optimizer).__name__,
                        "global_batch": engine.train_batch_size()})
    if rank == 0:
        print(f"ZeRO stage {stage} on {world} {device.type} ranks: {params} parameters, optimizer partitions "
              f"{[int(p.item()) for p in partitions]}, global batch {engine.train_batch_size()}", flush=True)

    loss_fn = nn.MSELoss()
    samples = teacher.stream(f"train/rank{rank}", args.seed)  # each rank its own samples, fresh every step
    history = []
    for step in range(args.steps):
        began, losses = time.perf_counter(), []
        for _ in range(args.grad_accum):
            x, y = teacher.draw(args.micro_batch, samples)
            loss = loss_fn(engine(x.to(device)), y.to(device))
            engine.backward(loss)
            engine.step()  # an optimizer step at the accumulation boundary only
            losses.append(loss.detach())
        mean = torch.stack(losses).mean().reshape(1)
        dist.all_reduce(mean)
        norm = engine.get_global_grad_norm()
        point = {"loss": mean.item() / world, "lr": engine.get_lr()[0], "step_seconds": time.perf_counter() - began}
        if norm is not None:
            point["grad_norm"] = float(norm)
        history.append(point)
        runtime.log_metrics(point, step=step)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step + 1}/{args.steps}: loss {point['loss']:.5f}", flush=True)

    engine.eval()
    with torch.no_grad():  # samples no rank trained on
        x, y = teacher.draw(8 * args.micro_batch, teacher.stream(f"val/rank{rank}", args.seed))
        val = loss_fn(engine(x.to(device)), y.to(device)).reshape(1)
    dist.all_reduce(val)
    val_loss = val.item() / world
    runtime.log_metric("val_loss", val_loss, step=args.steps)

    args.out.mkdir(parents=True, exist_ok=True)
    engine.save_checkpoint(str(args.out), tag=TAG, client_state={"steps": args.steps, "zero_stage": stage})
    if rank == 0:
        torch.save(engine.module.state_dict(), args.out / "model.pt")
        summary = {"zero_stage": stage, "partition_gradients": bool(engine.zero_optimization_partition_gradients()),
                   "world_size": world, "parameters": params, "optimizer": type(engine.optimizer).__name__,
                   "optimizer_partitions": [int(p.item()) for p in partitions], "checkpoint_tag": TAG,
                   "config": ds_config(args, world), "val_loss": val_loss, "history": history}
        (args.out / "train.json").write_text(json.dumps(summary, indent=1))
        runtime.log_artifact(args.out / "train.json")
        runtime.log_artifact(args.out / "model.pt", "model")
        print(f"held-out loss {val_loss:.5f}; checkpoint {args.out / TAG}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without finalising the interpreter: once the engine has used the group, torch's gloo threads
    # outlive destroy_process_group(), and an exit racing them aborts (SIGABRT) now and then.
    # os._exit skips the exit's flushes: deliver the MLflow points and the output first.
    # A failing rank raised above and never gets here: its exit code stays an error.
    runtime.finish()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
