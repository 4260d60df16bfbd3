"""Seed 003's MPI slots on Slurm: the sbatch script asks for the job's plan (4 nodes x 4 tasks,
the slots from Standard_NC24's GPUs), and the hostfile the user's mpirun reads has them, so its
-np 16 makes the same world as locally and in an MPIJob. (Compiled only: the dev cluster's 2
nodes of 2 CPUs cannot hold 4 x 4 tasks: a job of 2 workers x 2 GPUs runs there instead.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distcomp
from distcomp.errors import UsageError
from distcomp.records import JobState

from .conftest import JOBS, record_of

OWN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "own"


@pytest.mark.parametrize("name", ["seed-mpi-gpus", "seed-mpi-k8s", "seed-mpi-slots"])
def test_the_sbatch_script_has_the_slots_the_users_mpirun_needs(name: str) -> None:
    text = distcomp.compile(str(OWN / f"{name}.yaml"), "slurm").text
    assert "#SBATCH --nodes=4" in text and "#SBATCH --ntasks-per-node=4" in text
    record = record_of(text)
    assert (record["nodes"], record["world_size"]) == (4, 16)
    assert record["files"]["hostfile"].splitlines() == [f"{{{{node:{n}}}}} slots=4" for n in range(4)]


def test_an_np_over_the_slots_is_refused_at_compile() -> None:
    with pytest.raises(UsageError, match=r"-np 16\), but the spec's 2 node\(s\) x 4 slot\(s\) \(instance_type "
                                         r"Standard_NC24: 4 GPU\(s\)\) make 8"):
        distcomp.compile(str(OWN / "seed-mpi-gpus.yaml"), "slurm", nodes=2)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["seed-gpus", "seed-gpus-bare"])
def test_slots_from_the_workers_gpus_form_the_world_on_the_real_cluster(name: str, job_dir: Path) -> None:
    """The user's mpirun -np 4, or distcomp's: before, 2 nodes x 1 slot, so the first failed with
    "not enough slots"; and with 2 slots, Open MPI took the srun step's one task per node for
    the slots instead of the hostfile's, so both failed so."""
    outcome = distcomp.submit(JOBS / "own" / f"{name}.yaml", "slurm", job_dir=str(job_dir), tracking=False).wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    ranks = [json.loads((Path(outcome.outputs["out"]) / f"rank{r}.json").read_text()) for r in range(4)]
    assert [(r["node"], r["world"], r["sum"]) for r in ranks] == [("n1", 4, 10), ("n1", 4, 10), ("n2", 4, 10),
                                                                   ("n2", 4, 10)]
    assert ranks[0]["hostfile"] == ["n1 slots=2", "n2 slots=2"]
