"""Several jobs starting at once on a SQLite store that does not exist yet: MLflow creates the
database once, under a lock beside it, and every job runs; an ORM's text is never the message."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from ..targets._jobs import clean_env
from ._probe import PROBE, WAIT

JOBS = 6
# each job imports distcomp, says it is ready, and starts when the test says go: all at once
AT_ONCE = """
import os, sys, time
from distcomp.cli import main
ready, go = sys.argv[1], sys.argv[2]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.slow
def test_jobs_starting_together_on_a_new_database_all_run(tmp_path: Path) -> None:
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    go = tmp_path / "go"
    procs = []
    for i in range(JOBS):
        state = tmp_path / f"state{i}"
        state.mkdir()
        argv = ["run", str(PROBE / "torch.yaml"), "--quiet", "--nproc-per-node", "1", "--experiment", "together",
                "--run-dir", str(tmp_path / f"run{i}"), "--input", f"state_dir={state}"]
        procs.append(subprocess.Popen([sys.executable, "-c", AT_ONCE, str(tmp_path / f"ready{i}"), str(go), *argv],
                                      cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=clean_env(MLFLOW_TRACKING_URI=f"sqlite:///{db}")))
    deadline = time.monotonic() + WAIT
    while len(list(tmp_path.glob("ready*"))) < JOBS:
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.05)
    go.touch()
    outcomes = [(p.wait(WAIT * 2), p.communicate()[1]) for p in procs]
    for rc, err in outcomes:
        assert rc == 0, err[-3000:]
        assert "Traceback" not in err and "sqlalchemy" not in err.lower() and "alembic" not in err.lower(), err
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db", "mlflow.db.lock"]
    client = MlflowClient(f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("together").experiment_id])
    assert len(runs) == JOBS and {r.info.status for r in runs} == {"FINISHED"}
    assert all(len(client.get_metric_history(r.info.run_id, "loss")) == 5 for r in runs)
