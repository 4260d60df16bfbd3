"""A function component for MPI (mpi4py): each rank sums its share of 1..count, and
``MPI_Allreduce`` adds the shares up on every rank.

    distcomp run examples/mpi-function/train.py:train --nproc-per-node 2 -o result=out/

The launcher is ``mpi`` (mpirun starts the ranks); every rank runs ``train`` with its values
typed (``count`` an int, ``rounds`` an int); rank 0 logs to MLflow and writes the result."""

from __future__ import annotations

import json
import os
import time

from stats import expected, share  # a sibling module: it travels with the function

import distcomp
from distcomp import runtime


@distcomp.component(name="mpi-function", version="1.0.0", launcher="mpi", nproc_per_node=2)
def train(result: distcomp.Output, count: int = 1000, rounds: int = 3) -> None:
    """Sums 1..count across the ranks with MPI_Allreduce and checks the total."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = sum(share(count, rank, size))
    totals = []
    for step in range(rounds):
        began = time.perf_counter()
        totals.append(comm.allreduce(mine, op=MPI.SUM))
        runtime.log_metric("allreduce_us", (time.perf_counter() - began) * 1e6, step=step)  # rank 0's only
    if any(total != expected(count) for total in totals):
        raise RuntimeError(f"rank {rank}: MPI_Allreduce gave {totals}, expected {expected(count)}")
    if rank == 0:
        os.makedirs(result, exist_ok=True)
        with open(os.path.join(result, "result.json"), "w") as f:
            json.dump({"world_size": size, "count": count, "total": totals[-1], "rounds": rounds}, f)
