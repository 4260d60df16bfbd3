"""Two mpi4py ranks step together; rank 1 stops stepping after 3 steps in ``stall_here`` while
rank 0 waits for it in comm.Allreduce (C code: no Python frame of mpi4py's own)."""

from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI

from distcomp import runtime


def stall_here() -> None:
    while True:
        time.sleep(1)  # the line the report names


comm = MPI.COMM_WORLD
rank = comm.Get_rank()
print(f"rank {rank}: pid {os.getpid()}", flush=True)
for step in range(1000):
    if rank == 1 and step == 3:
        stall_here()
    total = np.zeros(1)
    comm.Allreduce(np.ones(1), total)
    runtime.progress(step)
    time.sleep(0.2)
