"""One rank of an MPIJob launcher's mpirun: an mpi4py all-reduce, then what this rank saw."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: _report

from _report import arguments, check, environ, expected_sum, finish, rank_info  # noqa: E402

args = arguments()

from mpi4py import MPI  # noqa: E402

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
check(world == args.world, f"world size {world}, the test asked for {args.world}")
total = comm.allreduce(rank + 1, op=MPI.SUM)
check(total == expected_sum(world), f"allreduce gave {total}, expected {expected_sum(world)}")
env = environ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
              "OMPI_COMM_WORLD_LOCAL_SIZE", "DISTCOMP_TEST_MARK", "DISTCOMP_TEST_NODE", "K_MPI_JOB_ROLE")
peers = comm.allgather({"rank": rank, "node": env["DISTCOMP_TEST_NODE"]})
comm.Barrier()

finish(args.out, rank, world=world, all_reduce=total, peers=peers, rank_info=rank_info(), env=env)
