"""One mpi4py all-reduce (buffer and pickle); exits 1 if a sum is wrong."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
send = np.full(4, rank + 1, dtype=np.float64)
recv = np.empty_like(send)
comm.Allreduce(send, recv, op=MPI.SUM)
total = comm.allreduce(rank + 1, op=MPI.SUM)
expected = world * (world + 1) // 2
if not (np.all(recv == expected) and total == expected):
    print(f"rank {rank}: all-reduce gave {recv.tolist()} / {total}, expected {expected}", file=sys.stderr)
    sys.exit(1)
print(f"rank {rank}/{world}: all-reduce ok ({expected})")
