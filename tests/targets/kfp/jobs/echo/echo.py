"""A rank that records what it was started with: its argv and rank, as out/rankN.json."""

import json
import os
import sys
from pathlib import Path

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
argv = sys.argv[1:]
out = Path(argv[argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "world_size": world, "argv": argv}))
print(f"echo rank {rank} of {world}", flush=True)
if int(argv[argv.index("--fail-rank") + 1]) == rank:
    sys.exit(3)
