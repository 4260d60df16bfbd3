"""On Slurm too, only a rank itself reports its end to the rank watcher: an MPI job over both
nodes whose rank 1 runs a Python child that exits 1, reads its code and goes on, succeeds, and
its MLflow run is FINISHED (it used to be stopped: "rank 1 exited with code 1")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distcomp
from distcomp.records import JobState

CHILDREN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "mpi_children" / "component.yaml"


@pytest.mark.slow
def test_a_rank_whose_python_child_fails_goes_on_and_the_job_succeeds(job_dir: Path) -> None:
    outcome = distcomp.submit(CHILDREN, "slurm", nodes=2, nproc_per_node=1, inputs={"child": "subprocess"},
                              job_dir=str(job_dir)).wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    ranks = [json.loads((Path(outcome.outputs["result"]) / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["sum"]) for r in ranks] == [(0, 3), (1, 3)]
    folder = Path(outcome.details["folder"])
    assert "the subprocess child exited with code 1; going on" in (folder / "logs" / "rank1.log").read_text()
    assert outcome.tracking is not None

    from mlflow import MlflowClient

    run = MlflowClient(f"sqlite:///{job_dir}/mlflow.db").get_run(outcome.tracking.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.state"] == "succeeded"
