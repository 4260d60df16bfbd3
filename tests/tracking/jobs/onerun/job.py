"""A rank of the one-run test job, written for plain MLflow (no distcomp import).

--mode twice: two top-level runs on every rank (rank 0 sets another experiment before the second),
a nested one inside the first, metrics in each;
--mode client: rank 0 makes a run of its own with MlflowClient (distcomp cannot redirect that);
--mode unhooked: rank 0 starts a Python that ignores PYTHONPATH (-I: no distcomp hook), which
makes a run; only the end-of-job search of the experiment can find it;
--mode elsewhere: rank 0 logs to a store of its own (mlflow.set_tracking_uri), which stays its own;
--mode slash: every rank sets the job's own store spelled with a trailing slash
(mlflow.set_tracking_uri(URI + "/")), opens a run and logs; rank 0 also makes a run with MlflowClient;
--mode env: only writes what this Python was given (PYTHONPATH, sitecustomize, imports, and
where the user's module `mymod` was found, if it was).
STATE_DIR/rankN.json says what the rank saw."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--mode", required=True)
p.add_argument("--state-dir", type=Path, required=True)
args = p.parse_args()
rank = int(os.environ["RANK"])
seen: dict[str, object] = {"pythonpath": os.environ.get("PYTHONPATH"),
                           "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
                           "user_site_ran": os.environ.get("USER_SITE_RAN"),
                           "imported": sorted(m for m in ("mlflow", "distcomp", "typing") if m in sys.modules)}

if args.mode == "env":
    try:
        import mymod  # a module of the user's, on the PYTHONPATH they gave
        seen["mymod"] = mymod.__file__
    except ImportError:
        seen["mymod"] = None

if args.mode == "twice":
    import mlflow

    with mlflow.start_run() as run:  # a Trainer's train()
        seen["first"] = run.info.run_id
        mlflow.log_param("seed", 100 + rank)  # another value on each rank: MLflow refuses a change
        for step in range(3):
            mlflow.log_metric("train_loss", 1.0 / (step + 1) + rank, step=step)
        with mlflow.start_run(nested=True) as child:
            seen["child"] = child.info.run_id
            mlflow.log_metric("fold_score", 0.5 + rank)
    if rank == 0:  # another experiment: MLflow would refuse to resume the job's run in it
        mlflow.set_experiment("scripts-own")
    with mlflow.start_run(run_name="evaluate") as run:  # then evaluate(): MLflow would make a second run
        seen["second"] = run.info.run_id
        mlflow.log_metric("eval_loss", 0.25 + rank)
    mlflow.log_metric("after", float(rank))  # no active run: MLflow starts one itself
    seen["after"] = mlflow.active_run().info.run_id
    mlflow.end_run()
elif args.mode == "client":
    import mlflow
    from mlflow import MlflowClient

    with mlflow.start_run() as run:
        mlflow.log_metric("train_loss", 1.0)
    if rank == 0:
        client = MlflowClient()
        side = client.create_run(os.environ["MLFLOW_EXPERIMENT_ID"], run_name="side-run")
        client.log_metric(side.info.run_id, "side_metric", 1.0)
        client.set_terminated(side.info.run_id)
        seen["side"] = side.info.run_id
elif args.mode == "slash":
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"] + "/")  # the job's store, spelled otherwise
    with mlflow.start_run() as run:
        mlflow.log_metric("train_loss", 1.0 + rank)
        seen["first"] = run.info.run_id
    if rank == 0:
        side = MlflowClient().create_run(os.environ["MLFLOW_EXPERIMENT_ID"], run_name="side-run")
        MlflowClient().set_terminated(side.info.run_id)
        seen["side"] = side.info.run_id
elif args.mode == "elsewhere" and rank == 0:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{args.state_dir / 'own.db'}")
    with mlflow.start_run(run_name="mine") as run:
        mlflow.log_metric("x", 1.0)
        seen["side"] = run.info.run_id
elif args.mode == "unhooked" and rank == 0:
    code = ("import os, mlflow; c = mlflow.MlflowClient(); "
            "r = c.create_run(os.environ['MLFLOW_EXPERIMENT_ID'], run_name='unhooked'); print(r.info.run_id)")
    seen["side"] = subprocess.run([sys.executable, "-I", "-c", code], check=True, capture_output=True,
                                  text=True).stdout.strip()

(args.state_dir / f"rank{rank}.json").write_text(json.dumps(seen))
