"""Seed 003's MPI slots on Azure ML: the component's ``process_count_per_instance`` is the
slots the job's plan gives each node (Standard_NC24's 4 GPUs, the worker's GPU limit, or
``slots_per``), so 4 instances make the world of 16 the seed's -np asks for; azure-ai-ml
loads and validates what distcomp wrote. The seeds' own mpirun is dropped here, as the
compile's refusal of it says (Azure's distribution starts the ranks: test_issue34.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

OWN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "own"
BARE = """command: python mpi_rank.py --out ${{outputs.out}}
outputs: {out: {type: uri_folder}}
distributed: {mpi: {worker: {count: 4}}}
compute: {instance_type: Standard_NC24}
"""


def compiled(spec: Path, out: Path) -> object:
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "azureml", str(spec),
                           "--environment", "azureml:x:1", "--out", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    from azure.ai.ml import load_component

    component = load_component(str(out))
    component._validate(raise_error=True)  # azure-ai-ml's own offline check
    return component


@pytest.mark.slow
@pytest.mark.parametrize("name", ["seed-mpi-gpus", "seed-mpi-k8s", "seed-mpi-slots"])
def test_each_instance_gets_the_slots_of_the_seed(name: str, tmp_path: Path) -> None:
    seed = yaml.safe_load((OWN / f"{name}.yaml").read_text())
    (tmp_path / "seed.yaml").write_text(yaml.safe_dump({**seed, "command": "python mpi_rank.py --out ${{outputs.out}}"}))
    component = compiled(tmp_path / "seed.yaml", tmp_path / "c.yaml")
    assert component.distribution.type == "mpi"  # type: ignore[attr-defined]
    assert component.distribution.process_count_per_instance == 4  # type: ignore[attr-defined]  # before: 1
    assert component.resources.instance_count == 4  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_bare_command_runs_a_rank_per_gpu(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(BARE)
    component = compiled(tmp_path / "c.yaml", tmp_path / "out.yaml")
    assert (component.distribution.process_count_per_instance,  # type: ignore[attr-defined]
            component.resources.instance_count, component.resources.instance_type) == (4, 4, "Standard_NC24")  # type: ignore[attr-defined]
