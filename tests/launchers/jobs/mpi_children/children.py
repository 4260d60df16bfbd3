"""A healthy MPI rank whose rank 1 first runs a child that fails, reads its exit code and goes
on (as a script running ``git describe`` outside a repository does): a Python subprocess that
calls ``sys.exit(1)``, or a forked child that does. Then both ranks meet, wait long enough for a
supervisor to act on a wrong report, allreduce and write ``OUT/rankN.json``."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

how, out = sys.argv[1], Path(sys.argv[2])
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
if rank == 1:
    if how == "subprocess":
        code = subprocess.run([sys.executable, "-c", "import sys; sys.exit(1)"]).returncode
    else:  # before MPI starts: the child ends through Python's own exit, its handlers and all
        pid = os.fork()
        if pid == 0:
            sys.exit(1)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 1:
        sys.exit(f"rank 1: the {how} child ended with {code}, not 1")
    print(f"rank 1: the {how} child exited with code 1; going on", flush=True)

from mpi4py import MPI  # noqa: E402

comm = MPI.COMM_WORLD
comm.Barrier()
time.sleep(3)  # a report of the child's exit would have stopped the job by now
total = comm.allreduce(rank + 1)
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "sum": total, "pid": os.getpid()}))
print(f"rank {rank}: done, sum {total}", flush=True)
