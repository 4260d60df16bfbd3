"""One rank of seed 003's MPI job: an MPI all-reduce, then what it saw, in $OUT/rank<N>.json."""

import json
import os
from pathlib import Path

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1)
out = Path(os.environ["OUT"])
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "world": world, "sum": total, "local_rank": int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]),
    "btl": os.environ.get("OMPI_MCA_btl"), "nccl_debug": os.environ.get("NCCL_DEBUG")}))
