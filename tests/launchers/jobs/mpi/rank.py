"""One MPI rank under mpirun: Open MPI's env, Azure ML's hostfile and master node, mpi4py allreduce."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: the shared _contract helpers

from _contract import (LOCALHOST, RankInfo, absent, arguments, check, env, expect, expect_cpu_threads,  # noqa: E402
                       expect_rank_info, expected_sum, finish, port_of)

args = arguments()
nodes, per_node = args.nodes, args.per_node
world = nodes * per_node

rank = int(env("OMPI_COMM_WORLD_RANK"))
check(0 <= rank < world, f"OMPI_COMM_WORLD_RANK={rank} is outside 0..{world - 1}")
local, node = rank % per_node, rank // per_node  # --map-by slot fills node0's slots first
expect("OMPI_COMM_WORLD_SIZE", world)
expect("OMPI_COMM_WORLD_LOCAL_RANK", local)
expect("OMPI_COMM_WORLD_LOCAL_SIZE", per_node)
expect("DISTCOMP_TEST_MARK", "mpi")  # the spec's environment_variables, forwarded with -x
expect_cpu_threads(nodes, per_node)
absent("torch", "tensorflow", "kubeflow")

# Azure ML's MPI contract: a hostfile of "host slots=N" lines and the master node
hostfile = Path(env("AZUREML_MPI_HOSTFILE"))
check(hostfile.is_absolute() and hostfile.is_file(), f"AZUREML_MPI_HOSTFILE={hostfile} is not a file")
hosts = hostfile.read_text().splitlines()
expected_hosts = ["localhost"] if nodes == 1 else [f"node{n}" for n in range(nodes)]
check(hosts == [f"{h} slots={per_node}" for h in expected_hosts], f"hostfile {hostfile} holds {hosts}")
master_host, sep, master_port = env("AZ_BATCH_MASTER_NODE").partition(":")
check(sep == ":" and master_host == LOCALHOST, f"AZ_BATCH_MASTER_NODE={env('AZ_BATCH_MASTER_NODE')!r} is not {LOCALHOST}:PORT")
port = port_of(master_port, "AZ_BATCH_MASTER_NODE's port")
info = expect_rank_info(RankInfo(rank, world, local, per_node, node, LOCALHOST, port, "openmpi"))

from mpi4py import MPI  # noqa: E402  (after the env checks: a broken env should say so first)

comm = MPI.COMM_WORLD
check((comm.Get_rank(), comm.Get_size()) == (rank, world),
      f"MPI.COMM_WORLD says rank {comm.Get_rank()} of {comm.Get_size()}, env says {rank} of {world}")
total = comm.allreduce(rank + 1, op=MPI.SUM)
check(total == expected_sum(world), f"allreduce gave {total}, expected {expected_sum(world)}")
peers = comm.allgather({"rank": rank, "master": env("AZ_BATCH_MASTER_NODE"), "hostfile": str(hostfile)})
check(len({(p["master"], p["hostfile"]) for p in peers}) == 1, f"ranks disagree on the master or hostfile: {peers}")

# lines for the output demux: mpirun --output tag interleaves them; distcomp splits them per rank
tag = f"@@rank={rank}@@"
print(f"stdout line {tag}", flush=True)
print(f"stderr line {tag}", file=sys.stderr, flush=True)
comm.Barrier()

finish(args.out, rank, all_reduce=total, rank_info=info, peers=peers, hostfile=str(hostfile), hostfile_lines=hosts,
       env={k: env(k) for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE", "AZUREML_MPI_HOSTFILE", "AZ_BATCH_MASTER_NODE")})
