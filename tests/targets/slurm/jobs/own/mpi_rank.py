"""One rank started by the user's own mpirun in the batch step: an MPI all-reduce, and its Slurm node."""

import json
import os
import sys
from pathlib import Path

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1)
out = Path(sys.argv[sys.argv.index("--out") + 1])
(out / f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "world": world, "sum": total, "node": os.environ.get("SLURMD_NODENAME", ""),
    "hostfile": Path(os.environ["AZUREML_MPI_HOSTFILE"]).read_text().split("\n")[:2]}))
