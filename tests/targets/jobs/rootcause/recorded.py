"""A rank whose entry point torch's @record wraps: rank 1 raises, and @record writes the
exception to TORCHELASTIC_ERROR_FILE, as under torchrun. Rank 0 waits to be stopped."""

import os
import sys
import time

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    print(f"rank {os.environ['RANK']} env {os.environ.get('MY_SETTING')}", flush=True)
    if os.environ["RANK"] == "1":
        raise ValueError("shard 3 of the training set is corrupt")
    time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
