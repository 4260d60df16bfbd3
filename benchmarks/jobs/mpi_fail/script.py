"""Rank 1 fails right after a barrier (writing the time to $BENCH_FAIL_STAMP first); rank 0 sleeps."""
import os
import sys
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
comm.Barrier()
if comm.Get_rank() == 1:
    stamp = os.environ.get("BENCH_FAIL_STAMP")
    if stamp:
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
    sys.exit(1)
time.sleep(10)  # the launcher has to stop this rank; mpirun alone waits for it
