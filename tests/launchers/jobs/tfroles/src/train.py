"""Each task reports its TF_CONFIG task and the MAGIC it was given (no TensorFlow needed).

A parameter server writes its report and then serves (sleeps) until the job stops it; the
workers wait for every parameter server's report first, so none is stopped before it wrote."""

import argparse
import json
import os
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--magic", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
report = {"task": task, "magic": args.magic, "env": os.environ.get("MAGIC"),
          "cluster": {role: len(members) for role, members in config["cluster"].items()}}
(out / f"{task['type']}-{task['index']}.json").write_text(json.dumps(report))
print(f"{task['type']} {task['index']}: magic {args.magic}", flush=True)
if task["type"] == "ps":
    time.sleep(300)  # serves until the job stops it
else:
    deadline = time.monotonic() + 120
    while len(list(out.glob("ps-*.json"))) < len(config["cluster"].get("ps", [])) and time.monotonic() < deadline:
        time.sleep(0.05)
