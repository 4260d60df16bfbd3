"""Plain MLflow, as a script written without distcomp logs: every rank starts a run of its own."""
import json
import os
import sys

import mlflow

rank = int(os.environ["RANK"])
with mlflow.start_run(run_name=f"my own run {rank}") as run:
    mlflow.log_param("lr", 0.1)
    mlflow.log_metric("loss", 1.0 + rank)
    run_id = run.info.run_id
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "run_id": run_id, "pythonpath": os.environ.get("PYTHONPATH", ""),
               "node": os.environ.get("DISTCOMP_RAY_NODE")}, f)
