"""One rank of the shell-line job: what it was given (argv, cwd) and which rank it is."""

import json
import os
import sys
from pathlib import Path

out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / f"{os.getpid()}.json").write_text(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}))
