"""The script of component.yaml: each rank writes rank-N.txt into --result."""

import argparse
import os

from distcomp import runtime

parser = argparse.ArgumentParser()
parser.add_argument("--greeting", required=True)
parser.add_argument("--repeat", type=int, default=1)
parser.add_argument("--result", required=True)
args = parser.parse_args()

me = runtime.rank_info()  # the same whichever launcher started the rank
os.makedirs(args.result, exist_ok=True)
with open(os.path.join(args.result, f"rank-{me.rank}.txt"), "w") as f:
    f.write(f"{args.greeting} from rank {me.rank} of {me.world_size}\n" * args.repeat)
runtime.log_metric("lines", args.repeat, step=0)  # rank 0's lands in the job's MLflow run
