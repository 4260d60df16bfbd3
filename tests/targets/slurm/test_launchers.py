"""More launchers on the real two-node Slurm cluster: a command that brings its own mpirun
(seed style: once in the batch step, over both nodes), its own torchrun (once per node with
NODE_RANK), and DeepSpeed (one process per rank, by the node agent)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

import distcomp
from distcomp.records import JobState

from .conftest import JOBS


def _ranks(outcome: distcomp.JobOutcome, name: str, world: int) -> list[dict]:  # type: ignore[type-arg]
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    return [json.loads((Path(outcome.outputs[name]) / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.mark.slow
def test_own_mpirun_runs_once_over_both_nodes(job_dir: Path) -> None:
    job = distcomp.submit(JOBS / "own" / "mpirun.yaml", "slurm", job_dir=str(job_dir), tracking=False)
    outcome = job.wait()
    ranks = _ranks(outcome, "out", 2)
    assert [(r["node"], r["world"], r["sum"]) for r in ranks] == [("n1", 2, 3), ("n2", 2, 3)]
    assert ranks[0]["hostfile"] == ["n1 slots=1", "n2 slots=1"]
    folder = Path(outcome.details["folder"])
    # the user's mpirun is node 0's one replica, as it is: not inside another mpirun, nor one per
    # node; node 1's agent has nothing to start (mpirun reaches that node through Slurm)
    record = json.loads((folder / "node.json").read_text())
    assert [(r["name"], r["node"], r["argv"]) for r in record["replicas"]] == [("launcher0", 0, ["{{command}}"])]
    assert record["command"][:2] == ["/bin/sh", "-c"] and shlex.split(record["command"][2]) == [
        "mpirun", "-np", "2", "--hostfile", "$AZUREML_MPI_HOSTFILE", "python", "mpi_rank.py", "--out",
        outcome.outputs["out"]]
    assert sorted(p.name for p in (folder / "logs").iterdir()) == ["launcher0.log"]
    script = (folder / "job.sbatch").read_text()
    assert [line for line in script.splitlines() if line.startswith("srun ")] == [
        'srun --kill-on-bad-exit=1 --nodes=2 --ntasks=2 --cpus-per-task="$DISTCOMP_CPUS" \\']


@pytest.mark.slow
def test_own_torchrun_runs_once_per_node(job_dir: Path) -> None:
    job = distcomp.submit(JOBS / "own" / "torchrun.yaml", "slurm", job_dir=str(job_dir), tracking=False)
    ranks = _ranks(job.wait(), "out", 4)
    assert [(r["node"], r["node_rank"], r["local_rank"], r["world"], r["sum"]) for r in ranks] == [
        ("n1", "0", 0, 4, 10.0), ("n1", "0", 1, 4, 10.0), ("n2", "1", 0, 4, 10.0), ("n2", "1", 1, 4, 10.0)]
    folder = Path(job.wait().details["folder"])
    assert sorted(p.name for p in (folder / "logs").iterdir()) == ["node0.log", "node1.log"]  # one per node


@pytest.mark.slow
def test_deepspeed_across_both_nodes(job_dir: Path) -> None:
    outcome = distcomp.submit(JOBS / "deepspeed" / "component.yaml", "slurm", nodes=2, job_dir=str(job_dir),
                              tracking=False).wait()
    ranks = _ranks(outcome, "result", 2)
    assert [(r["node"], r["world"], r["all_reduce"]) for r in ranks] == [("n1", 2, 3.0), ("n2", 2, 3.0)]
