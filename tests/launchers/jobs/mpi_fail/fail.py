"""An MPI rank of a job whose rank 1 fails: rank 1 says why and exits 3 (mpi4py finalizes at
exit, so mpirun alone would wait for the others); rank 0 sleeps 60 s, as a long step would."""

import sys
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
comm.Barrier()  # both ranks up: the failure comes in the middle of the job
if rank == 1:
    print("rank 1: loading the shard", flush=True)
    print("rank 1: shard 7 is corrupt, giving up", file=sys.stderr, flush=True)
    sys.exit(3)
print(f"rank {rank}: a long step", flush=True)
time.sleep(60)
