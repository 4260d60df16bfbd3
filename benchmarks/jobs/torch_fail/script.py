"""Rank 1 fails right after init (writing the time to $BENCH_FAIL_STAMP first); rank 0 sleeps."""
import os
import time

import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    stamp = os.environ.get("BENCH_FAIL_STAMP")
    if stamp:
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
    os._exit(1)
time.sleep(60)  # the launcher has to stop this rank
