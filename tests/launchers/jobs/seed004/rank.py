"""One MPI rank running seed 004's snippet in both branches; what it set goes to $OUT/rank<N>.json."""

import json
import os
import sys
from pathlib import Path

from aml_env import get_local_size, get_rank, get_world_size, set_environment_variables_for_nccl_backend

seen = {}
for single_node in (False, True):
    saved = dict(os.environ)
    set_environment_variables_for_nccl_backend(single_node=single_node)
    seen["single" if single_node else "multi"] = {k: os.environ[k] for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                                             "MASTER_PORT")}
    os.environ.clear()
    os.environ.update(saved)
out = Path(os.environ["OUT"])
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{get_rank()}.json").write_text(json.dumps({
    "rank": get_rank(), "world": get_world_size(), "local_size": get_local_size(), "seen": seen,
    "nccl_socket_ifname": os.environ["NCCL_SOCKET_IFNAME"], "master_node": os.environ["AZ_BATCHAI_MPI_MASTER_NODE"],
    "batch_master": os.environ["AZ_BATCH_MASTER_NODE"]}))
sys.stdout.flush()
