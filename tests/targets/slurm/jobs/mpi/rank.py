"""One MPI rank under the slurm target: the allocation's hostfile, rank_info(), an mpi4py allreduce."""

import argparse
import json
import os
import sys
from pathlib import Path

from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()
comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
hosts = Path(os.environ["AZUREML_MPI_HOSTFILE"]).read_text().split("\n")
if hosts[:2] != ["n1 slots=1", "n2 slots=1"] or os.environ.get("DISTCOMP_TEST_MARK") != "mpi":
    print(f"contract broken: hostfile {hosts}", flush=True)
    sys.exit(2)

from distcomp.runtime import rank_info  # noqa: E402

info = rank_info()
total = comm.allreduce(rank + 1, op=MPI.SUM)
node = os.environ.get("SLURMD_NODENAME", "")
nodes = comm.allgather(node)
(args.out / f"rank{rank}.json").write_text(json.dumps(
    {"rank": rank, "world": world, "node": node, "nodes": nodes, "all_reduce": total,
     "rank_info": [info.rank, info.world_size, info.source]}))
print(f"rank {rank} on {node}: allreduce={total}", flush=True)
