"""One rank of the quoting job: the argv it was given, as rank<RANK>.json in --out."""

import json
import os
import sys
from pathlib import Path

out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{os.environ['RANK']}.json").write_text(json.dumps({"argv": sys.argv[1:], "node": os.environ.get("SLURMD_NODENAME")}))
