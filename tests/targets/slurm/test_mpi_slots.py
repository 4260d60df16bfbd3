"""Seed 003's MPI slots on Slurm: the sbatch script asks for the job's plan (4 nodes x 4 tasks,
the slots from Standard_NC24's GPUs), and the hostfile the user's mpirun reads has them, so its
-np 16 makes the same world as locally and in an MPIJob. (Compiled only: the dev cluster's 2
nodes of 2 CPUs cannot hold 4 x 4 tasks.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import distcomp
from distcomp.errors import UsageError

OWN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "own"


@pytest.mark.parametrize("name", ["seed-mpi-gpus", "seed-mpi-k8s", "seed-mpi-slots"])
def test_the_sbatch_script_has_the_slots_the_users_mpirun_needs(name: str) -> None:
    text = distcomp.compile(str(OWN / f"{name}.yaml"), "slurm").text
    assert "#SBATCH --nodes=4" in text and "#SBATCH --ntasks-per-node=4" in text
    record = json.loads(re.search(r"<<'DISTCOMP_NODE_RECORD'\n(.*?)\nDISTCOMP_NODE_RECORD", text, re.S).group(1))  # type: ignore[union-attr]
    assert (record["nodes"], record["world_size"]) == (4, 16)
    assert record["files"]["hostfile"].splitlines() == [f"{{{{node:{n}}}}} slots=4" for n in range(4)]


def test_an_np_over_the_slots_is_refused_at_compile() -> None:
    with pytest.raises(UsageError, match=r"-np 16\), but the spec's 2 node\(s\) x 4 slot\(s\) \(instance_type "
                                         r"Standard_NC24: 4 GPU\(s\)\) make 8"):
        distcomp.compile(str(OWN / "seed-mpi-gpus.yaml"), "slurm", nodes=2)
