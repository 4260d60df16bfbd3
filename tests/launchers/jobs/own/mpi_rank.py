"""One rank started by the user's own mpirun: an MPI all-reduce, then what it saw."""

import json
import os
import sys
from pathlib import Path

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1)
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "world": world, "sum": total, "local_rank": int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]),
    "host": MPI.Get_processor_name(), "btl": os.environ.get("OMPI_MCA_btl")}))
