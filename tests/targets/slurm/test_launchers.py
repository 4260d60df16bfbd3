"""More launchers on the real two-node Slurm cluster: a command that brings its own mpirun
(seed style: once in the batch step, over both nodes), its own torchrun (once per node with
NODE_RANK), and DeepSpeed (one srun task per rank)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distcomp
from distcomp.outcome import JobState

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
    script = (Path(outcome.details["folder"]) / "job.sbatch").read_text()
    # the user's mpirun is the batch step's own command: not inside srun or another mpirun
    lines = script.splitlines()
    assert not any(line.startswith("srun ") for line in lines)
    assert [line for line in lines if "mpirun -np" in line] == [
        f"/bin/sh -c 'mpirun -np 2 --hostfile $AZUREML_MPI_HOSTFILE python mpi_rank.py --out {outcome.outputs['out']}'"]


@pytest.mark.slow
def test_own_torchrun_runs_once_per_node(job_dir: Path) -> None:
    job = distcomp.submit(JOBS / "own" / "torchrun.yaml", "slurm", job_dir=str(job_dir), tracking=False)
    ranks = _ranks(job.wait(), "out", 4)
    assert [(r["node"], r["node_rank"], r["local_rank"], r["world"], r["sum"]) for r in ranks] == [
        ("n1", "0", 0, 4, 10.0), ("n1", "0", 1, 4, 10.0), ("n2", "1", 0, 4, 10.0), ("n2", "1", 1, 4, 10.0)]
    folder = Path(job.wait().details["folder"])
    assert sorted(p.name for p in (folder / "logs").iterdir()) == ["rank0.log", "rank1.log"]  # one per node


@pytest.mark.slow
def test_deepspeed_across_both_nodes(job_dir: Path) -> None:
    outcome = distcomp.submit(JOBS / "deepspeed" / "component.yaml", "slurm", nodes=2, job_dir=str(job_dir),
                              tracking=False).wait()
    ranks = _ranks(outcome, "result", 2)
    assert [(r["node"], r["world"], r["all_reduce"]) for r in ranks] == [("n1", 2, 3.0), ("n2", 2, 3.0)]
